// Speculative decoding against plain decoding on a real model, one request at a time (batch 1,
// where decode is most memory-bound and speculation pays most), with the cost model choosing k
// (the default, engine/spec_cost_model.h) and with speculation forced ("cost_model": false):
//
//   bench_spec_decode --model DIR [--method ngram|draft_model|mtp|eagle3] [--k 4 | --k 1,2,3]
//                     [--tokens 64] [--prompt-len 64] [--prompts copy,repeat,random]
//                     [--lookup-min 2] [--lookup-max 4] [--repeats 3] [--threads N]
//                     [--max-num-seqs 4] [--kv-cache-mib 512] [--no-prefix-caching]
//                     [--matmul-precision high] [--quantization none|int8|int4]
//                     [--draft DIR [--draft-quantization none|int8|int4]]
//
// Methods: ngram (prompt lookup, the default), draft_model (--draft DIR; --draft equal to --model
// is the accept-all case), mtp (the checkpoint's own MTP head: a hybrid with mtp.* tensors; made
// for the always-accepting `make-test-model --mtp oracle`, where the figures show the costs),
// eagle3 (an EAGLE-3 head: --draft DIR, by default MODEL/eagle3 where `make-test-model --eagle3
// oracle|random` writes it; oracle accepts every greedy draft, random almost none).
// This replaces bench_mtp: `bench_mtp --model DIR --k 1,2,3` is `bench_spec_decode --method mtp
// --model DIR --k 1,2,3 --prompts random`.
//
// Prompts (--prompts, default all three for ngram, random for the others):
//   copy    a random prompt P, the model's own plain continuation C of P, then P again: the model
//           tends to continue with C, which the n-gram proposer finds in the prompt;
//   repeat  a random 16-token block repeated to --prompt-len (repetitive prompt text);
//   random  random tokens (nothing to look up for n-gram: speculation must cost nothing).
// Per k and prompt, three engines stay loaded (plain, cost model, forced) and the runs alternate
// plain / cost model / forced, --repeats times, so load changes on a shared host weigh on all
// alike; medians. Reported: decode tokens/s (first token to last), the ratios against plain,
// drafted / accepted tokens and tokens per step of both speculative engines, the model time
// (execute: forward + the MTP / EAGLE-3 head rows the executor runs) and the scheduling time
// (the drafter's passes run there) per step, and whether every output equals the plain run's (it
// must).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "engine/model_runner.h"
#include "engine/spec_cost_report.h"
#include "model/weight_staging.h"
#include "parallel/replicas/load_replicas.h"

#include "greedy_run.h"  // bench/engine

using namespace pypto;
using bench::GreedyRun;
using bench::median;
using bench::random_tokens;
using bench::run_greedy;

namespace {

struct Args {
  std::string model, method = "ngram";
  std::vector<int> ks = {4};
  int tokens = 64, prompt_len = 64, lookup_min = 2, lookup_max = 4, repeats = 3, threads = 0;
  // Per engine (three are loaded): sequences, KV pool, prefix caching. A full-depth hybrid's state
  // (150 MiB per sequence for the 27B shape) is kept per slot, per snapshot and per draft position,
  // so large models want --max-num-seqs 1 --no-prefix-caching.
  int max_num_seqs = 4, kv_cache_mib = 512;
  bool prefix_caching = true;
  std::vector<std::string> prompts;  // empty: the method's default
  std::string draft, draft_quantization = "none", quantization = "none";
  std::string matmul_precision = matmul_precision_name(kDefaultMatmulPrecision);
};

struct Case {
  std::string name;
  std::vector<int32_t> prompt;
};

// k 0: plain decoding. cost_model: whether the cost model chooses k (else every step drafts k).
// weights: the staged slices of an earlier engine (empty: stage them), so every engine of the run
// shares one copy of the target (a full-depth 27B checkpoint fits once, not three times).
LoadedEngine load(const Args& a, int k, bool cost_model, const std::vector<std::shared_ptr<const Qwen3Weights>>& weights) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.reuse_weights = weights;
  o.scheduler.max_num_seqs = a.max_num_seqs;
  o.cache.enable_prefix_caching = a.prefix_caching;
  o.scheduler.max_model_len = 4 * a.prompt_len + 4 * a.tokens + 64;
  o.kv_cache_memory = int64_t(a.kv_cache_mib) << 20;
  o.show_progress = false;
  o.prefault_kv_cache = true;
  o.threads = a.threads;
  o.matmul_precision = parse_matmul_precision(a.matmul_precision);
  o.quantization = parse_quantization(a.quantization);
  SpeculativeConfig& s = o.scheduler.speculative;
  if (k > 0) {
    s.num_speculative_tokens = k;
    s.cost_model = cost_model;
    if (a.method == "draft_model") {
      s.method = SpeculativeMethod::DraftModel;
      s.draft_model = a.draft;
      s.draft_quantization = a.draft_quantization;
    } else if (a.method == "mtp") {
      s.method = SpeculativeMethod::Mtp;
    } else if (a.method == "eagle3") {
      s.method = SpeculativeMethod::Eagle3;
      s.draft_model = a.draft;
    } else {
      s.method = SpeculativeMethod::Ngram;
      s.prompt_lookup_min = a.lookup_min;
      s.prompt_lookup_max = a.lookup_max;
    }
    s.validate();
  }
  return load_engine(o);
}

// One speculative engine's runs of a case.
struct Series {
  std::vector<double> tok_s, execute_ms, schedule_ms;
  SpecDecodeStats spec;
  int64_t tokens = 0, steps = 0;
  void add(const GreedyRun& m) {
    tok_s.push_back(m.decode_tok_s);
    execute_ms.push_back(m.execute_ms);
    schedule_ms.push_back(m.schedule_ms);
    spec.num_draft_tokens += m.spec.num_draft_tokens;
    spec.num_accepted_tokens += m.spec.num_accepted_tokens;
    tokens += int64_t(m.tokens.size());
    steps += m.steps;
  }
};

int run(const Args& a) {
  std::mt19937_64 rng(7);
  // The first speculative engine stages the target (with the MTP head when method mtp needs it);
  // the plain engine and the others share its slices.
  std::optional<LoadedEngine> first_cm(load(a, a.ks.front(), true, {}));
  const std::vector<std::shared_ptr<const Qwen3Weights>> shared = first_cm->weights;
  LoadedEngine plain_engine = load(a, 0, false, shared);
  const std::string drafter = a.method == "ngram"    ? "n-gram " + std::to_string(a.lookup_min) + ".." + std::to_string(a.lookup_max)
                              : a.method == "mtp"    ? std::string("the checkpoint's MTP head")
                              : a.method == "eagle3" ? "EAGLE-3 head " + a.draft
                                                     : "draft model " + a.draft + " (" + a.draft_quantization + ")";
  std::printf("model %s (%s), backend %s, %d threads, %s, %d tokens per request, prompt %d, %d repeats\n",
              a.model.c_str(), a.quantization.c_str(), plain_engine.backend_name.c_str(), plain_engine.threads,
              drafter.c_str(), a.tokens, a.prompt_len, a.repeats);
  const std::vector<int32_t> p = random_tokens(rng, a.prompt_len);
  run_greedy(*plain_engine.loop, p, 4, "warmup");
  std::vector<Case> all;
  {
    Case copy{"copy", p};
    const std::vector<int32_t> cont = run_greedy(*plain_engine.loop, p, a.tokens, "cont").tokens;
    copy.prompt.insert(copy.prompt.end(), cont.begin(), cont.end());
    copy.prompt.insert(copy.prompt.end(), p.begin(), p.end());
    Case repeat{"repeat", {}};
    const std::vector<int32_t> block = random_tokens(rng, 16);
    while (int(repeat.prompt.size()) < a.prompt_len) repeat.prompt.insert(repeat.prompt.end(), block.begin(), block.end());
    all = {copy, repeat, Case{"random", random_tokens(rng, a.prompt_len)}};
  }
  std::vector<std::string> wanted = a.prompts;
  if (wanted.empty()) wanted = a.method == "ngram" ? std::vector<std::string>{"copy", "repeat", "random"}
                                                   : std::vector<std::string>{"random"};
  std::vector<Case> cases;
  for (const std::string& w : wanted) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Case& c) { return c.name == w; });
    if (it == all.end()) fail("--prompts: unknown prompt '", w, "'; allowed: copy, repeat, random");
    cases.push_back(*it);
  }

  std::printf("%-3s %-7s %9s | %9s %6s %7s %7s %6s | %9s %6s %7s %7s %6s | %15s %15s %5s\n", "k", "prompt", "plain",
              "cost-mdl", "ratio", "drafted", "accept", "tok/st", "forced", "ratio", "drafted", "accept", "tok/st",
              "exec ms p/c/f", "sched ms p/c/f", "same");
  bool all_identical = true;
  for (int k : a.ks) {
    LoadedEngine cm_engine = first_cm ? std::move(*first_cm) : load(a, k, true, shared);
    first_cm.reset();
    LoadedEngine forced_engine = load(a, k, false, shared);
    run_greedy(*cm_engine.loop, p, 4, "warmup");
    run_greedy(*forced_engine.loop, p, 4, "warmup");
    for (const Case& c : cases) {
      std::vector<double> ptoks, pexec, psched;
      Series cm, forced;
      bool identical = true;
      for (int r = 0; r < a.repeats; ++r) {
        const std::string id = c.name + "-" + std::to_string(k) + "-" + std::to_string(r);
        const GreedyRun pm = run_greedy(*plain_engine.loop, c.prompt, a.tokens, "plain-" + id);
        const GreedyRun cmm = run_greedy(*cm_engine.loop, c.prompt, a.tokens, "cm-" + id);
        const GreedyRun fm = run_greedy(*forced_engine.loop, c.prompt, a.tokens, "forced-" + id);
        ptoks.push_back(pm.decode_tok_s);
        pexec.push_back(pm.execute_ms);
        psched.push_back(pm.schedule_ms);
        cm.add(cmm);
        forced.add(fm);
        identical = identical && pm.tokens == cmm.tokens && pm.tokens == fm.tokens;
      }
      all_identical = all_identical && identical;
      const double pt = median(ptoks);
      auto cols = [&](const Series& s) {
        std::printf("%9.2f %5.2fx %7lld %6.1f%% %6.2f | ", median(s.tok_s), pt > 0 ? median(s.tok_s) / pt : 0.0,
                    static_cast<long long>(s.spec.num_draft_tokens), 100.0 * s.spec.acceptance_rate(),
                    s.steps ? double(s.tokens) / double(s.steps) : 0.0);
      };
      std::printf("%-3d %-7s %9.2f | ", k, c.name.c_str(), pt);
      cols(cm);
      cols(forced);
      std::printf("%4.1f/%4.1f/%4.1f  %4.1f/%4.1f/%4.1f  %5s\n", median(pexec), median(cm.execute_ms),
                  median(forced.execute_ms), median(psched), median(cm.schedule_ms), median(forced.schedule_ms),
                  identical ? "yes" : "NO");
    }
    // What the cost model decided over all of this k's runs (the same facts as /metrics).
    const EngineLoopStats st = cm_engine.loop->stats();
    std::printf("cost model, k %d, over all prompts:\n%s", k, format_spec_decode_section(st.spec_decode, st.spec_cost).c_str());
  }
  std::printf("(tok/s: decode, first token to last, median of %d; ratio: against plain in the same rounds; cost-mdl: the "
              "cost model chooses k; forced: \"cost_model\": false; drafted: draft tokens over all rounds; tok/st: tokens "
              "per engine step, the prefill step included; exec / sched ms: model / scheduling (drafting) time per "
              "step, plain / cost model / forced)\n",
              a.repeats);
  return all_identical ? 0 : 1;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool method_given = false, draft_quantization_given = false;
  for (int i = 1; i < argc; i++) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_spec_decode: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    const std::string f = argv[i];
    if (f == "--model") a.model = next();
    else if (f == "--method") a.method = next(), method_given = true;
    else if (f == "--k") {
      a.ks.clear();
      for (const std::string& k : split(next())) a.ks.push_back(std::atoi(k.c_str()));
    } else if (f == "--tokens") a.tokens = std::atoi(next());
    else if (f == "--prompt-len") a.prompt_len = std::atoi(next());
    else if (f == "--prompts") a.prompts = split(next());
    else if (f == "--lookup-min") a.lookup_min = std::atoi(next());
    else if (f == "--lookup-max") a.lookup_max = std::atoi(next());
    else if (f == "--matmul-precision") a.matmul_precision = next();
    else if (f == "--repeats") a.repeats = std::max(1, std::atoi(next()));
    else if (f == "--max-num-seqs") a.max_num_seqs = std::max(1, std::atoi(next()));
    else if (f == "--kv-cache-mib") a.kv_cache_mib = std::max(1, std::atoi(next()));
    else if (f == "--no-prefix-caching") a.prefix_caching = false;
    else if (f == "--threads") a.threads = std::atoi(next());
    else if (f == "--draft") a.draft = next();
    else if (f == "--draft-quantization") a.draft_quantization = next(), draft_quantization_given = true;
    else if (f == "--quantization") a.quantization = next();
    else {
      std::fprintf(stderr, "bench_spec_decode: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  if (!a.draft.empty() && !method_given) a.method = "draft_model";
  if (a.method == "eagle3" && a.draft.empty() && !a.model.empty()) a.draft = a.model + "/eagle3";
  const bool bad_k = a.ks.empty() || std::any_of(a.ks.begin(), a.ks.end(), [](int k) { return k < 1 || k > 16; });
  const bool drafts_from_dir = a.method == "draft_model" || a.method == "eagle3";
  if (a.model.empty() || a.tokens < 2 || a.prompt_len < 16 || bad_k ||
      (a.method != "ngram" && a.method != "draft_model" && a.method != "mtp" && a.method != "eagle3") ||
      drafts_from_dir != !a.draft.empty() || (draft_quantization_given && a.method != "draft_model")) {
    std::fprintf(stderr,
                 "usage: bench_spec_decode --model DIR [--method ngram|draft_model|mtp|eagle3] [--k 4 | --k 1,2,3 "
                 "(1..16)] [--tokens 64 (>= 2)] [--prompt-len 64 (>= 16)] [--prompts copy,repeat,random] [--draft DIR "
                 "(methods draft_model and eagle3, and only they; eagle3's default: MODEL/eagle3)] "
                 "[--draft-quantization none|int8|int4 (method draft_model)]\n");
    return 2;
  }
  try {
    return run(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_spec_decode: error: %s\n", e.what());
    return 1;
  }
}
