// The MTP drafter's acceptance after a prefix-cache hit (engine/mtp_proposer.h, "Prefix
// caching"): a two-turn chat on a hybrid checkpoint with an MTP head, turn 2's prompt = turn 1's
// prompt + its answer + a new message, so turn 2 resumes from the prefix cache.
//
//   bench_mtp_prefix --model DIR [--k 2] [--prompt-len 64] [--answer 32] [--message 16]
//                    [--tokens 32] [--repeats 3] [--threads N] [--quantization none|int8|int4]
//                    [--kv-cache-mib 256]
//
// Three engines share one staged copy of the model, every one with speculation forced at k (no
// cost model): "restored" (the MTP context restored on the hit: the default), "at hit" (the
// context starts at the hit, as before it was shared: MtpProposer::set_restore_on_hit(false)),
// and "cold" (prefix caching off: turn 2 computed in full, the MTP context with it). Each repeat
// is a new conversation (new random tokens) run on the three in turn. Reported for turn 2: tokens
// served from the cache, drafted / accepted tokens and the acceptance rate, tokens per step and
// decode tokens/s (medians), and whether the outputs are identical (they must be).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"
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
  Args() : ChatBenchFlags{.k = 2, .answer = 32, .message = 16, .tokens = 32, .repeats = 3, .kv_cache_mib = 256} {}
  std::string quantization = "none";
  int prompt_len = 64;
};

LoadedEngine load(const Args& a, bool prefix_caching, bool restore,
                  const std::vector<std::shared_ptr<const Qwen3Weights>>& weights) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.reuse_weights = weights;
  o.scheduler.max_num_seqs = 1;
  o.cache.enable_prefix_caching = prefix_caching;
  o.scheduler.max_model_len = a.prompt_len + a.answer + a.message + a.tokens + 64;
  o.kv_cache_memory = int64_t(a.kv_cache_mib) << 20;
  o.show_progress = false;
  o.threads = a.threads;
  o.quantization = parse_quantization(a.quantization);
  SpeculativeConfig& s = o.scheduler.speculative;
  s.method = SpeculativeMethod::Mtp;
  s.num_speculative_tokens = a.k;
  s.cost_model = false;
  s.validate();
  LoadedEngine le = load_engine(o);
  auto* mtp = dynamic_cast<MtpProposer*>(le.loop->drafter());
  if (mtp == nullptr) fail("bench_mtp_prefix: the engine's drafter is not the MTP head");
  mtp->set_restore_on_hit(restore);
  return le;
}

struct Series {
  std::string name;
  std::vector<double> tok_s;
  int64_t cached = 0, drafted = 0, accepted = 0, tokens = 0, steps = 0;
};

int run(const Args& a) {
  std::vector<LoadedEngine> engines;
  engines.push_back(load(a, true, true, {}));
  const auto shared = engines.front().weights;
  engines.push_back(load(a, true, false, shared));
  engines.push_back(load(a, false, true, shared));
  std::vector<Series> series = {{"restored"}, {"at hit"}, {"cold"}};
  std::printf("model %s (%s), backend %s, %d threads, MTP k %d (forced), prompt %d, answer %d, message %d, "
              "turn 2 decodes %d tokens, %d repeats\n",
              a.model.c_str(), a.quantization.c_str(), engines.front().backend_name.c_str(), engines.front().threads, a.k,
              a.prompt_len, a.answer, a.message, a.tokens, a.repeats);
  std::mt19937_64 rng(11);
  bool identical = true;
  for (int r = 0; r < a.repeats; ++r) {
    const std::vector<int32_t> p = random_tokens(rng, a.prompt_len), msg = random_tokens(rng, a.message);
    std::vector<int32_t> reference;
    for (size_t e = 0; e < engines.size(); ++e) {
      const TwoTurns chat = run_two_turns(*engines[e].loop, p, msg, a.answer, a.tokens, "c" + std::to_string(r));
      const bench::GreedyRun& t2 = chat.t2;
      if (e == 0) reference = chat.output;
      else identical = identical && chat.output == reference;
      Series& s = series[e];
      s.tok_s.push_back(t2.decode_tok_s);
      s.cached += t2.cached;
      s.drafted += t2.spec.num_draft_tokens;
      s.accepted += t2.spec.num_accepted_tokens;
      s.tokens += int64_t(t2.tokens.size());
      s.steps += t2.steps;
    }
  }
  std::printf("%-9s %14s %9s %9s %11s %12s %13s %9s\n", "turn 2", "cached tokens", "drafted", "accepted", "acceptance",
              "tokens/step", "decode tok/s", "vs cold");
  const double cold = median(series[2].tok_s);
  for (const Series& s : series)
    std::printf("%-9s %14lld %9lld %9lld %10.1f%% %12.2f %13.2f %8.2fx\n", s.name.c_str(), (long long)s.cached,
                (long long)s.drafted, (long long)s.accepted, s.drafted ? 100.0 * double(s.accepted) / double(s.drafted) : 0.0,
                s.steps ? double(s.tokens) / double(s.steps) : 0.0, median(s.tok_s),
                cold > 0 ? median(s.tok_s) / cold : 0.0);
  std::printf("outputs identical across the three: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  auto flag = [&](FlagReader& r) {
    if (r.flag() == "--prompt-len") a.prompt_len = r.number(1);
    else if (r.flag() == "--quantization") a.quantization = r.value();
    else return bench::read_chat_bench_flag(r, a);
    return true;
  };
  return bench::bench_main(
      "bench_mtp_prefix", argc, argv, flag, [&] { return !a.model.empty(); },
      "--model DIR [--k 2] [--prompt-len 64] [--answer 32] ...", [&] { return run(a); });
}
