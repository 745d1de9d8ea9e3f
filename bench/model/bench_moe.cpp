// Qwen3-MoE and Qwen3.5 / Qwen3.6 hybrid decode and prefill against the bound of the bytes a step
// actually reads (issues 29 and 36).
//
//   bench_moe --model DIR [--threads N] [--runs 5] [--batches 1,4,16] [--context 128]
//             [--prompt 512] [--matmul-precision high] [--quantization none|int8|int4]
//             [--quantization-group 64] [--ungrouped] [--gdn-prefill recurrent|chunked|recurrent,chunked]
//             [--profile]
//
// --prompt takes a list (e.g. 512,2048). --gdn-prefill (hybrids, model/gdn_prefill.h) with both
// forms runs each prefill with each form on the same staged weights, in alternating rounds (median
// of min(runs, 3) per form), and prints their ratio; decode uses the first form.
// --ungrouped runs the experts' products one op per expert (the backend's ops forwarded, except
// linear_grouped, which falls back to one linear per call): the grouped job against one op per
// expert, in the same process, on the same weights.
// --profile: after each batch's timed runs, one more run of its steps with kernel-level
// profiling on, and where that run's time went, op by op (ms per step, largest first).
// A decode step of B sequences (each with `context` cached tokens, one new token each) reads the
// dense weights once (attention projections, routers, dense MLP layers, lm_head), the K/V of
// every sequence, and each expert its tokens chose once: the distinct experts of the step, as the
// model counts them while it runs (Qwen3Model::moe_expert_bytes_read). The active-weight bound is
// those bytes over the read bandwidth measured just before each run (a hybrid adds its Gated
// DeltaNet layers' projections, the shared experts, and the f32 recurrent and conv state each
// sequence reads and writes per token; its K/V is counted for the full-attention layers only); "of bound" = bound time /
// measured time (median of the runs' ratios), "x bound" its inverse. Prefill: tokens/s of one
// prompt in one forward call, with the matrix peak of the backend measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_common.h"
#include "core/error.h"
#include "core/profiler.h"
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

// Weight bytes every decode step reads whatever the routing: attention projections (a hybrid's
// Gated DeltaNet layers: in_proj, its float b | a rows when quantized, out_proj), routers, shared
// experts with their gates, the MLPs of dense layers, the lm_head.
double dense_bytes_per_step(const Qwen3Weights& w, const Backend& be) {
  auto bytes = [&](const LinearWeight& l) { return l.n_out > 0 ? double(linear_weight_bytes(be, l)) : 0.0; };
  double b = bytes(w.lm_head);
  for (const auto& L : w.layers) {
    if (L.mixer == LayerMixer::GatedDeltaNet) b += bytes(L.gdn.in_proj) + bytes(L.gdn.in_proj_ba) + bytes(L.gdn.out_proj);
    else b += bytes(L.qkv) + bytes(L.o_proj);
    if (L.sparse)
      b += bytes(L.router) + bytes(L.shared_expert.gate_up) + bytes(L.shared_expert.down) + bytes(L.shared_expert.gate);
    else b += bytes(L.gate_up) + bytes(L.down);
  }
  return b;
}

// A hybrid's recurrent state bytes one sequence's decode token reads and writes: per Gated
// DeltaNet layer the conv state [K - 1, conv_dim] and the recurrent state [n_v, d_k, d_v], f32,
// each read once and written once.
double state_bytes_per_token(const ModelConfig& c) {
  if (!c.hybrid()) return 0;
  const int gdn = c.num_hidden_layers - c.num_full_attention_layers();
  const double per_layer = double(c.linear_conv_kernel_dim - 1) * double(c.gdn_conv_dim()) +
                           double(c.linear_num_value_heads) * c.linear_key_head_dim * c.linear_value_head_dim;
  return 2.0 * 4.0 * per_layer * gdn;
}

// Bytes of one expert (gate_up and down as staged), the same for every expert of the model.
double expert_bytes(const Qwen3Weights& w, const Backend& be) {
  for (const auto& L : w.layers)
    if (L.sparse) return double(linear_weight_bytes(be, L.experts[0].gate_up) + linear_weight_bytes(be, L.experts[0].down));
  return 0;
}

// Forwards every op to `inner` but linear_grouped, so the experts run one linear per call.
class Ungrouped final : public Backend {
 public:
  explicit Ungrouped(Backend& inner) : b_(inner) {}
  const char* name() const override { return b_.name(); }
  size_t packed_weight_bytes(DType d, int64_t n, int64_t k) const override { return b_.packed_weight_bytes(d, n, k); }
  void pack_weight(const void* s, DType d, int64_t n, int64_t k, void* dst) const override { b_.pack_weight(s, d, n, k, dst); }
  bool weight_layout_is_plain(DType d) const override { return b_.weight_layout_is_plain(d); }
  size_t packed_quantized_bytes(WeightFormat f, int64_t n, int64_t k, int32_t g) const override {
    return b_.packed_quantized_bytes(f, n, k, g);
  }
  void pack_quantized(const QuantizedWeight& s, void* d, int64_t r, int64_t n) const override { b_.pack_quantized(s, d, r, n); }
  void linear(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) override { b_.linear(x, m, w, bias, y); }
  void rms_norm(const float* x, const float* g, int64_t m, int64_t d, float eps, float* y) override { b_.rms_norm(x, g, m, d, eps, y); }
  void rope(float* x, const int32_t* p, int64_t m, int32_t h, int32_t hd, const RopeSpec& r) override { b_.rope(x, p, m, h, hd, r); }
  void silu_mul(const float* gu, int64_t m, int64_t i, float* out) override { b_.silu_mul(gu, m, i, out); }
  void embedding(const int32_t* ids, int64_t m, const void* t, DType d, int64_t dim, float* out) override {
    b_.embedding(ids, m, t, d, dim, out);
  }
  void weight_rows(const int32_t* ids, int64_t m, const LinearWeight& w, float* out) override { b_.weight_rows(ids, m, w, out); }
  void add_inplace(float* y, const float* x, int64_t n) override { b_.add_inplace(y, x, n); }
  void kv_store(const float* k, const float* v, const int64_t* s, int64_t m, const KvCacheLayer& c) override { b_.kv_store(k, v, s, m, c); }
  void paged_attention(const float* q, int64_t m, int32_t h, const KvCacheLayer& c, const AttentionBatch& b, float* out) override {
    b_.paged_attention(q, m, h, c, b, out);
  }
  QuantActivations quant_activations() const override { return b_.quant_activations(); }
  void synchronize() override { b_.synchronize(); }
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { b_.parallel_rows(n, fn); }

 private:
  Backend& b_;
};

// The "op" events of a profiled run, summed by name: ms per step, largest first, after the
// forward span's ms per step (the ops are its phases, host.* model code included: they abut).
void print_op_profile(const prof::Trace& trace, int steps) {
  std::vector<std::pair<std::string, double>> ops;
  double forward = 0;
  for (const prof::Event& e : trace.events) {
    if (!std::strcmp(e.name, "forward")) forward += double(e.dur_ns);
    if (std::strcmp(e.cat, "op") != 0) continue;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == e.name; });
    if (it == ops.end()) ops.emplace_back(e.name, double(e.dur_ns));
    else it->second += double(e.dur_ns);
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::printf("  profile: forward %.2f ms/step (profiling on)\n", forward / 1e6 / steps);
  for (const auto& [name, ns] : ops)
    if (ns / 1e6 / steps >= 0.01) std::printf("    %-28s %8.3f ms/step  %5.1f%%\n", name.c_str(), ns / 1e6 / steps, 100 * ns / forward);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, precision = "high", quantization = "none", gdn_prefill = "recurrent";
  int threads = 0, runs = 5, group = 64, ctx = 128;
  std::vector<int> prompts = {512};
  bool ungrouped = false, profile = false;
  std::vector<int> batches = {1, 4, 16};
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--batches") && i + 1 < argc) batches = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--context") && i + 1 < argc) ctx = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--prompt") && i + 1 < argc) prompts = parse_int_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--matmul-precision") && i + 1 < argc) precision = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization") && i + 1 < argc) quantization = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization-group") && i + 1 < argc) group = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--ungrouped")) ungrouped = true;
    else if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--gdn-prefill") && i + 1 < argc) gdn_prefill = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: bench_moe --model DIR [--threads N] [--runs 5] [--batches 1,4,16] [--context 128] "
                   "[--prompt 512] [--matmul-precision high] [--quantization none|int8|int4] [--quantization-group 64] [--ungrouped] [--gdn-prefill recurrent|chunked|recurrent,chunked] [--profile]\n");
      return 2;
    }
  }
  if (model.empty() || runs < 1 || ctx < 1) {
    std::fprintf(stderr, "bench_moe: --model DIR is required (and --runs, --context >= 1)\n");
    return 2;
  }
  try {
    if (threads <= 0) threads = bench::bench_threads();
    auto cpu = make_cpu_backend(threads, {}, parse_matmul_precision(precision));
    Ungrouped one_by_one(*cpu);
    Backend* backend = ungrouped ? static_cast<Backend*>(&one_by_one) : cpu.get();
    auto ck = Checkpoint::open(model);
    StagingOptions so;
    so.quantization = parse_quantization(quantization);
    so.int4_group = group;
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, so);
    ck.reset();
    const ModelConfig& c = w.config;
    if (c.num_experts <= 0 && !c.hybrid())
      fail("bench_moe: ", model, " is neither a MoE nor a hybrid model (num_experts is 0); bench_model measures it");
    int max_batch = 1;
    for (int B : batches) max_batch = std::max(max_batch, B);
    w.state_slots = max_batch;  // hybrids: one Gated DeltaNet state per sequence of the largest batch
    // One model per --gdn-prefill form over the same staged weights (the copies share the slab).
    std::vector<GdnPrefill> forms;
    for (size_t b = 0; b <= gdn_prefill.size();) {
      const size_t e = std::min(gdn_prefill.find(',', b), gdn_prefill.size());
      forms.push_back(parse_gdn_prefill(gdn_prefill.substr(b, e - b)));
      b = e + 1;
    }
    std::vector<std::unique_ptr<Qwen3Weights>> form_weights;
    std::vector<std::unique_ptr<Qwen3Model>> models;
    for (GdnPrefill f : forms) {
      form_weights.push_back(std::make_unique<Qwen3Weights>(w));
      form_weights.back()->gdn_prefill = f;
      models.push_back(std::make_unique<Qwen3Model>(*form_weights.back(), *backend));
    }
    w.gdn_prefill = forms[0];
    Qwen3Model& m = *models[0];
    const char* acts = quantized_activations(w.layer_format, *backend);
    int sparse = 0;
    for (const auto& L : w.layers) sparse += L.sparse;
    std::printf("model %s: %d layers (%d sparse, %d experts, top-%d, width %lld), weights %s%s%s%s, backend %s%s, %d threads%s%s\n",
                model.c_str(), c.num_hidden_layers, sparse, c.num_experts, c.num_experts_per_tok,
                static_cast<long long>(c.moe_intermediate_size), w.weight_formats.c_str(), *acts ? " (" : "", acts,
                *acts ? ")" : "", backend->name(), ungrouped ? " (experts one op each)" : "", threads,
                c.hybrid() ? ", --gdn-prefill " : "", c.hybrid() ? gdn_prefill.c_str() : "");
    const double dense = dense_bytes_per_step(w, *backend), expert = expert_bytes(w, *backend);
    const double state = state_bytes_per_token(c);
    const double bw0 = bench::bandwidth_bound();
    const double active = dense + double(sparse) * c.num_experts_per_tok * expert + state;
    std::printf("read bandwidth %.2f GB/s; per token: dense %.1f MB + %d x %d experts x %.2f MB + GDN state %.1f MB "
                "(read + written) = %.1f MB active -> at most %.1f tokens/s\n",
                bw0 / 1e9, dense / 1e6, sparse, c.num_experts_per_tok, expert / 1e6, state / 1e6, active / 1e6,
                bw0 / active);
    // K/V is kept by the full-attention layers only on a hybrid.
    const int kv_layers = c.hybrid() ? c.num_full_attention_layers() : c.num_hidden_layers;
    std::printf("%-22s %10s %10s %10s %9s %10s  %s\n", "case", "tokens/s", "ms/step", "of bound", "x bound",
                "MB/step", "experts read per sparse layer");

    // Decode steps go on from where the previous run stopped (a hybrid's state can only continue
    // its own sequence): run r's step i is at position ctx + r * steps + i.
    // (--profile runs one more.)
    const int32_t bs = 16, steps = 8, len = ctx + (runs + profile) * steps + 1;
    for (int B : batches) {
      const int32_t per_seq = (len + bs - 1) / bs;
      KvCache cache(m.kv_cache_spec(int64_t(B) * per_seq, bs, DType::BF16));
      std::vector<int32_t> tables(size_t(B) * per_seq);
      std::iota(tables.begin(), tables.end(), 0);
      // Each sequence its own tokens, so the batch's rows choose different experts.
      std::vector<int32_t> ids(size_t(B) * len);
      for (size_t i = 0; i < ids.size(); i++) ids[i] = 1000 + int32_t(i * 7919) % 50000;
      std::vector<float> logits(size_t(B) * m.vocab_size());
      ForwardBatch fb;
      auto step = [&](int start, int n) {
        fb.clear();
        fb.max_blocks_per_seq = per_seq;
        for (int b = 0; b < B; b++) {
          fb.add_sequence(ids.data() + size_t(b) * len + start, n, start, tables.data() + size_t(b) * per_seq, per_seq,
                          bs, ForwardBatch::Logits::Last);
          if (c.hybrid()) fb.state_slots.push_back(b);
        }
        auto t0 = Clock::now();
        m.forward(fb, cache, logits.data());
        return std::chrono::duration<double>(Clock::now() - t0).count();
      };
      // The context, prefilled in chunks of 2048 tokens (a 32K context in one step would need
      // scratch for 32K rows of every layer's activations).
      for (int s0 = 0; s0 < ctx; s0 += 2048) step(s0, std::min(2048, ctx - s0));
      std::vector<double> t, frac, mb, nexp;
      for (int r = 0; r < runs; r++) {
        const double bw = bench::read_bandwidth(size_t(1) << 30, 3).best;
        double sum = 0, bytes = 0;
        for (int i = 0; i < steps; i++) {
          const int pos = ctx + r * steps + i;
          const uint64_t e0 = m.moe_expert_bytes_read();
          sum += step(pos, 1);
          const double eb = double(m.moe_expert_bytes_read() - e0);
          // K/V read: every sequence, every KV layer, positions [0, pos], bf16.
          const double kv = double(B) * (pos + 1) * kv_layers * 2.0 * c.num_key_value_heads * c.head_dim * 2;
          bytes += dense + eb + kv + double(B) * state;
          if (sparse > 0) nexp.push_back(eb / expert / sparse);
        }
        t.push_back(sum / steps);
        mb.push_back(bytes / steps / 1e6);
        frac.push_back(bytes / steps / bw / t.back());
      }
      const double s = median(t), f = median(frac);
      char name[64];
      std::snprintf(name, sizeof name, "decode batch %d", B);
      std::printf("%-22s %10.2f %10.2f %9.1f%% %9.2f %10.1f  %.1f of %d\n", name, B / s, s * 1e3, 100 * f, 1 / f,
                  median(mb), nexp.empty() ? 0.0 : median(nexp), c.num_experts);
      if (profile) {
        prof::set_level(prof::Level::Kernel);
        prof::reset();
        for (int i = 0; i < steps; i++) step(ctx + runs * steps + i, 1);
        prof::set_level(prof::Level::Off);
        print_op_profile(prof::collect(), steps);
      }
      std::fflush(stdout);
    }
    for (int prompt : prompts) {
      if (prompt <= 0) continue;
      const int32_t nb = (prompt + bs - 1) / bs;
      KvCache cache(m.kv_cache_spec(nb, bs, DType::BF16));
      std::vector<int32_t> table(nb), ids(prompt);
      std::iota(table.begin(), table.end(), 0);
      for (int i = 0; i < prompt; i++) ids[size_t(i)] = 1000 + (i * 7919) % 50000;
      std::vector<float> logits(size_t(m.vocab_size()));
      ForwardBatch fb;
      std::vector<std::vector<double>> t(models.size());
      for (int r = 0; r < std::min(runs, 3); r++) {
        for (size_t f = 0; f < models.size(); f++) {  // alternating: every round runs each form once
          fb.clear();
          fb.max_blocks_per_seq = nb;
          fb.add_sequence(ids.data(), prompt, 0, table.data(), nb, bs, ForwardBatch::Logits::Last);
          if (c.hybrid()) fb.state_slots.push_back(0);  // position 0: a fresh state
          auto t0 = Clock::now();
          models[f]->forward(fb, cache, logits.data());
          t[f].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
      }
      for (size_t f = 0; f < models.size(); f++) {
        char name[64];
        if (models.size() == 1) std::snprintf(name, sizeof name, "prefill %d", prompt);
        else std::snprintf(name, sizeof name, "prefill %d %s", prompt, gdn_prefill_name(forms[f]));
        std::printf("%-22s %10.1f %10.2f", name, prompt / median(t[f]), median(t[f]) * 1e3);
        if (f > 0) std::printf("   %.3fx the %s form's tokens/s", median(t[0]) / median(t[f]), gdn_prefill_name(forms[0]));
        std::printf("\n");
      }
      std::fflush(stdout);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_moe: error: %s\n", e.what());
    return 1;
  }
}
