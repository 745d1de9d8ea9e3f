// Whole-model speed at batch 1 (issue: "fast on real shapes").
//
//   bench_model --model DIR [--threads N] [--runs 5] [--contexts 128,2048] [--prompts 128,512]
//               [--decode-batches 1,16] [--matmul-precision highest|high|medium]
//               [--cpu-linear-kernel auto|f32|bf16dot|amx] [--kv-cache-dtype bf16|fp32|int8|fp8]
//
// Decode: tokens/s of one sequence whose cache already holds `context` tokens (each measured
// step is one token at position context + i). Prefill: tokens/s for a prompt of N tokens in one
// forward call. Medians of --runs runs. Decode is compared with the memory-bandwidth bound:
// every weight byte and the cached K/V of every earlier position are read once per token
// (bytes/token ÷ measured read bandwidth = the fastest possible step), so "fraction of bound" =
// bound time / measured time, with the bandwidth read again just before each decode run (median
// of the per-run ratios; the start-up figure is shown).
// Batched decode (--decode-batches): B sequences, each with 128 cached tokens, one new token each
// per step — the engine's decode step under continuous batching. While the step stays bound by
// weight bytes, its time grows far slower than B (the weights are read once for all B rows); its
// roofline is max(bytes read ÷ bandwidth, matrix FLOPs ÷ matrix peak), both measured in this run.
// Prefill is compared with the matrix peak of the backend's own instructions (AMX tiles, AVX-512
// BF16 dot products or f32 FMA, divided by the bf16 parts of x: 2 at high), measured in this run:
// "of peak" counts the FLOPs of the linear layers (attention's are left out, so it understates).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_common.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/progress.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;
using bench::parse_int_list;

// Bytes a decode step must read: every projection, the lm_head and one embedding row
// (norm gammas are negligible).
// Multiply-adds of the linear layers for one token (all layers), and of the lm_head.
struct LinearMacs {
  double layers = 0, lm_head = 0;
};
LinearMacs linear_macs(const Qwen3Weights& w) {
  LinearMacs m;
  auto macs = [](const LinearWeight& l) { return double(l.n_out) * double(l.k_in); };
  for (const auto& L : w.layers) m.layers += macs(L.qkv) + macs(L.o_proj) + macs(L.gate_up) + macs(L.down);
  m.lm_head = macs(w.lm_head);
  return m;
}

// Bytes of weights one decode step reads: every linear as staged (quantized ones with their
// scales and zero points).
size_t weight_bytes_per_token(const Qwen3Weights& w, const Backend& be) {
  size_t b = 0;
  auto lin = [&](const LinearWeight& l) {
    if (l.format != WeightFormat::Float) return be.packed_quantized_bytes(l.format, l.n_out, l.k_in, l.group);
    return static_cast<size_t>(l.n_out * l.k_in) * dtype_size(l.dtype);
  };
  for (const auto& L : w.layers) b += lin(L.qkv) + lin(L.o_proj) + lin(L.gate_up) + lin(L.down);
  return b + lin(w.lm_head);
}

// Bytes of cached K and V one new token reads when `ctx` tokens precede it: every layer's K and
// V rows for positions [0, ctx], all KV heads (8-bit caches: codes and row scales).
double kv_bytes_per_token(const ModelConfig& c, double ctx, DType kv) {
  return (ctx + 1) * c.num_hidden_layers * 2.0 * c.num_key_value_heads * double(kv_row_bytes(kv, c.head_dim));
}

// B sequences with `ctx` cached tokens each step one token together; prints the step time and
// tokens/s (B per step). Each sequence owns its own blocks in a fresh cache.
void bench_decode_batch(Qwen3Model& m, int B, int runs, double bound_s, double bw, double macs_per_row, double peak,
                        DType kv) {
  const int32_t bs = 16, ctx = 128, steps = 8;
  const int32_t per_seq = (ctx + steps + 1 + bs - 1) / bs;
  KvCache cache(m.kv_cache_spec(int64_t(B) * per_seq, bs, kv));
  std::vector<int32_t> tables(size_t(B) * per_seq);
  std::iota(tables.begin(), tables.end(), 0);
  std::vector<int32_t> ids(ctx + steps + 1);
  for (size_t i = 0; i < ids.size(); i++) ids[i] = 1000 + int32_t(i * 7919) % 50000;
  std::vector<float> logits(size_t(B) * m.vocab_size());
  ForwardBatch fb;
  auto step = [&](int start, int n) {  // every sequence: n tokens at positions start..
    fb.clear();
    fb.max_blocks_per_seq = per_seq;
    for (int b = 0; b < B; b++)
      fb.add_sequence(ids.data() + start, n, start, tables.data() + size_t(b) * per_seq, per_seq, bs,
                      ForwardBatch::Logits::Last);
    auto t0 = Clock::now();
    m.forward(fb, cache, logits.data());
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  step(0, ctx);  // prefill every sequence's context
  std::vector<double> t;
  for (int r = 0; r < runs; r++) {
    double sum = 0;
    for (int i = 0; i < steps; i++) sum += step(ctx + i, 1);
    t.push_back(sum / steps);
  }
  const double s = median(t);
  // Bytes read per step: the weights once, and every sequence's cached K and V (bf16) per layer.
  const ModelConfig& c = m.config();
  const double kv_bytes = B * kv_bytes_per_token(c, ctx + (steps - 1) / 2.0, kv);
  const double roof = std::max(bound_s + kv_bytes / bw, 2.0 * macs_per_row * B / peak);
  std::printf("decode batch %-3d @ ctx %-6d %12.2f %12.2f %9.1f%%  (step %.1f ms; roofline %.1f ms, %.2fx of it)\n", B,
              ctx, B / s, s * 1e3 / B, 100.0 * bound_s / s, s * 1e3, roof * 1e3, s / roof);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, precision = "high", kernel = "auto", quantization = "none", kv_name = "bf16";
  int threads = 0, runs = 5, group = 64;
  std::vector<int> contexts = {128, 2048}, prompts = {128, 512}, decode_batches;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--contexts") && i + 1 < argc) contexts = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--prompts") && i + 1 < argc) prompts = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--matmul-precision") && i + 1 < argc) precision = argv[++i];
    else if (!std::strcmp(argv[i], "--decode-batches") && i + 1 < argc) decode_batches = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--cpu-linear-kernel") && i + 1 < argc) kernel = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization") && i + 1 < argc) quantization = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization-group") && i + 1 < argc) group = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kv-cache-dtype") && i + 1 < argc) kv_name = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_model --model DIR [--threads N] [--runs 5] [--contexts 128,2048] [--prompts 128,512] [--decode-batches 1,16] [--matmul-precision high] [--cpu-linear-kernel auto] [--quantization none|int8|int4] [--quantization-group 64] [--kv-cache-dtype bf16|fp32|int8|fp8]\n");
      return 2;
    }
  }
  if (model.empty() || runs < 1) {
    std::fprintf(stderr, "bench_model: --model DIR is required\n");
    return 2;
  }
  try {
    if (threads <= 0) threads = bench::bench_threads();
    const DType kv = parse_kv_cache_dtype(kv_name);
    auto backend = make_cpu_backend(threads, {}, parse_matmul_precision(precision), parse_cpu_linear_kernel(kernel));
    auto ck = Checkpoint::open(model);
    StagingOptions so;
    so.quantization = parse_quantization(quantization);
    so.int4_group = group;
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, so);
    ck.reset();
    Qwen3Model m(w, *backend);
    const ModelConfig& c = w.config;
    const int32_t bs = 16;
    // An empty list (e.g. --contexts '') skips that part.
    const int max_ctx = std::max(contexts.empty() ? 16 : *std::max_element(contexts.begin(), contexts.end()) + 64,
                                 prompts.empty() ? 16 : *std::max_element(prompts.begin(), prompts.end()) + 16);
    const int32_t nblocks = (max_ctx + bs - 1) / bs;
    KvCache cache(m.kv_cache_spec(nblocks, bs, kv));
    std::vector<int32_t> table(nblocks);
    std::iota(table.begin(), table.end(), 0);
    std::vector<float> logits(static_cast<size_t>(c.vocab_size));
    std::vector<int32_t> ids(max_ctx);
    for (int i = 0; i < max_ctx; i++) ids[i] = 1000 + (i * 7919) % 50000;

    ForwardBatch fb;
    auto run = [&](int start, int n) {  // n tokens at positions start.., logits of the last
      fb.clear();
      fb.max_blocks_per_seq = nblocks;
      fb.add_sequence(ids.data() + start, n, start, table.data(), nblocks, bs, ForwardBatch::Logits::Last);
      auto t0 = Clock::now();
      m.forward(fb, cache, logits.data());
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };

    const char* acts = quantized_activations(w.layer_format, *backend);
    std::printf("model %s: %d layers, hidden %lld, %s, weights %s%s%s%s, backend %s, %d threads, KV cache %s\n",
                model.c_str(), c.num_hidden_layers, static_cast<long long>(c.hidden_size), dtype_name(w.embed_dtype),
                w.weight_formats.c_str(), *acts ? " (" : "", acts, *acts ? ")" : "", backend->name(), threads,
                kv_cache_dtype_name(kv));
    const double bw = bench::bandwidth_bound();
    const size_t bytes_tok = weight_bytes_per_token(w, *backend);
    const double bound_s = bytes_tok / bw;
    std::printf("memory bandwidth bound: %.2f GB/s read; %.1f MB of weights per token -> at most %.1f tokens/s\n",
                bw / 1e9, bytes_tok / 1e6, 1.0 / bound_s);
    const double peak = bench::matrix_peak_flops(backend->name());
    const LinearMacs macs = linear_macs(w);
    std::printf("matrix peak of %s: %.0f GFLOP/s (%s); %.2f GFLOP of linear layers per token\n", backend->name(),
                peak / 1e9, describe_cpu_linear_choice().c_str(), 2.0 * (macs.layers + macs.lm_head) / 1e9);

    run(0, 16);  // warm-up (page faults in the KV cache and activations)
    std::printf("%-28s %12s %12s %10s\n", "case", "tokens/s", "ms/token", "of bound");
    for (int ctx : contexts) {
      // Fill the cache up to ctx once, then time single-token steps at ctx, ctx+1, ...
      for (int s = 0; s < ctx; s += 512) run(s, std::min(512, ctx - s));
      // The host's bandwidth moves with other tenants' load, so each run is compared with the
      // bandwidth read just before it; the fraction printed is the median of those ratios. A step
      // reads the weights and the cached K and V of every earlier position (mean over the steps).
      std::vector<double> t, frac;
      const int steps = 8;
      const double read_tok = double(bytes_tok) + kv_bytes_per_token(c, ctx + (steps - 1) / 2.0, kv);
      for (int r = 0; r < runs; r++) {
        const double bw_r = bench::read_bandwidth(size_t(1) << 30, 3).best;
        double sum = 0;
        for (int i = 0; i < steps; i++) sum += run(ctx + i, 1);
        t.push_back(sum / steps);
        frac.push_back(read_tok / bw_r / t.back());
      }
      double s = median(t);
      std::printf("decode @ context %-11d %12.2f %12.2f %9.1f%%  (%.1f MB read per token, %.1f of them K/V)\n", ctx, 1.0 / s,
                  s * 1e3, 100.0 * median(frac), read_tok / 1e6, (read_tok - bytes_tok) / 1e6);
      std::fflush(stdout);
    }
    for (int p : prompts) {
      std::vector<double> t;
      for (int r = 0; r < runs; r++) t.push_back(run(0, p));
      double s = median(t);
      const double flops = 2.0 * (macs.layers * p + macs.lm_head);  // logits of the last token only
      std::printf("prefill %-20d %12.1f %12.3f %9.1f%% of peak\n", p, p / s, s * 1e3 / p, 100.0 * flops / s / peak);
      std::fflush(stdout);
    }
    for (int B : decode_batches) bench_decode_batch(m, B, runs, bound_s, bw, macs.layers + macs.lm_head, peak, kv);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_model: error: %s\n", e.what());
    return 1;
  }
}
