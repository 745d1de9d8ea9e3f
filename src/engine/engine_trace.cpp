#include "engine/engine_trace.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "core/profiler.h"

namespace pypto {
namespace {

// A request's rows in a step are a decode when they are its one next token, with its drafts when
// speculating (a verify step: 1 + num_draft_tokens rows); anything else — a prompt chunk, or the
// recompute of a preempted request — is prefill.
// prompt_tokens < 0: unknown (counted as prefill).
bool is_prefill(const ScheduledRequest& s, int64_t prompt_tokens) {
  return prompt_tokens < 0 || s.num_computed_tokens < prompt_tokens || s.num_scheduled_tokens - s.num_draft_tokens > 1;
}

}  // namespace

void trace_schedule(const SchedulerOutput& so, const Scheduler& scheduler) {
  if (!prof::active(prof::Level::E2E)) return;
  int64_t prefill = 0, decode = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    const Request* r = scheduler.get_request(s.req_id);
    const bool prefilling = is_prefill(s, r ? r->num_prompt_tokens() : -1);
    // A decode gives at least its one token (trace_update counts what a verify gave).
    (prefilling ? prefill : decode) += prefilling ? s.num_scheduled_tokens : 1;
    if (s.is_new) {
      // Sequence k of an n > 1 request is "<request id>\x1f<k>" (engine.cpp).
      const size_t sep = s.req_id.rfind('\x1f');
      prof::request_scheduled_first(s.req_id, sep == std::string::npos ? s.req_id : s.req_id.substr(0, sep));
    }
    prof::request_step(s.req_id, prefilling ? "prefill" : "decode", s.num_scheduled_tokens, s.num_computed_tokens);
  }
  prof::annotate(prefill, decode);
}

void trace_update(const SchedulerOutput& so, const Scheduler& scheduler, const std::vector<EngineCoreOutput>& outs) {
  if (!prof::active(prof::Level::E2E)) return;
  std::unordered_map<std::string_view, const EngineCoreOutput*> out_of;
  for (const EngineCoreOutput& o : outs) out_of.emplace(o.req_id, &o);
  int64_t prefill = 0, decode = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    const auto o = out_of.find(s.req_id);
    // A request that finished this step has left the scheduler: its output names its prompt.
    const Request* r = scheduler.get_request(s.req_id);
    const int64_t prompt = r ? r->num_prompt_tokens() : (o != out_of.end() ? o->second->num_prompt_tokens : -1);
    if (is_prefill(s, prompt)) {
      prefill += s.num_scheduled_tokens;
    } else {
      // Tokens the rows emitted: one per plain decode, 1 + accepted drafts per verify (at least
      // the one row, also for a request stopped without output).
      decode += std::max<int64_t>(1, o != out_of.end() ? int64_t(o->second->new_token_ids.size()) : 0);
    }
  }
  prof::annotate(prefill, decode);
}

}  // namespace pypto
