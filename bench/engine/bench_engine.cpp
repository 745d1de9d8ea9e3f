// Engine-level benchmarks on a real model (qwen3-0.6b preset in the figures).
//
//   bench_engine throughput --model DIR [--num-requests 64] [--max-num-seqs 16] [--seed 0]
//                [--prompt-min 32 --prompt-max 512 --output-min 32 --output-max 256]
//     64 requests with seeded random prompt/output lengths, all submitted at once, greedy with
//     ignore_eos so each produces exactly its output length. Reports output tokens/s at
//     --max-num-seqs against batch-1 decode tokens/s (one request of the median prompt length,
//     measured alone over 32 tokens, just before and just after the batched run: the mean):
//     continuous batching reads the weights once per step for the whole batch, so the ratio
//     approaches the batch size while a step stays memory-bound (on a 2-core CPU it does not:
//     16 rows of bf16-dot work take about as long as reading the weights; docs/status.md).
//     The KV pool is prefaulted at load (steady state). --max-num-batched-tokens and
//     --long-prefill-token-threshold set the scheduler's step budget and chunk size, --block-size
//     the tokens per KV block (default 16, as the server).
//
//   bench_engine prefix --model DIR [--prefix-len 1000] [--num-requests 16] [--suffix-len 16]
//     16 requests sharing a 1,000-token prefix, sent one after another (each waits for the
//     previous to finish) with prefix caching on, then off: prompt tokens actually computed and
//     time to first token (median), on vs off.
//
//   Both take --tp N [--devices 0,1,..] to run the engine as one replica of N tensor-parallel
//   ranks (load_replicas; rank r pinned to core group r, default devices 0..N-1), and
//   --matmul-precision highest|high|medium (default high, as the server's flag).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "engine/model_runner.h"
#include "parallel/device_groups.h"
#include "parallel/replicas/load_replicas.h"
#include "greedy_run.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

using pypto::bench::median;

namespace {

struct Args {
  std::string mode, model;
  int num_requests = -1, max_num_seqs = 16, prefix_len = 1000, suffix_len = 16;
  int prompt_min = 32, prompt_max = 512, output_min = 32, output_max = 256;
  uint64_t seed = 0;
  std::string kv_cache_memory = "2GiB";
  int64_t max_num_batched_tokens = SchedulerConfig{}.max_num_batched_tokens;
  int64_t long_prefill_token_threshold = SchedulerConfig{}.long_prefill_token_threshold;
  int block_size = CacheConfig{}.block_size;
  int tp = 1;
  std::string devices;  // default with --tp N: 0..N-1
  std::string matmul_precision = matmul_precision_name(kDefaultMatmulPrecision);
};

LoadedEngine load(const Args& a, int max_num_seqs, bool prefix_caching, int64_t max_len) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.scheduler.max_num_seqs = max_num_seqs;
  o.scheduler.max_model_len = max_len;
  o.scheduler.max_num_batched_tokens = a.max_num_batched_tokens;
  o.scheduler.long_prefill_token_threshold = a.long_prefill_token_threshold;
  o.cache.enable_prefix_caching = prefix_caching;
  o.cache.block_size = a.block_size;
  o.kv_cache_memory = static_cast<int64_t>(parse_byte_size("--kv-cache-memory", a.kv_cache_memory.c_str()));
  o.show_progress = false;
  o.prefault_kv_cache = true;  // steady state: a server that has run a while has mapped its pool
  o.matmul_precision = parse_matmul_precision(a.matmul_precision);
  if (a.tp == 1 && a.devices.empty()) return load_engine(o);
  // One replica of tp ranks: le.loop is still the whole engine.
  ReplicaLoadOptions r;
  r.engine = o;
  std::string devices = a.devices;
  if (devices.empty())
    for (int d = 0; d < a.tp; ++d) devices += (d ? "," : "") + std::to_string(d);
  r.layout = plan_parallel_layout(0, devices, a.tp, 1, "", available_cores());
  return load_replicas(r);
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int32_t> tok(1000, 100000);
  std::vector<int32_t> ids(n);
  for (auto& t : ids) t = tok(rng);
  return ids;
}

EngineRequest make_request(const std::string& id, std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0.0f;
  r.params.ignore_eos = true;
  return r;
}

struct RunResult {
  double seconds = 0;
  int64_t output_tokens = 0;
  std::vector<double> ttft;
  int64_t computed_prompt_tokens = 0;
};

// Submits all requests at once (or one by one when `sequential`) and waits for all of them.
RunResult run_requests(EngineLoop& loop, const std::vector<EngineRequest>& reqs, bool sequential, Progress* progress) {
  RunResult r;
  const auto t0 = Clock::now();
  auto consume = [&](std::shared_ptr<RequestStream> s, Clock::time_point submitted) {
    bool first = true;
    while (auto out = s->next()) {
      if (first && !out->new_token_ids.empty()) {
        r.ttft.push_back(std::chrono::duration<double>(Clock::now() - submitted).count());
        first = false;
      }
      r.output_tokens += static_cast<int64_t>(out->new_token_ids.size());
      if (out->finish_reason && out->finish_reason != FinishReason::Length)
        fail("request ", out->request_id, " finished early: ", out->error);
      if (out->request_finished) {
        r.computed_prompt_tokens += out->num_prompt_tokens - out->num_cached_tokens;
        if (progress) progress->advance(1);
      }
    }
  };
  if (sequential) {
    for (const auto& q : reqs) consume(loop.add_request(q), Clock::now());
  } else {
    std::vector<std::pair<std::shared_ptr<RequestStream>, Clock::time_point>> streams;
    for (const auto& q : reqs) streams.emplace_back(loop.add_request(q), Clock::now());
    for (auto& [s, t] : streams) consume(s, t);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

int bench_throughput(const Args& a) {
  const int n = a.num_requests > 0 ? a.num_requests : 64;
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<int> plen(a.prompt_min, a.prompt_max), olen(a.output_min, a.output_max);
  std::vector<EngineRequest> reqs;
  std::vector<int> prompt_lens;
  for (int i = 0; i < n; i++) {
    int p = plen(rng), o = olen(rng);
    prompt_lens.push_back(p);
    reqs.push_back(make_request("t" + std::to_string(i), random_prompt(rng, p), o));
  }
  // Room for the longest request and for the batch-1 probe below (median prompt + 33 tokens).
  const int64_t max_len = std::max(a.prompt_max + a.output_max, a.prompt_max + 33);
  LoadedEngine le = load(a, a.max_num_seqs, /*prefix_caching=*/true, max_len);
  std::printf("model %s, backend %s, tp %d, %d threads per rank, KV %s\n", a.model.c_str(), le.backend_name.c_str(),
              le.tp, le.threads, le.capacity.summary().c_str());

  // Batch-1 decode: one request alone; decode tokens/s from the time after its first token. It is
  // bound by memory bandwidth, which other tenants of a shared host move by ±20 % from minute to
  // minute, so it is measured just before and just after the batched run and the mean is used.
  std::sort(prompt_lens.begin(), prompt_lens.end());
  const int median_prompt = prompt_lens[prompt_lens.size() / 2];
  const std::vector<int32_t> single_prompt = random_prompt(rng, median_prompt);
  run_requests(*le.loop, {make_request("warmup", random_prompt(rng, 16), 4)}, true, nullptr);
  auto batch1 = [&](const char* id) {
    RunResult one = run_requests(*le.loop, {make_request(id, single_prompt, 33)}, true, nullptr);
    return (one.output_tokens - 1) / (one.seconds - one.ttft[0]);
  };
  const double before = batch1("single-before");

  Progress progress("throughput", n);
  RunResult all = run_requests(*le.loop, reqs, false, &progress);
  progress.finish();
  const double after = batch1("single-after");
  const double batch1_tps = (before + after) / 2;
  std::printf("batch-1 decode: %.2f tokens/s (%.2f before, %.2f after; prompt %d, 32 decode steps)\n", batch1_tps,
              before, after, median_prompt);
  const double tps = all.output_tokens / all.seconds;
  std::printf("%d requests at max-num-seqs %d: %lld output tokens in %.1f s = %.2f tokens/s (%.2fx batch-1 decode)\n",
              n, a.max_num_seqs, static_cast<long long>(all.output_tokens), all.seconds, tps, tps / batch1_tps);
  std::printf("{\"batch1_decode_tps\": %.3f, \"throughput_tps\": %.3f, \"ratio\": %.3f, \"requests\": %d, "
              "\"max_num_seqs\": %d}\n",
              batch1_tps, tps, tps / batch1_tps, n, a.max_num_seqs);
  le.loop->shutdown();
  return 0;
}

int bench_prefix(const Args& a) {
  const int n = a.num_requests > 0 ? a.num_requests : 16;
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> prefix = random_prompt(rng, a.prefix_len);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < n; i++) {
    std::vector<int32_t> p = prefix;
    auto suffix = random_prompt(rng, a.suffix_len);
    p.insert(p.end(), suffix.begin(), suffix.end());
    reqs.push_back(make_request("p" + std::to_string(i), std::move(p), 1));
  }
  std::map<bool, RunResult> res;
  for (bool on : {true, false}) {
    LoadedEngine le = load(a, 16, on, a.prefix_len + a.suffix_len + 8);
    Progress progress(on ? "prefix cache on" : "prefix cache off", n);
    res[on] = run_requests(*le.loop, reqs, true, &progress);
    progress.finish();
    le.loop->shutdown();
  }
  const int64_t total_prompt = static_cast<int64_t>(n) * (a.prefix_len + a.suffix_len);
  for (bool on : {true, false})
    std::printf("prefix cache %-3s: %lld of %lld prompt tokens computed, TTFT median %.3f s (first request %.3f s)\n",
                on ? "on" : "off", static_cast<long long>(res[on].computed_prompt_tokens),
                static_cast<long long>(total_prompt), median(res[on].ttft), res[on].ttft.front());
  std::printf("{\"computed_on\": %lld, \"computed_off\": %lld, \"ttft_on_s\": %.4f, \"ttft_off_s\": %.4f}\n",
              static_cast<long long>(res[true].computed_prompt_tokens),
              static_cast<long long>(res[false].computed_prompt_tokens), median(res[true].ttft), median(res[false].ttft));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_engine throughput|prefix --model DIR [options] (see the file's header)\n");
    return 2;
  }
  a.mode = argv[1];
  for (int i = 2; i < argc; i++) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_engine: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    std::string f = argv[i];
    if (f == "--model") a.model = next();
    else if (f == "--num-requests") a.num_requests = std::atoi(next());
    else if (f == "--max-num-seqs") a.max_num_seqs = std::atoi(next());
    else if (f == "--seed") a.seed = std::strtoull(next(), nullptr, 10);
    else if (f == "--prompt-min") a.prompt_min = std::atoi(next());
    else if (f == "--prompt-max") a.prompt_max = std::atoi(next());
    else if (f == "--output-min") a.output_min = std::atoi(next());
    else if (f == "--output-max") a.output_max = std::atoi(next());
    else if (f == "--prefix-len") a.prefix_len = std::atoi(next());
    else if (f == "--suffix-len") a.suffix_len = std::atoi(next());
    else if (f == "--max-num-batched-tokens") a.max_num_batched_tokens = std::atoll(next());
    else if (f == "--long-prefill-token-threshold") a.long_prefill_token_threshold = std::atoll(next());
    else if (f == "--kv-cache-memory") a.kv_cache_memory = next();
    else if (f == "--block-size") {
      const char* v = next();
      char* end = nullptr;
      const long bs = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || bs <= 0 || bs > 4096) {
        std::fprintf(stderr, "bench_engine: --block-size must be a whole number of tokens in 1..4096, got '%s'\n", v);
        return 2;
      }
      a.block_size = static_cast<int>(bs);
    }
    else if (f == "--tp") a.tp = std::atoi(next());
    else if (f == "--devices") a.devices = next();
    else if (f == "--matmul-precision") a.matmul_precision = next();
    else {
      std::fprintf(stderr, "bench_engine: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "bench_engine: --model DIR is required\n");
    return 2;
  }
  if (a.tp < 1) {
    std::fprintf(stderr, "bench_engine: --tp must be a positive number of ranks\n");
    return 2;
  }
  try {
    if (a.mode == "throughput") return bench_throughput(a);
    if (a.mode == "prefix") return bench_prefix(a);
    std::fprintf(stderr, "bench_engine: mode must be throughput or prefix, got %s\n", a.mode.c_str());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_engine: error: %s\n", e.what());
    return 1;
  }
}
