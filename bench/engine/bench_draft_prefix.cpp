// The draft model's prefix cache (engine/draft_kv_blocks.h) in a chat's second turn: turn 1's
// prompt is a --history-token conversation, turn 2's is that prompt + turn 1's answer + a new
// --message-token user message, so the target's prefix cache serves almost all of turn 2's prompt.
//
//   bench_draft_prefix --model DIR --draft DIR [--k 4] [--history 2048] [--answer 32]
//                      [--message 64] [--tokens 8] [--repeats 5] [--threads N]
//                      [--kv-cache-mib 512]
//
// Three engines share one staged copy of the target (the draft is staged per engine): "draft
// cache" (the draft restores its cached blocks on the hit: the default), "no draft cache" (the
// draft's prefix cache turned off, DraftModelProposer::set_prefix_cache(false): it prefills the
// whole turn-2 prompt in the hit's step, as before the cache), both with speculation forced at k
// (no cost model, so the draft always runs), and "plain" (no speculation). Each repeat is a new
// conversation (new random tokens) run on the three engines, in an order that rotates from repeat
// to repeat so load changes on a shared host weigh on all alike. Reported per engine: turn 2's
// time to first token (median, min, max over the repeats), turn 1's (a full prefill, for scale),
// turn 2's tokens served from the target's cache, the draft's restored and computed tokens in
// turn 2 (means), and whether all outputs are identical (they must be).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/model_runner.h"
#include "parallel/replicas/load_replicas.h"

#include "flag_reader.h"  // bench/engine
#include "greedy_run.h"

using namespace pypto;
using bench::FlagReader;
using bench::median;
using bench::random_tokens;
using bench::run_two_turns;
using bench::TwoTurns;

namespace {

struct Args : bench::ChatBenchFlags {
  Args() : ChatBenchFlags{.k = 4, .answer = 32, .message = 64, .tokens = 8, .repeats = 5, .kv_cache_mib = 512} {}
  std::string draft;
  int history = 2048;
};

// k 0: plain decoding.
LoadedEngine load(const Args& a, int k, const std::vector<std::shared_ptr<const Qwen3Weights>>& weights) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.reuse_weights = weights;
  o.scheduler.max_num_seqs = 1;
  o.scheduler.max_model_len = a.history + a.answer + a.message + a.tokens + 64;
  o.kv_cache_memory = int64_t(a.kv_cache_mib) << 20;
  o.show_progress = false;
  o.prefault_kv_cache = true;
  o.threads = a.threads;
  if (k > 0) {
    SpeculativeConfig& s = o.scheduler.speculative;
    s.method = SpeculativeMethod::DraftModel;
    s.draft_model = a.draft;
    s.num_speculative_tokens = k;
    s.cost_model = false;
    s.validate();
  }
  return load_engine(o);
}

DraftModelProposer* drafter_of(const LoadedEngine& e) { return dynamic_cast<DraftModelProposer*>(e.loop->drafter()); }

struct Series {
  std::string name;
  std::vector<double> ttft2, ttft1;
  int64_t cached = 0, draft_hit = 0, draft_computed = 0;
};

int run(const Args& a) {
  std::vector<LoadedEngine> engines;
  engines.push_back(load(a, a.k, {}));
  const auto shared = engines.front().weights;
  engines.push_back(load(a, a.k, shared));
  engines.push_back(load(a, 0, shared));
  if (!drafter_of(engines[0]) || !drafter_of(engines[1]))
    fail("bench_draft_prefix: the engine's drafter is not a draft model");
  drafter_of(engines[1])->set_prefix_cache(false);
  std::vector<Series> series = {{"draft cache"}, {"no draft cache"}, {"plain"}};
  std::printf("model %s, draft %s, backend %s, %d threads, k %d (forced), history %d, answer %d, "
              "message %d, turn 2 decodes %d tokens, %d repeats (engine order rotating)\n",
              a.model.c_str(), a.draft.c_str(), engines.front().backend_name.c_str(), engines.front().threads, a.k,
              a.history, a.answer, a.message,
              a.tokens, a.repeats);
  std::mt19937_64 rng(23);
  bool identical = true;
  for (int r = 0; r < a.repeats; ++r) {
    const std::vector<int32_t> history = random_tokens(rng, a.history), msg = random_tokens(rng, a.message);
    std::vector<int32_t> reference;
    for (size_t i = 0; i < engines.size(); ++i) {
      const size_t e = (size_t(r) + i) % engines.size();
      EngineLoop& loop = *engines[e].loop;
      DraftModelProposer* d = drafter_of(engines[e]);
      int64_t hit0 = 0, computed0 = 0;
      const TwoTurns chat = run_two_turns(loop, history, msg, a.answer, a.tokens, "c" + std::to_string(r), [&] {
        hit0 = d ? d->prefix_hit_tokens() : 0;
        computed0 = d ? d->prefill_tokens() + d->catch_up_tokens() : 0;
      });
      const bench::GreedyRun &t1 = chat.t1, &t2 = chat.t2;
      if (reference.empty()) reference = chat.output;
      else identical = identical && chat.output == reference;
      Series& s = series[e];
      s.ttft1.push_back(t1.ttft_s);
      s.ttft2.push_back(t2.ttft_s);
      s.cached += t2.cached;
      if (d) {
        s.draft_hit += d->prefix_hit_tokens() - hit0;
        s.draft_computed += d->prefill_tokens() + d->catch_up_tokens() - computed0;
      }
    }
  }
  std::printf("%-15s %12s %10s %10s %12s %13s %14s %15s %9s\n", "engine", "turn 2 TTFT", "min", "max", "turn 1 TTFT",
              "cached (tgt)", "draft restored", "draft computed", "vs plain");
  const double plain = median(series[2].ttft2);
  for (const Series& s : series) {
    const auto [lo, hi] = std::minmax_element(s.ttft2.begin(), s.ttft2.end());
    std::printf("%-15s %10.1f ms %7.1f ms %7.1f ms %9.1f ms %13lld %14lld %15lld %8.2fx\n", s.name.c_str(),
                1e3 * median(s.ttft2), 1e3 * *lo, 1e3 * *hi, 1e3 * median(s.ttft1), (long long)(s.cached / a.repeats),
                (long long)(s.draft_hit / a.repeats), (long long)(s.draft_computed / a.repeats),
                plain > 0 ? median(s.ttft2) / plain : 0.0);
  }
  const double with = median(series[0].ttft2), without = median(series[1].ttft2);
  std::printf("turn 2 TTFT with the draft's cache / without: %.2fx (%.1f / %.1f ms)\n",
              without > 0 ? with / without : 0.0,
              1e3 * with, 1e3 * without);
  std::printf("outputs identical across the three: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  auto flag = [&](FlagReader& r) {
    if (r.flag() == "--draft") a.draft = r.value();
    else if (r.flag() == "--history") a.history = r.number(1);
    else return bench::read_chat_bench_flag(r, a);
    return true;
  };
  return bench::bench_main(
      "bench_draft_prefix", argc, argv, flag, [&] { return !a.model.empty() && !a.draft.empty(); },
      "--model DIR --draft DIR [--k 4] [--history 2048] ...", [&] { return run(a); });
}
