// The cost of a speculative verify step: one sequence computing n = k + 1 rows (its last token
// and k drafts, logits for every row) against the one-row decode step, k = 1..8, at one context.
//
//   bench_verify_rows --model DIR [--context 512] [--max-k 8] [--runs 7] [--quantization none|int8|int4]
//                     [--matmul-precision high]
//
// A decode step is bound by reading the weights, which a (k + 1)-row step reads once too, so its
// time should grow far slower than k + 1; each accepted draft then costs only that growth. The
// row counts are timed in turn within each run (1, 2, ..., k + 1, then again), so load from other
// tenants falls on all of them alike; medians over --runs. Hybrids (Qwen3.5 / Qwen3.6) verify
// with their Gated DeltaNet rollback on (a state copy after each draft row), each step accepting
// no draft, so the next starts one token later.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_common.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string model, quantization = "none", precision = matmul_precision_name(kDefaultMatmulPrecision);
  int context = 512, max_k = 8, runs = 7;
  for (int i = 1; i < argc; i++) {
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (!std::strcmp(argv[i], "--model")) model = value();
    else if (!std::strcmp(argv[i], "--context")) context = std::atoi(value());
    else if (!std::strcmp(argv[i], "--max-k")) max_k = std::atoi(value());
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(value());
    else if (!std::strcmp(argv[i], "--quantization")) quantization = value();
    else if (!std::strcmp(argv[i], "--matmul-precision")) precision = value();
    else {
      std::fprintf(stderr, "bench_verify_rows: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (model.empty() || context < 1 || max_k < 1 || runs < 1) {
    std::fprintf(stderr, "usage: bench_verify_rows --model DIR [--context 512] [--max-k 8] [--runs 7]\n");
    return 2;
  }
  try {
    const int threads = bench::bench_threads();
    auto backend = make_cpu_backend(threads, {}, parse_matmul_precision(precision), CpuLinearKernel::Auto);
    auto ck = Checkpoint::open(model);
    StagingOptions so;
    so.quantization = parse_quantization(quantization);
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, so);
    ck.reset();
    const bool hybrid = w.config.hybrid();
    if (hybrid) {  // one Gated DeltaNet state, with rollback entries at each draft row (model/gdn_rollback.h)
      w.state_slots = 1;
      w.state_rollback = max_k;
    }
    Qwen3Model m(w, *backend);
    const int32_t bs = 16;
    // Every timed step of a hybrid accepts no draft: the next starts one token later (its state
    // rolled back to the verified token), so the context grows by one per timed step.
    const int timed_steps = runs * (max_k + 1) + 1;
    const int32_t nblocks = (context + timed_steps + max_k + 1 + bs - 1) / bs + 1;
    KvCache cache(m.kv_cache_spec(nblocks, bs, DType::BF16));
    std::vector<int32_t> table(static_cast<size_t>(nblocks));
    std::iota(table.begin(), table.end(), 0);
    std::vector<int32_t> ids(size_t(context + timed_steps + max_k + 1));
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t(1000 + (i * 7919) % 50000);
    std::vector<float> logits(size_t(w.config.vocab_size) * size_t(max_k + 1));
    ForwardBatch fb;
    // n rows at positions start.., logits of every row (as a verify step asks for).
    auto step = [&](int start, int n, ForwardBatch::Logits want) {
      fb.clear();
      fb.max_blocks_per_seq = nblocks;
      fb.add_sequence(ids.data() + start, n, start, table.data(), nblocks, bs, want);
      if (hybrid) {
        fb.state_slots.push_back(0);
        fb.draft_rows.push_back(want == ForwardBatch::Logits::All ? n - 1 : 0);
      }
      const auto t0 = Clock::now();
      m.forward(fb, cache, logits.data());
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    for (int s = 0; s < context; s += 512) step(s, std::min(512, context - s), ForwardBatch::Logits::Last);
    int pos = context;  // a dense model repeats its steps at `context`; a hybrid moves on by one
    step(pos, 1, ForwardBatch::Logits::All);  // warm-up
    if (hybrid) ++pos;
    std::vector<std::vector<double>> t(size_t(max_k + 2));
    for (int r = 0; r < runs; ++r)
      for (int n = 1; n <= max_k + 1; ++n) {
        t[size_t(n)].push_back(step(pos, n, ForwardBatch::Logits::All));
        if (hybrid) ++pos;
      }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double one = median(t[1]);
    std::printf("model %s: %d layers, weights %s, backend %s, %d threads, context %d, median of %d\n", model.c_str(),
                w.config.num_hidden_layers, w.weight_formats.c_str(), backend->name(), threads, context, runs);
    std::printf("%-4s %6s %10s %14s\n", "k", "rows", "ms/step", "vs one row");
    for (int n = 1; n <= max_k + 1; ++n)
      std::printf("%-4d %6d %10.2f %13.3fx\n", n - 1, n, 1e3 * median(t[size_t(n)]), median(t[size_t(n)]) / one);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_verify_rows: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
