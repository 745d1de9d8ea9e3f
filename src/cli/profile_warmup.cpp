#include "cli/profile_warmup.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

namespace pypto::cli {

std::vector<EngineLoop*> replica_loops(const LoadedEngine& le) {
  std::vector<EngineLoop*> loops;
  if (le.loop) loops.push_back(le.loop.get());
  for (const std::unique_ptr<EngineLoop>& l : le.more_loops) loops.push_back(l.get());
  return loops;
}

double warm_up_replicas(const std::vector<EngineLoop*>& loops, size_t prompt_len, int64_t vocab_size,
                        int32_t max_tokens) {
  EngineRequest req;
  for (size_t i = 0; i < std::max<size_t>(1, prompt_len); ++i)
    req.prompt_token_ids.push_back(int32_t((i * 7919 + 13) % size_t(vocab_size)));
  req.params.max_tokens = max_tokens;
  req.params.ignore_eos = true;
  req.params.temperature = 0.0f;
  const auto t0 = std::chrono::steady_clock::now();
  // All replicas at once: they run in parallel, as they will in the recorded run.
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t r = 0; r < loops.size(); ++r) {
    req.request_id = "profile-warmup-" + std::to_string(r);
    streams.push_back(loops[r]->add_request(req));
  }
  for (const std::shared_ptr<RequestStream>& s : streams)
    while (s->next()) {}
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pypto::cli
