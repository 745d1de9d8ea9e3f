#pragma once
// The --profile warm-up of offline mode (cli/bench_profile.h): one short request on every engine
// replica, run before recording starts. With --dp > 1 each replica is its own engine with its own
// threads and first-touch costs (KV pages, per-thread buffers); warming only replica 0 left
// replicas 1.. to pay theirs inside the recorded run, inflating their TPOT.
#include <cstdint>
#include <vector>

#include "engine/engine_loop.h"
#include "engine/model_runner.h"

namespace pypto::cli {

// Every replica's engine loop: `loop` (replica 0), then `more_loops` (replicas 1..dp-1).
std::vector<EngineLoop*> replica_loops(const LoadedEngine& le);

// Sends one warm-up request (`prompt_len` synthetic ids that share no prefix with real prompts,
// `max_tokens` greedy tokens, eos ignored) straight to each loop (not through the router, so the
// routing counts stay those of the real prompts), all at once, and waits until every one has
// finished. Returns the wall time in seconds.
double warm_up_replicas(const std::vector<EngineLoop*>& loops, size_t prompt_len, int64_t vocab_size,
                        int32_t max_tokens = 4);

}  // namespace pypto::cli
