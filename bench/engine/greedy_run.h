#pragma once
// The engine benches' greedy request runner (bench_spec_decode, bench_mtp_prefix,
// bench_draft_prefix): one request, temperature 0 and EOS ignored (so it decodes exactly `tokens`
// tokens), through an engine loop, with what it cost read from the loop's counters before and after
// (the loop runs nothing else meanwhile); a chat's two turns made of such requests; and the two
// helpers the benches build their prompts and figures with.
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "engine/spec_decode_stats.h"

namespace pypto::bench {

struct GreedyRun {
  std::vector<int32_t> tokens;  // the output
  int64_t cached = 0;           // prompt tokens served from the prefix cache
  double ttft_s = 0;            // from adding the request to its first token
  double decode_tok_s = 0;      // (tokens - 1) / time from the first token to the last
  int64_t steps = 0;            // engine steps, the prefill steps included
  double execute_ms = 0, schedule_ms = 0;  // model / scheduling (drafting) time per step
  SpecDecodeStats spec;         // drafts, draft tokens and accepted tokens of the run
};

// Runs request `id` over `prompt` to `tokens` output tokens. Throws Error naming the request when
// it fails.
GreedyRun run_greedy(EngineLoop& loop, const std::vector<int32_t>& prompt, int tokens, const std::string& id);

// Two turns of a chat on `loop`: turn 1 over `history` to `answer` tokens, then turn 2 over
// history + turn 1's output + `message` to `tokens` tokens, so the prefix cache can serve all but
// the message. `before_turn2` (if set) runs between the turns, to read counters turn 2 moves.
struct TwoTurns {
  GreedyRun t1, t2;
  std::vector<int32_t> output;  // turn 1's tokens, then turn 2's
};
TwoTurns run_two_turns(EngineLoop& loop, const std::vector<int32_t>& history, const std::vector<int32_t>& message,
                       int answer, int tokens, const std::string& id, const std::function<void()>& before_turn2 = {});

// n token ids drawn uniformly from [1000, 100000] (inside every Qwen3 vocabulary, no special ids).
std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n);

// The upper median (0 for none).
double median(std::vector<double> v);

}  // namespace pypto::bench
