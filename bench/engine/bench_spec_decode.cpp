// Speculative decoding (n-gram) against plain decoding on a real model, one request at a time
// (batch 1, where decode is most memory-bound and speculation pays most):
//
//   bench_spec_decode --model DIR [--k 4] [--tokens 64] [--prompt-len 64] [--lookup-min 2]
//                     [--lookup-max 4] [--repeats 3] [--matmul-precision high]
//                     [--quantization none|int8|int4]
//                     [--draft DIR [--draft-quantization none|int8|int4]]
//
// With --draft the speculative engine drafts with that model (method draft_model) instead of
// n-gram lookup; --draft equal to --model is the accept-all case (acceptance 1: the speed-up
// then shows the cost of k draft passes + one (k + 1)-row verify against k + 1 plain steps).
//
// Three prompts, each decoded greedily for --tokens tokens with speculation off, then on:
//   copy    a random prompt P, the model's own plain continuation C of P, then P again: the model
//           tends to continue with C, which the n-gram proposer finds in the prompt (a random-
//           weight model copies rarely otherwise; this is the repetitive case it can show);
//   repeat  a random 16-token block repeated to --prompt-len (repetitive prompt text);
//   random  random tokens (nothing to look up: drafts are rare, speculation must cost nothing).
// Reports decode tokens/s (first token to last), drafted / accepted tokens, mean tokens per
// step, the model time per step, and whether the tokens equal the plain run's (they must).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "engine/model_runner.h"
#include "model/weight_staging.h"
#include "parallel/replicas/load_replicas.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model;
  int k = 4, tokens = 64, prompt_len = 64, lookup_min = 2, lookup_max = 4, repeats = 3;
  std::string draft, draft_quantization = "none", quantization = "none";
  std::string matmul_precision = matmul_precision_name(kDefaultMatmulPrecision);
};

struct Case {
  std::string name;
  std::vector<int32_t> prompt;
};

struct Measured {
  std::vector<int32_t> tokens;
  double decode_tok_s = 0;
  int64_t steps = 0;
  double execute_s = 0;
  SpecDecodeStats spec;
};

LoadedEngine load(const Args& a, bool speculate) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.scheduler.max_num_seqs = 4;
  o.scheduler.max_model_len = 4 * a.prompt_len + 4 * a.tokens + 64;
  o.kv_cache_memory = int64_t(1) << 30;
  o.show_progress = false;
  o.prefault_kv_cache = true;
  o.matmul_precision = parse_matmul_precision(a.matmul_precision);
  o.quantization = parse_quantization(a.quantization);
  if (speculate && !a.draft.empty()) {
    o.scheduler.speculative.method = SpeculativeMethod::DraftModel;
    o.scheduler.speculative.num_speculative_tokens = a.k;
    o.scheduler.speculative.draft_model = a.draft;
    o.scheduler.speculative.draft_quantization = a.draft_quantization;
    o.scheduler.speculative.validate();
  } else if (speculate) {
    o.scheduler.speculative.method = SpeculativeMethod::Ngram;
    o.scheduler.speculative.num_speculative_tokens = a.k;
    o.scheduler.speculative.prompt_lookup_min = a.lookup_min;
    o.scheduler.speculative.prompt_lookup_max = a.lookup_max;
    o.scheduler.speculative.validate();
  }
  return load_engine(o);
}

Measured decode(LoadedEngine& le, const std::vector<int32_t>& prompt, int tokens, const std::string& id) {
  const EngineLoopStats before = le.loop->stats();
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = prompt;
  r.params.temperature = 0.0f;
  r.params.max_tokens = tokens;
  r.params.ignore_eos = true;
  Measured m;
  Clock::time_point first{}, last{};
  auto stream = le.loop->add_request(r);
  while (auto out = stream->next()) {
    if (!out->new_token_ids.empty()) {
      if (m.tokens.empty()) first = Clock::now();
      last = Clock::now();
    }
    m.tokens.insert(m.tokens.end(), out->new_token_ids.begin(), out->new_token_ids.end());
    if (out->finish_reason == FinishReason::Error) fail("request ", id, " failed: ", out->error);
  }
  const EngineLoopStats after = le.loop->stats();
  const double s = std::chrono::duration<double>(last - first).count();
  m.decode_tok_s = s > 0 ? double(m.tokens.size() - 1) / s : 0;
  m.steps = after.engine.steps - before.engine.steps;
  m.execute_s = after.engine.execute_seconds - before.engine.execute_seconds;
  m.spec.num_drafts = after.spec_decode.num_drafts - before.spec_decode.num_drafts;
  m.spec.num_draft_tokens = after.spec_decode.num_draft_tokens - before.spec_decode.num_draft_tokens;
  m.spec.num_accepted_tokens = after.spec_decode.num_accepted_tokens - before.spec_decode.num_accepted_tokens;
  return m;
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

int run(const Args& a) {
  std::mt19937_64 rng(7);
  // Both engines stay loaded and the runs alternate plain / speculative, so a machine whose load
  // changes (shared CI hosts) weighs on both alike; medians over --repeats.
  LoadedEngine plain_engine = load(a, false);
  LoadedEngine spec_engine = load(a, true);
  const std::string drafter = a.draft.empty() ? "n-gram " + std::to_string(a.lookup_min) + ".." + std::to_string(a.lookup_max)
                                              : "draft model " + a.draft + " (" + a.draft_quantization + ")";
  std::printf("model %s, backend %s, %d threads, k %d, %s, %d tokens per request, %d repeats\n", a.model.c_str(),
              plain_engine.backend_name.c_str(), plain_engine.threads, a.k, drafter.c_str(), a.tokens, a.repeats);
  const std::vector<int32_t> p = random_tokens(rng, a.prompt_len);
  decode(plain_engine, p, 4, "warmup");
  decode(spec_engine, p, 4, "warmup");
  Case copy{"copy", p};
  const std::vector<int32_t> cont = decode(plain_engine, p, a.tokens, "cont").tokens;
  copy.prompt.insert(copy.prompt.end(), cont.begin(), cont.end());
  copy.prompt.insert(copy.prompt.end(), p.begin(), p.end());
  Case repeat{"repeat", {}};
  const std::vector<int32_t> block = random_tokens(rng, 16);
  while (int(repeat.prompt.size()) < a.prompt_len) repeat.prompt.insert(repeat.prompt.end(), block.begin(), block.end());
  const std::vector<Case> cases = {copy, repeat, Case{"random", random_tokens(rng, a.prompt_len)}};

  std::printf("%-7s %12s %12s %8s %9s %9s %9s %9s %14s %10s\n", "prompt", "plain tok/s", "spec tok/s", "speedup",
              "drafted", "accepted", "accept %", "tok/step", "ms/step p/s", "identical");
  bool all_identical = true;
  for (const Case& c : cases) {
    std::vector<double> ptoks, stoks, pms, sms;
    SpecDecodeStats sd;
    int64_t spec_tokens = 0, spec_steps = 0;
    bool identical = true;
    for (int r = 0; r < a.repeats; ++r) {
      const std::string id = c.name + "-" + std::to_string(r);
      const Measured pm = decode(plain_engine, c.prompt, a.tokens, "plain-" + id);
      const Measured sm = decode(spec_engine, c.prompt, a.tokens, "spec-" + id);
      ptoks.push_back(pm.decode_tok_s);
      stoks.push_back(sm.decode_tok_s);
      pms.push_back(pm.steps ? 1e3 * pm.execute_s / double(pm.steps) : 0);
      sms.push_back(sm.steps ? 1e3 * sm.execute_s / double(sm.steps) : 0);
      sd.num_draft_tokens += sm.spec.num_draft_tokens;
      sd.num_accepted_tokens += sm.spec.num_accepted_tokens;
      spec_tokens += int64_t(sm.tokens.size());
      spec_steps += sm.steps;
      identical = identical && pm.tokens == sm.tokens;
    }
    all_identical = all_identical && identical;
    const double pt = median(ptoks), st = median(stoks);
    std::printf("%-7s %12.2f %12.2f %7.2fx %9lld %9lld %8.1f%% %9.2f %6.1f/%-7.1f %10s\n", c.name.c_str(), pt, st,
                pt > 0 ? st / pt : 0.0, static_cast<long long>(sd.num_draft_tokens),
                static_cast<long long>(sd.num_accepted_tokens), 100.0 * sd.acceptance_rate(),
                spec_steps ? double(spec_tokens) / double(spec_steps) : 0.0, median(pms), median(sms),
                identical ? "yes" : "NO");
  }
  std::printf("(tok/s: decode, first token to last, median; ms/step: model time per engine step, median, plain/"
              "speculative; tok/step: tokens per speculative step, the prefill step included)\n");
  return all_identical ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
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
    else if (f == "--k") a.k = std::atoi(next());
    else if (f == "--tokens") a.tokens = std::atoi(next());
    else if (f == "--prompt-len") a.prompt_len = std::atoi(next());
    else if (f == "--lookup-min") a.lookup_min = std::atoi(next());
    else if (f == "--lookup-max") a.lookup_max = std::atoi(next());
    else if (f == "--matmul-precision") a.matmul_precision = next();
    else if (f == "--repeats") a.repeats = std::max(1, std::atoi(next()));
    else if (f == "--draft") a.draft = next();
    else if (f == "--draft-quantization") a.draft_quantization = next();
    else if (f == "--quantization") a.quantization = next();
    else {
      std::fprintf(stderr, "bench_spec_decode: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  if (a.model.empty() || a.tokens < 2 || a.prompt_len < 16) {
    std::fprintf(stderr, "usage: bench_spec_decode --model DIR [--k 4] [--tokens 64 (>= 2)] [--prompt-len 64 (>= 16)]\n");
    return 2;
  }
  try {
    return run(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_spec_decode: error: %s\n", e.what());
    return 1;
  }
}
