// Replicated vs vocab-parallel lm_head under tensor parallelism, measured at decode (one token):
//   t_layers  one forward of all layers without logits, single rank;
//   t_full    lm_head GEMV [1, hidden] x [vocab, hidden]^T (what rank 0 runs when it is replicated);
//   t_half    the same over vocab/2 rows (what each rank would run vocab-parallel, before a gather).
// Prints the decode step each design would give at TP=2 (ignoring all-reduce costs, identical in
// both): replicated ≈ t_layers/2 + t_full, vocab-parallel ≈ t_layers/2 + t_half. This measurement
// chose the design: the engine now ships the vocab-parallel lm_head (and embedding); it stages the
// model at TP=1 here to time both halves on one thread.
// Usage: bench_lm_head MODEL_DIR [iterations]   (one thread pinned to the first available core)
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/memory.h"
#include "io/checkpoint.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

template <typename F>
double median_ms(int iters, F f) {
  std::vector<double> t;
  f();  // warm
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [iterations]\n", argv[0]);
    return 2;
  }
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  int core = 0;
  while (!CPU_ISSET(core, &set)) ++core;
  auto backend = make_cpu_backend(1, {core});
  auto ck = Checkpoint::open(argv[1]);
  StagingOptions so;
  so.show_progress = false;
  Qwen3Weights w = stage_qwen3_weights(*ck, *backend, so);
  const ModelConfig& c = w.config;
  Qwen3Model model(w, *backend);
  const int32_t bs = 16, ctx = 64;  // decode at position 64
  KvCache cache(model.kv_cache_spec(ctx / bs + 1, bs, DType::BF16));
  std::vector<int32_t> blocks = {0, 1, 2, 3, 4};
  std::vector<int32_t> prompt(ctx);
  for (int i = 0; i < ctx; ++i) prompt[i] = (i * 7919 + 13) % 151643;
  ForwardBatch prefill;
  prefill.max_blocks_per_seq = 5;
  prefill.add_sequence(prompt.data(), ctx, 0, blocks.data(), 4, bs, ForwardBatch::Logits::None);
  model.forward(prefill, cache, nullptr);
  const int32_t tok = 42;
  ForwardBatch decode;
  decode.max_blocks_per_seq = 5;
  decode.add_sequence(&tok, 1, ctx, blocks.data(), 5, bs, ForwardBatch::Logits::None);
  const double t_layers = median_ms(iters, [&] { model.forward(decode, cache, nullptr); });

  const int64_t V = c.vocab_size, H = c.hidden_size;
  std::vector<float> x(H, 0.01f), y(V);
  const double t_full = median_ms(iters, [&] { backend->linear(x.data(), 1, w.lm_head, nullptr, y.data()); });
  // Half of the vocabulary packed on its own, as a vocab-parallel rank would hold it (rows of the
  // plain embedding table when tied; re-read from the checkpoint otherwise is the same size).
  LinearWeight half = w.lm_head;
  AlignedBuffer half_buf;
  if (w.embed_dtype == DType::BF16 || w.embed_dtype == DType::F16 || w.embed_dtype == DType::F32) {
    half_buf = AlignedBuffer(backend->packed_weight_bytes(w.embed_dtype, V / 2, H));
    backend->pack_weight(w.embed, w.embed_dtype, V / 2, H, half_buf.data());
    half.data = half_buf.data();
    half.dtype = w.embed_dtype;
    half.n_out = V / 2;
  }
  const double t_half = median_ms(iters, [&] { backend->linear(x.data(), 1, half, nullptr, y.data()); });
  const double lm_bytes = double(V) * H * dtype_size(w.embed_dtype);
  std::printf("model %s: %d layers, hidden %lld, vocab %lld, backend %s, 1 thread on core %d\n", argv[1],
              c.num_hidden_layers, (long long)H, (long long)V, backend->name(), core);
  std::printf("decode layers (no logits)  %8.3f ms\n", t_layers);
  std::printf("lm_head full  [%lld rows]  %8.3f ms  (%.1f GB/s)\n", (long long)V, t_full, lm_bytes / t_full / 1e6);
  std::printf("lm_head half  [%lld rows]  %8.3f ms\n", (long long)(V / 2), t_half);
  std::printf("TP=1 step                  %8.3f ms\n", t_layers + t_full);
  std::printf("TP=2 replicated lm_head    %8.3f ms  (layers/2 + full)\n", t_layers / 2 + t_full);
  std::printf("TP=2 vocab-parallel        %8.3f ms  (layers/2 + half, + a [1, vocab] gather)\n", t_layers / 2 + t_half);
  return 0;
}
