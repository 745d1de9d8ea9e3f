#include "greedy_run.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace pypto::bench {

GreedyRun run_greedy(EngineLoop& loop, const std::vector<int32_t>& prompt, int tokens, const std::string& id) {
  using Clock = std::chrono::steady_clock;
  const EngineLoopStats before = loop.stats();
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = prompt;
  r.params.temperature = 0.0f;
  r.params.max_tokens = tokens;
  r.params.ignore_eos = true;
  GreedyRun g;
  Clock::time_point first{}, last{};
  const Clock::time_point start = Clock::now();
  auto stream = loop.add_request(r);
  while (auto out = stream->next()) {
    if (!out->new_token_ids.empty()) {
      if (g.tokens.empty()) first = Clock::now();
      last = Clock::now();
    }
    g.tokens.insert(g.tokens.end(), out->new_token_ids.begin(), out->new_token_ids.end());
    if (out->finish_reason == FinishReason::Error) fail("request ", id, " failed: ", out->error);
    if (out->finish_reason) g.cached = out->num_cached_tokens;
  }
  const EngineLoopStats after = loop.stats();
  const double s = std::chrono::duration<double>(last - first).count();
  g.ttft_s = std::chrono::duration<double>(first - start).count();
  g.decode_tok_s = s > 0 ? double(g.tokens.size() - 1) / s : 0;
  g.steps = after.engine.steps - before.engine.steps;
  const double steps = double(std::max<int64_t>(1, g.steps));
  g.execute_ms = 1e3 * (after.engine.execute_seconds - before.engine.execute_seconds) / steps;
  g.schedule_ms = 1e3 * (after.engine.schedule_seconds - before.engine.schedule_seconds) / steps;
  g.spec.num_drafts = after.spec_decode.num_drafts - before.spec_decode.num_drafts;
  g.spec.num_draft_tokens = after.spec_decode.num_draft_tokens - before.spec_decode.num_draft_tokens;
  g.spec.num_accepted_tokens = after.spec_decode.num_accepted_tokens - before.spec_decode.num_accepted_tokens;
  return g;
}

TwoTurns run_two_turns(EngineLoop& loop, const std::vector<int32_t>& history, const std::vector<int32_t>& message,
                       int answer, int tokens, const std::string& id, const std::function<void()>& before_turn2) {
  TwoTurns r;
  r.t1 = run_greedy(loop, history, answer, id + "t1");
  std::vector<int32_t> p2 = history;
  p2.insert(p2.end(), r.t1.tokens.begin(), r.t1.tokens.end());
  p2.insert(p2.end(), message.begin(), message.end());
  if (before_turn2) before_turn2();
  r.t2 = run_greedy(loop, p2, tokens, id + "t2");
  r.output = r.t1.tokens;
  r.output.insert(r.output.end(), r.t2.tokens.begin(), r.t2.tokens.end());
  return r;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int32_t> tok(1000, 100000);
  std::vector<int32_t> ids(size_t(std::max(n, 0)));
  for (auto& t : ids) t = tok(rng);
  return ids;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace pypto::bench
