// MTP speculative decoding (--speculative-config method mtp) against plain decoding on a hybrid
// checkpoint with an MTP head, one request at a time (batch 1):
//
//   bench_mtp --model DIR [--k 1,2,3] [--tokens 48] [--prompt-len 64] [--repeats 3]
//             [--quantization none|int8|int4] [--threads N] [--matmul-precision high|medium|highest]
//
// Made for the always-accepting checkpoint (make-test-model --preset qwen3.5-0.8b --mtp oracle):
// every draft is accepted, so the figures show the costs. Per k, plain and speculative runs
// alternate (both engines loaded), medians over --repeats: decode tokens/s and the speed-up,
// tokens per step, and per step the target's model time (execute: the (k + 1)-row verify plus
// the MTP rows the executor runs on the step's hidden states) and the scheduling time (the MTP's
// k draft passes run there, in MtpProposer::prepare), each against a plain step's. The tokens must
// equal the plain run's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
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
  std::vector<int> ks = {1, 2, 3};
  int tokens = 48, prompt_len = 64, repeats = 3, threads = 0;
  std::string quantization = "none";  // both engines' weights (the MTP head's too)
  std::string matmul_precision = matmul_precision_name(kDefaultMatmulPrecision);
};

struct Measured {
  std::vector<int32_t> tokens;
  double tok_s = 0, execute_ms = 0, schedule_ms = 0, tokens_per_step = 0;
  int64_t drafted = 0, accepted = 0;
};

LoadedEngine load(const Args& a, int k) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.scheduler.max_num_seqs = 2;
  o.scheduler.max_model_len = a.prompt_len + a.tokens + 64;
  o.kv_cache_memory = int64_t(256) << 20;
  o.show_progress = false;
  o.quantization = parse_quantization(a.quantization);
  o.threads = a.threads;
  o.matmul_precision = parse_matmul_precision(a.matmul_precision);
  if (k > 0) {
    o.scheduler.speculative.method = SpeculativeMethod::Mtp;
    o.scheduler.speculative.num_speculative_tokens = k;
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
  m.tok_s = s > 0 ? double(m.tokens.size() - 1) / s : 0;
  // Decode steps only: the first step is the prompt's prefill.
  const int64_t steps = after.engine.steps - before.engine.steps - 1;
  m.execute_ms = 1e3 * (after.engine.execute_seconds - before.engine.execute_seconds) / double(std::max<int64_t>(1, steps + 1));
  m.schedule_ms = 1e3 * (after.engine.schedule_seconds - before.engine.schedule_seconds) / double(std::max<int64_t>(1, steps + 1));
  m.tokens_per_step = double(m.tokens.size() - 1) / double(std::max<int64_t>(1, steps));
  m.drafted = after.spec_decode.num_draft_tokens - before.spec_decode.num_draft_tokens;
  m.accepted = after.spec_decode.num_accepted_tokens - before.spec_decode.num_accepted_tokens;
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int run(const Args& a) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int32_t> tok(1000, 100000);
  std::vector<int32_t> prompt(size_t(a.prompt_len));
  for (int32_t& t : prompt) t = tok(rng);
  LoadedEngine plain = load(a, 0);
  std::printf("model %s, backend %s, %d threads, %d tokens per request, prompt %d, %d repeats\n", a.model.c_str(),
              plain.backend_name.c_str(), plain.threads, a.tokens, a.prompt_len, a.repeats);
  decode(plain, prompt, 4, "warmup");
  std::printf("%-3s %11s %10s %8s %9s %9s %9s %17s %17s %9s\n", "k", "plain tok/s", "mtp tok/s", "speedup", "drafted",
              "accepted", "tok/step", "execute ms p/m", "schedule ms p/m", "identical");
  bool identical = true;
  for (int k : a.ks) {
    LoadedEngine spec = load(a, k);
    decode(spec, prompt, 4, "warmup");
    std::vector<double> pt, st, pe, se, ps, ss, tps;
    Measured last;
    for (int r = 0; r < a.repeats; ++r) {
      const Measured p = decode(plain, prompt, a.tokens, "p" + std::to_string(r));
      const Measured m = decode(spec, prompt, a.tokens, "m" + std::to_string(r));
      identical = identical && p.tokens == m.tokens;
      pt.push_back(p.tok_s), st.push_back(m.tok_s), pe.push_back(p.execute_ms), se.push_back(m.execute_ms);
      ps.push_back(p.schedule_ms), ss.push_back(m.schedule_ms), tps.push_back(m.tokens_per_step);
      last = m;
    }
    std::printf("%-3d %11.2f %10.2f %7.2fx %9lld %9lld %9.2f %8.1f / %6.1f %8.2f / %6.2f %9s\n", k, median(pt), median(st),
                median(st) / std::max(1e-9, median(pt)), (long long)last.drafted, (long long)last.accepted, median(tps),
                median(pe), median(se), median(ps), median(ss), identical ? "yes" : "NO");
  }
  return identical ? 0 : 1;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(f, " needs a value");
      return argv[++i];
    };
    if (f == "--model") a.model = next();
    else if (f == "--k") a.ks = parse_list(next());
    else if (f == "--tokens") a.tokens = std::stoi(next());
    else if (f == "--prompt-len") a.prompt_len = std::stoi(next());
    else if (f == "--repeats") a.repeats = std::stoi(next());
    else if (f == "--quantization") a.quantization = next();
    else if (f == "--threads") a.threads = std::stoi(next());
    else if (f == "--matmul-precision") a.matmul_precision = next();
    else fail("unknown flag ", f, " (bench_mtp --model DIR [--k 1,2,3] [--tokens N] [--prompt-len N] [--repeats N] ",
              "[--quantization none|int8|int4] [--threads N] [--matmul-precision high])");
  }
  if (a.model.empty()) fail("--model DIR is required");
  try {
    return run(a);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_mtp: %s\n", e.what());
    return 2;
  }
}
