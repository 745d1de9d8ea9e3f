// Engine::finish_pooled: the end of a pooling engine's step. Pooling requests are prefill-only
// work in the same scheduler as generation: they are batched under the token budget, a long
// input is split into chunked-prefill steps, and the prefix cache serves shared prefixes. The
// step whose chunk reaches a request's last token gives it a row of the executor's output (the
// pooled vector or the classifier logits); the request finishes there and its KV blocks are freed
// (its full blocks stay in the prefix cache until evicted).
#include <unordered_map>

#include "core/error.h"
#include "core/profiler.h"
#include "engine/engine.h"

namespace pypto {

void Engine::finish_pooled(const SchedulerOutput& so, const ExecutorOutput& eo, std::vector<RequestOutput>& outs) {
  PYPTO_PROF_PHASE(prof::Level::E2E, "update");
  const auto t = std::chrono::steady_clock::now();
  const int64_t width = eo.vocab_size;
  std::unordered_map<std::string, int64_t> row_of;  // sequence id -> its output row
  int64_t rows = 0;
  for (const ScheduledRequest& s : so.scheduled)
    if (s.samples) row_of[s.req_id] = rows++;
  const std::vector<SampledToken> no_tokens(so.scheduled.size());  // pooling rows sample nothing
  const std::vector<EngineCoreOutput> core_outs = scheduler_.update_from_output(so, no_tokens);
  const auto produced = std::chrono::steady_clock::now();
  for (const EngineCoreOutput& o : core_outs) {
    RequestOutput out = to_output(o, produced);
    auto row = row_of.find(o.req_id);
    PYPTO_ASSERT(row != row_of.end(), "pooling request ", o.req_id, " finished without an output row");
    const float* v = eo.logits.data() + row->second * width;
    out.pooled.assign(v, v + width);
    out.times.first_token = out.times.last_token = produced;
    ++stats_.pooled_requests;
    finish_sequence(out);
    outs.push_back(std::move(out));
  }
  stats_.update_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace pypto
