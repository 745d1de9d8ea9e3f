// The optimised CPU backend: ISA-neutral glue that splits each op across the thread pool and calls
// the chosen ISA's kernels (kernel_table.h). Per-thread scratch is allocated once and only grows,
// so steady-state steps do no allocation.
//
// Layout: with f32 inputs on AVX-512 (highest) weights stay plain row-major (pack_weight is a
// copy): the GEMV streams rows and reaches the single-core read bandwidth, the GEMM widens W
// blocks to f32 in scratch, and a tied lm_head shares the embedding table. On AVX2 (no bf16 dot
// product, f32 x at every precision) bf16 weights are packed as pair panels and meet f32 x on
// f32 FMA (linear_bf16_panels_f32_impl.h): plain rows there read 55-77 % of the bandwidth at
// k = 1024 on two cores. The bf16-dot backends (high, medium) pack bf16 weights as pair panels
// (kernels/cpu/bf16_panels.h): accumulators of 16 outputs, no horizontal sums, 97 % of the
// VDPBF16PS peak on one core at 512 rows (61-70 % on plain rows); a tied table is then staged
// once, packed, and the embedding lookup reads its rows from the panels (weight_rows). f16
// weights (the embedding and lm_head of GPTQ / AWQ checkpoints) meet f32 x at highest and high;
// on AVX-512 and AVX2 they are packed as column panels (kernels/cpu/f16_panels.h: 16 outputs'
// weights per k in one 32-byte run, widened exactly by VCVTPH2PS, accumulators of 16 (AVX2: 8)
// outputs, no horizontal sums), a tied f16 table staged the same way as a bf16 one. At
// medium on the bf16-dot backends the same panels are rounded to bf16 as they are read and meet
// bf16 x on VDPBF16PS (linear_f16_panels_bf16dot_impl.h).
//
// Numerics (MatmulPrecision, kernels/backend.h): activations and accumulation are f32 everywhere
// except the inputs of linear. Highest: weights widened exactly in registers, f32 FMA. High (the
// default, bf16 weights on AVX512_BF16): x split into two bf16 for VDPBF16PS, ~16 bits, measured
// max|Δlogit| / max|logit| = 1.2e-5 on a 28-layer qwen3-0.6b test model (the reference test allows
// 1e-3), 1.5x the f32 path at 16 rows (no widening of W) and +10% at 512. Medium: x rounded to
// one bf16, twice the rate again but 7.7e-3 there, so only on request. All three are
// batch-invariant: each uses the same kernels whatever the number of rows.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/f16_panels.h"
#include "kernels/gdn_chunked.h"
#include "kernels/gdn_recurrence.h"
#include "kernels/kv_quant.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/grouped_columns.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/int8_panels.h"
#include "kernels/cpu/peak_loops.h"
#include "kernels/cpu/quant_panels.h"

namespace pypto {
namespace {

// Ops smaller than this many multiply-adds (or elements) run on the calling thread alone: waking
// the pool costs more than the work.
constexpr int64_t kLinearSerialMacs = 1 << 16;
constexpr int64_t kRowsSerialElems = 1 << 15;

// Multiply-add rates of VDPBF16PS and f32 FMA on this core (flops/s, one thread, registers only),
// timed once per process (~2 ms) for the start-up log only. Which one is faster differs by CPU
// family: Zen 5 runs the bf16 dot product at twice the FMA rate (530 vs 265 GFLOP/s per core);
// Xeons with AMX run it at half (120 vs 240), so there the f32 kernel beats it even at medium.
struct DotVsFma {
  double dot = 0, fma = 0;
};
const DotVsFma& dot_vs_fma() {
  static const DotVsFma r = [] {
    DotVsFma out;
    auto rate = [](int64_t (*loop)(int64_t)) {
      double best = 0;
      for (int rep = 0; rep < 3; ++rep) {  // best of 3: a preempted run only undercounts
        auto t0 = std::chrono::steady_clock::now();
        const double macs = static_cast<double>(loop(20'000));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, 2 * macs / s);
      }
      return best;
    };
    out.dot = rate(cpu::bf16_dot_loop);
    out.fma = rate(cpu::f32_fma_loop);
    return out;
  }();
  return r;
}

}  // namespace

// Auto without AMX: the bf16 dot product where it runs at twice the FMA rate (AMD; it also reads W
// without widening it: +50 % at 16 rows, +10 % at 512 on Zen 5), f32 FMA elsewhere. Decided by
// the CPU's vendor, never by a timing: a timing taken on a loaded machine once chose f32 for a
// process, whose logits then differed from the next run's by ~3e-4 (the two kernels round
// differently), so the same command must pick the same kernel on the same CPU, loaded or not.
bool bf16dot_at_full_rate(const CpuFeatures& f) { return f.vendor_amd; }

namespace {

// The kernel a backend runs for bf16 weights: CpuLinearKernel::Auto resolved for this CPU, or the
// one asked for, checked. Highest (neither option set) always runs f32 FMA.
CpuLinearKernel resolve_linear_kernel(const cpu::KernelTable& kt, const CpuBackendOptions& o) {
  const bool reduced = o.bf16_activations || o.split_bf16_activations;
  switch (o.linear_kernel) {
    case CpuLinearKernel::Auto:
      if (!reduced) return CpuLinearKernel::F32;
      if (kt.linear_cols_amx) return CpuLinearKernel::Amx;
      if (kt.linear_cols_bf16dot && bf16dot_at_full_rate(cpu_features())) return CpuLinearKernel::Bf16Dot;
      return CpuLinearKernel::F32;
    case CpuLinearKernel::F32: return CpuLinearKernel::F32;
    case CpuLinearKernel::Bf16Dot:
    case CpuLinearKernel::Amx: {
      const char* name = cpu_linear_kernel_name(o.linear_kernel);
      if (!reduced) fail("--cpu-linear-kernel ", name, " needs --matmul-precision high or medium (highest runs f32 FMA)");
      if (o.linear_kernel == CpuLinearKernel::Amx && !kt.linear_cols_amx)
        fail("--cpu-linear-kernel amx: AMX is not usable here (", kt.name, ", ", amx_status(),
             "); use auto, bf16dot or f32");
      if (o.linear_kernel == CpuLinearKernel::Bf16Dot && !kt.linear_cols_bf16dot)
        fail("--cpu-linear-kernel bf16dot needs AVX512_BF16 (", kt.name, " has none); use auto or f32");
      return o.linear_kernel;
    }
  }
  return CpuLinearKernel::F32;
}

// The activations Int8 / Int4 linears get on this ISA: the one asked for where its kernels exist;
// High's 16 bits as int16 blocks where no bf16 dot product exists (AVX2); else f32 (exact, slower).
QuantActivations resolve_quant_activations(const cpu::KernelTable& kt, QuantActivations asked) {
  if (asked == QuantActivations::Int8 && !kt.linear_cols_q8) return QuantActivations::F32;
  if (asked == QuantActivations::Bf16Pair && !kt.linear_cols_q8_bf16)
    return kt.linear_cols_q8_i16 ? QuantActivations::Int16 : QuantActivations::F32;
  if (asked == QuantActivations::Int16 && !kt.linear_cols_q8_i16) return QuantActivations::F32;
  return asked;
}

// The prepared activations of one quantized linear: x as int8 (u8 for Int8 weights), int16 or
// bf16 pairs in the kernel's order, with their per-row (per-block) scales and per-group sums.
struct QuantActBuffers {
  AlignedBuffer x;             // [m, ldq] int8, [m, ldw] int16 or [m, ldp] bf16 pairs
  std::vector<float> scale;    // int8: [m] amax / 127; int16: [m, blocks] block amax / 32767
  std::vector<int32_t> isum;   // int8, Int4 weights: [m, groups] Σ xq; int16: [m, blocks]
  std::vector<float> fsum;     // bf16 pairs, Int4 weights: [m, groups] Σ x
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(const cpu::KernelTable& kt, int num_threads, std::vector<int> cores, const CpuBackendOptions& opt)
      : kt_(kt), pool_(num_threads, std::move(cores)), scratch_(num_threads), scratch_floats_(num_threads, 0),
        kernel_(resolve_linear_kernel(kt, opt)),
        bf16_act_(kernel_ != CpuLinearKernel::F32 && opt.bf16_activations),
        split_act_(kernel_ != CpuLinearKernel::F32 && !bf16_act_ && opt.split_bf16_activations),
        bf16_f32_panels_(kernel_ == CpuLinearKernel::F32 && kt.linear_cols_bf16_panels_f32 != nullptr),
        quant_act_(resolve_quant_activations(kt, opt.quant_activations)),
        gdn_bf16_(opt.bf16_activations && kt.isa == Isa::Avx512 && cpu_features().avx512_bf16) {}

  const char* name() const override {
    if (kernel_ == CpuLinearKernel::Amx) return bf16_act_ ? "cpu-avx512-amx-bf16act" : "cpu-avx512-amx-bf16x2act";
    return bf16_act_ ? "cpu-avx512-bf16act" : split_act_ ? "cpu-avx512-bf16x2act" : kt_.name;
  }

  // --- weights: plain row-major, bf16 pair panels on the bf16-dot backends and AVX2, f16 column
  // panels on AVX-512 and AVX2 (see above) ----------------------------------------------------
  size_t packed_weight_bytes(DType dtype, int64_t n_out, int64_t k_in) const override {
    if (panels(dtype)) return cpu::bf16_panels_bytes(n_out, k_in);
    if (f16_panels(dtype)) return cpu::f16_panels_bytes(n_out, k_in);
    return plain_weight_bytes(dtype, n_out, k_in);
  }
  void pack_weight(const void* src, DType dtype, int64_t n_out, int64_t k_in, void* dst) const override {
    check_weight_dtype(dtype);
    PYPTO_ASSERT(reinterpret_cast<uintptr_t>(dst) % 64 == 0, "packed weight must be 64-byte aligned");
    if (panels(dtype))
      cpu::pack_bf16_panels(static_cast<const uint16_t*>(src), n_out, k_in, static_cast<uint16_t*>(dst));
    else if (f16_panels(dtype))
      cpu::pack_f16_panels(static_cast<const uint16_t*>(src), n_out, k_in, static_cast<uint16_t*>(dst));
    else
      std::memcpy(dst, src, static_cast<size_t>(n_out * k_in) * dtype_size(dtype));
  }
  bool weight_layout_is_plain(DType dtype) const override { return !panels(dtype) && !f16_panels(dtype); }

  size_t packed_quantized_bytes(WeightFormat format, int64_t n_out, int64_t k_in, int32_t group) const override {
    return cpu::quant_panels(format, n_out, k_in, group).total_bytes;
  }
  void pack_quantized(const QuantizedWeight& src, void* dst, int64_t row0, int64_t n_total) const override {
    PYPTO_ASSERT(reinterpret_cast<uintptr_t>(dst) % 64 == 0, "packed weight must be 64-byte aligned");
    cpu::pack_quant_panels(src, static_cast<uint8_t*>(dst), row0, n_total < 0 ? src.n_out : n_total);
  }
  QuantActivations quant_activations() const override { return quant_act_; }

  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override {
    if (n <= 1) {
      if (n == 1) fn(0);
      return;
    }
    pool_.parallel_for_dynamic(n, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  }

  // --- ops -----------------------------------------------------------------------------------
  void linear(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) override {
    if (m <= 0 || w.n_out <= 0) return;
    if (w.format != WeightFormat::Float) return linear_quant(x, m, w, bias, y);
    check_weight_dtype(w.dtype);
    cpu::LinearTask t{x, m, w.k_in, w.data, w.dtype, w.n_out, bias, y};
    if (panels(w.dtype)) {
      if (kernel_ == CpuLinearKernel::Amx) return linear_amx(t);
      return bf16_f32_panels_ ? linear_bf16_f32_panels(t) : linear_bf16act(t);
    }
    if (f16_panels(w.dtype)) return linear_f16_panels(t);
    reserve_scratch(kt_.linear_scratch_floats(w.k_in));
    if (m * w.n_out * w.k_in < kLinearSerialMacs) {
      kt_.linear_cols(t, 0, w.n_out, scratch(0));
      return;
    }
    pool_.parallel_for_guided(w.n_out, kColumnUnit,
                              [&](int64_t b, int64_t e, int tid) { kt_.linear_cols(t, b, e, scratch(tid)); });
  }

  // All calls' output tiles in one guided job (grouped_columns.h) where every call runs a
  // column kernel with activations prepared up front: quantized weights (f32, bf16-pair or int8
  // activations through VNNI) and bf16 weights on the bf16-dot kernel. Others (AMX tiles, plain
  // f32 rows, int8 weights on AMX-INT8) run call by call. Either way each call's columns are
  // computed by the kernel linear() would run, so the values are linear()'s.
  void linear_grouped(const LinearCall* calls, int64_t n) override {
    if (n <= 0) return;
    const LinearWeight& w0 = *calls[0].w;
    bool joint = n > 1;
    for (int64_t i = 0; i < n && joint; ++i) {
      const LinearWeight& w = *calls[i].w;
      joint = calls[i].m > 0 && w.n_out > 0 && w.format == w0.format && grouped_kernel(w, calls[i].m) &&
              (w.format != WeightFormat::Float || w.dtype == w0.dtype);
    }
    if (!joint) return Backend::linear_grouped(calls, n);
    const size_t N = static_cast<size_t>(n);
    if (group_act_.size() < N) group_act_.resize(N);
    std::vector<int64_t> cols(N);
    double macs = 0;
    for (int64_t i = 0; i < n; ++i) {
      cols[size_t(i)] = calls[i].w->n_out;
      macs += double(calls[i].m) * double(calls[i].w->n_out) * double(calls[i].w->k_in);
    }
    if (w0.format == WeightFormat::Float) {  // bf16 weights in pair panels: f32 FMA (AVX2) or bf16-dot
      std::vector<cpu::LinearTask> t(N);
      for (int64_t i = 0; i < n; ++i) {
        const LinearCall& c = calls[i];
        t[size_t(i)] = cpu::LinearTask{c.x, c.m, c.w->k_in, c.w->data, c.w->dtype, c.w->n_out, nullptr, c.y};
      }
      const cpu::GroupedColumns g(cols, 64);
      if (bf16_f32_panels_) {
        auto fn = [&](size_t i, int64_t b, int64_t e, int) { kt_.linear_cols_bf16_panels_f32(t[i], b, e); };
        return macs < kLinearSerialMacs ? g.run_serial(fn) : g.run(pool_, fn);
      }
      std::vector<const uint16_t*> xh(N), xl(N);
      for (size_t i = 0; i < N; ++i) bf16_rows(t[i], group_act_[i].x, &xh[i], &xl[i]);
      auto fn = [&](size_t i, int64_t b, int64_t e, int) { kt_.linear_cols_bf16dot(xh[i], xl[i], t[i], b, e); };
      return macs < kLinearSerialMacs ? g.run_serial(fn) : g.run(pool_, fn);
    }
    std::vector<cpu::QuantLinearTask> t(N);
    void (*kernel)(const cpu::QuantLinearTask&, int64_t, int64_t) = nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const LinearCall& c = calls[i];
      t[size_t(i)] = quant_task(c.x, c.m, *c.w, nullptr, c.y);
      kernel = prepare_quant(t[size_t(i)], c.x, group_act_[size_t(i)]);
    }
    auto fn = [&](size_t i, int64_t b, int64_t e, int) { kernel(t[i], b, e); };
    const cpu::GroupedColumns g(cols, 128);
    macs < kLinearSerialMacs ? g.run_serial(fn) : g.run(pool_, fn);
  }

  void rms_norm(const float* x, const float* gamma, int64_t m, int64_t d, float eps, float* y) override {
    for_rows(m, d, [&](int64_t b, int64_t e) { kt_.rms_norm_rows(x, gamma, b, e, d, eps, y); });
  }

  void rope(float* x, const int32_t* positions, int64_t m, int32_t n_heads, int32_t head_dim,
            const RopeSpec& rope) override {
    PYPTO_ASSERT(head_dim % 2 == 0, "head_dim ", head_dim);
    int32_t max_pos = 0;
    for (int64_t i = 0; i < m; ++i) {
      PYPTO_ASSERT(positions[i] >= 0, "negative position ", positions[i]);
      max_pos = std::max(max_pos, positions[i]);
    }
    ensure_rope_table(max_pos, head_dim, rope);
    const float* c = reinterpret_cast<const float*>(rope_cos_.data());
    const float* s = reinterpret_cast<const float*>(rope_sin_.data());
    for_rows(m, static_cast<int64_t>(n_heads) * head_dim,
             [&](int64_t b, int64_t e) { kt_.rope_rows(x, positions, b, e, n_heads, head_dim, c, s); });
  }

  void silu_mul(const float* gate_up, int64_t m, int64_t inter, float* out) override {
    for_rows(m, 2 * inter, [&](int64_t b, int64_t e) { kt_.silu_mul_rows(gate_up, b, e, inter, out); });
  }

  void embedding(const int32_t* ids, int64_t m, const void* table, DType dtype, int64_t d, float* out) override {
    check_weight_dtype(dtype);
    const size_t row_bytes = static_cast<size_t>(d) * dtype_size(dtype);
    for_rows(m, d, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        PYPTO_ASSERT(ids[i] >= 0, "negative token id ", ids[i]);
        kt_.to_f32(static_cast<const uint8_t*>(table) + ids[i] * row_bytes, dtype, d, out + i * d);
      }
    });
  }

  // A tied model's embedding lookup reads the few rows it needs straight from the lm_head's
  // pair panels (bf16_panels.h) or f16 column panels (f16_panels.h), so no plain copy of the
  // table is staged beside them.
  void weight_rows(const int32_t* ids, int64_t m, const LinearWeight& w, float* out) override {
    if (w.format != WeightFormat::Float) {  // a quantized table: dequantize the rows asked for
      for_rows(m, w.k_in, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          PYPTO_ASSERT(ids[i] >= 0 && ids[i] < w.n_out, "token id ", ids[i], " outside [0, ", w.n_out, ")");
          cpu::quant_panel_row_to_f32(w, ids[i], out + i * w.k_in);
        }
      });
      return;
    }
    if (weight_layout_is_plain(w.dtype)) return embedding(ids, m, w.data, w.dtype, w.k_in, out);
    const bool bf16 = panels(w.dtype);
    for_rows(m, w.k_in, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        PYPTO_ASSERT(ids[i] >= 0 && ids[i] < w.n_out, "token id ", ids[i], " outside [0, ", w.n_out, ")");
        const auto* packed = static_cast<const uint16_t*>(w.data);
        if (bf16)
          cpu::bf16_panel_row_to_f32(packed, w.k_in, ids[i], out + i * w.k_in);
        else
          cpu::f16_panel_row_to_f32(packed, w.k_in, ids[i], out + i * w.k_in);
      }
    });
  }

  // Value heads in parallel (each head's arithmetic is the same on any thread): AVX-512 (AVX2)
  // along d_v where the backend's ISA is that and d_v is a multiple of 16 (8), else the scalar
  // definition. Each differs from the scalar one only by FMA rounding (tests/kernels); the AVX2 one is
  // cpu/gdn_recurrence_impl.h, not yet compared bit for bit with the AVX-512 kernel.
  void gated_delta_rule(const GdnSequence& s) override {
    PYPTO_ASSERT(s.n_k > 0 && s.n_v % s.n_k == 0 && s.d_k > 0 && s.d_v > 0, "GDN shape ", s.n_k, "/", s.n_v);
    pool_.parallel_for(s.n_v, [&](int64_t b, int64_t e, int) {
      for (int64_t h = b; h < e; ++h) gated_delta_rule_head(s, int32_t(h));
    });
  }
  void gated_delta_rule_head(const GdnSequence& s, int32_t h) override {
    if (kt_.isa == Isa::Avx512 && s.d_v % 16 == 0 && s.d_v <= 512)
      cpu::gdn_head_avx512(s, h);
    else if (kt_.isa == Isa::Avx2 && s.d_v % 8 == 0 && s.d_v <= 512)
      cpu::gdn_head_avx2(s, h);
    else
      gdn_head_scalar(s, h);
  }

  // --gdn-prefill chunked: value heads in parallel, each in 64-token chunks (kernels/gdn_chunked.h).
  // At --matmul-precision medium on AVX512_BF16 the chunk's products take bf16 operands on
  // VDPBF16PS (2.7x the f32 kernel on Zen 5, ~5e-3 of max|out| from the recurrence); otherwise the
  // f32 FMA kernel (the hi + lo bf16 form, parts 3, is no faster than f32 FMA there: docs/status.md).
  // It follows the precision level, not --cpu-linear-kernel (which picks the linears' kernel).
  // On AVX2 the f32 FMA kernel at every precision (8 lanes, cpu/gdn_chunked_impl.h).
  // Head dims multiples of 16 on either ISA (one rule for the option's error message).
  bool gdn_chunked_supported(int32_t d_k, int32_t d_v) const override {
    return (kt_.isa == Isa::Avx512 || kt_.isa == Isa::Avx2) && d_k % 16 == 0 && d_v % 16 == 0 && d_k <= 256 &&
           d_v <= 256;
  }
  void gated_delta_rule_chunked(const GdnSequence& s) override {
    PYPTO_ASSERT(s.n_k > 0 && s.n_v % s.n_k == 0 && gdn_chunked_supported(s.d_k, s.d_v), "chunked GDN shape ", s.n_k,
                 "/", s.n_v, " d_k ", s.d_k, " d_v ", s.d_v);
    pool_.parallel_for(s.n_v, [&](int64_t b, int64_t e, int) {
      for (int64_t h = b; h < e; ++h) {
        if (gdn_bf16_)
          cpu::gdn_head_chunked_bf16_avx512(s, int32_t(h), 1);
        else if (kt_.isa == Isa::Avx512)
          cpu::gdn_head_chunked_avx512(s, int32_t(h));
        else
          cpu::gdn_head_chunked_avx2(s, int32_t(h));
      }
    });
  }

  void add_inplace(float* y, const float* x, int64_t n) override {
    constexpr int64_t kChunk = 4096;
    for_rows((n + kChunk - 1) / kChunk, kChunk, [&](int64_t b, int64_t e) {
      int64_t j0 = b * kChunk, j1 = std::min(n, e * kChunk);
      kt_.add_f32(y + j0, x + j0, j1 - j0);
    });
  }

  void kv_store(const float* k, const float* v, const int64_t* slot_mapping, int64_t m,
                const KvCacheLayer& cache) override {
    check_kv_dtype(cache.dtype);
    const int64_t hd = cache.head_dim, row = static_cast<int64_t>(cache.n_kv_heads) * hd;
    const size_t esize = dtype_size(cache.dtype);
    for_rows(m, 2 * row, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t slot = slot_mapping[t];
        if (slot < 0) continue;  // padding token
        PYPTO_ASSERT(slot < cache.num_blocks * cache.block_size, "slot ", slot);
        const int64_t block = slot / cache.block_size, off = slot % cache.block_size;
        for (int64_t h = 0; h < cache.n_kv_heads; ++h) {  // head-major blocks (backend.h)
          const size_t dst = static_cast<size_t>(cache.row(block, h, off)) * esize;
          if (kv_dtype_is_8bit(cache.dtype)) {
            // Quantized on write, row by row (kernels/kv_quant.h; scalar: a small share of a step).
            kv_quantize_kv_rows(k + t * row + h * hd, v + t * row + h * hd, int32_t(hd), cache, int64_t(dst),
                                cache.scale_index(block, h, off));
            continue;
          }
          kt_.from_f32(k + t * row + h * hd, hd, static_cast<uint8_t*>(cache.k) + dst, cache.dtype);
          kt_.from_f32(v + t * row + h * hd, hd, static_cast<uint8_t*>(cache.v) + dst, cache.dtype);
        }
      }
    });
  }

  void paged_attention(const float* q, int64_t m, int32_t n_heads, const KvCacheLayer& cache,
                       const AttentionBatch& batch, float* out) override;

 private:
  float* scratch(int tid) { return reinterpret_cast<float*>(scratch_[tid].data()); }
  // Every thread's scratch holds at least `floats` floats (grows rarely: on a larger k or block).
  void reserve_scratch(int64_t floats) {
    for (size_t i = 0; i < scratch_.size(); ++i)
      if (scratch_floats_[i] < floats) {
        scratch_[i] = AlignedBuffer(static_cast<size_t>(floats) * sizeof(float));
        scratch_floats_[i] = floats;
      }
  }
  // A linear's columns are handed out in guided chunks (parallel_for_guided): long ones first,
  // then shorter, down to one `unit` (48: whole W blocks / tiles of every ISA on plain rows; 64:
  // whole panel groups of the bf16-dot kernel; 32: two AMX B tiles; 128: the quantized kernels'
  // one-row passes, two int4 super-panels or one FP8 tile of 8 panels). On cores shared with
  // other processes a descheduled thread holds up at most one chunk, and the threads end an op
  // within about one unit of each other: with fixed chunks of n / 8
  // columns the 2-thread int4 decode of qwen3-0.6b left each thread idle ~10 % of every op.
  // Chunking never changes results: every column is computed on its own.
  static constexpr int64_t kColumnUnit = 48;
  // Runs fn(row_begin, row_end) over m rows of `row_elems` elements, on the pool when worth it.
  template <typename F>
  void for_rows(int64_t m, int64_t row_elems, F&& fn) {
    if (m <= 0) return;
    if (m == 1 || m * row_elems < kRowsSerialElems) {
      fn(0, m);
      return;
    }
    const int64_t chunk = (m + 4 * pool_.num_threads() - 1) / (4 * pool_.num_threads());
    pool_.parallel_for_dynamic(m, chunk, [&](int64_t b, int64_t e, int) { fn(b, e); });
  }
  void ensure_rope_table(int32_t max_pos, int32_t head_dim, const RopeSpec& rope);

  // bf16-dot linear: x rounded to bf16 (or split into hi + lo) once, rows in parallel, then
  // VDPBF16PS tiles over columns.
  void linear_bf16act(const cpu::LinearTask& t) {
    const uint16_t *xh, *xl;
    bf16_rows(t, xb_, &xh, &xl);
    if (t.m * t.n_out * t.k < kLinearSerialMacs) return kt_.linear_cols_bf16dot(xh, xl, t, 0, t.n_out);
    pool_.parallel_for_guided(t.n_out, 64, [&](int64_t b, int64_t e, int) { kt_.linear_cols_bf16dot(xh, xl, t, b, e); });
  }

  // bf16 weights in pair panels with f32 x (AVX2): columns in guided chunks of whole panel groups.
  void linear_bf16_f32_panels(const cpu::LinearTask& t) {
    if (t.m * t.n_out * t.k < kLinearSerialMacs) return kt_.linear_cols_bf16_panels_f32(t, 0, t.n_out);
    pool_.parallel_for_guided(t.n_out, 64, [&](int64_t b, int64_t e, int) { kt_.linear_cols_bf16_panels_f32(t, b, e); });
  }

  // f16 weights in column panels: x as given (f32), columns in guided chunks of whole panel groups.
  // At medium (bf16 activations) x is rounded to bf16 once and W to bf16 in registers (VDPBF16PS).
  void linear_f16_panels(const cpu::LinearTask& t) {
    if (bf16_act_ && kt_.linear_cols_f16_panels_bf16dot) {
      const uint16_t *xh, *xl;
      bf16_rows(t, xb_, &xh, &xl);  // xl: nullptr (not split at medium)
      reserve_scratch(int64_t(cpu::f16_bf16dot_scratch_bytes(t.k) / sizeof(float)));
      auto cols = [&](int64_t b, int64_t e, int tid) {
        kt_.linear_cols_f16_panels_bf16dot(xh, t, b, e, reinterpret_cast<uint16_t*>(scratch(tid)));
      };
      if (t.m * t.n_out * t.k < kLinearSerialMacs) return cols(0, t.n_out, 0);
      pool_.parallel_for_guided(t.n_out, 64, cols);
      return;
    }
    if (t.m * t.n_out * t.k < kLinearSerialMacs) return kt_.linear_cols_f16_panels(t, 0, t.n_out);
    pool_.parallel_for_guided(t.n_out, 64, [&](int64_t b, int64_t e, int) { kt_.linear_cols_f16_panels(t, b, e); });
  }

  // x [m, k] → buf: one bf16 per input (medium) or hi then lo (high) in [m, k] planes.
  void bf16_rows(const cpu::LinearTask& t, AlignedBuffer& buf, const uint16_t** hi, const uint16_t** lo) {
    const size_t half = static_cast<size_t>(t.m * t.k) * 2;
    const size_t need = split_act_ ? 2 * half + 64 : half;
    if (buf.size() < need) buf = AlignedBuffer(need);
    auto* xh = reinterpret_cast<uint16_t*>(buf.data());
    uint16_t* xl = split_act_ ? reinterpret_cast<uint16_t*>(buf.data() + (half + 63) / 64 * 64) : nullptr;
    for_rows(t.m, t.k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (xl)
          kt_.split_bf16(t.x + i * t.k, t.k, xh + i * t.k, xl + i * t.k);
        else
          kt_.from_f32(t.x + i * t.k, t.k, xh + i * t.k, DType::BF16);
      }
    });
    *hi = xh;
    *lo = xl;
  }

  // AMX linear: x as one (medium) or two (high) bf16 parts in A-tile order, zero-padded to whole
  // tiles (AmxActivations), rows converted in parallel, then tile products over columns in chunks
  // of 32 (two B tiles).
  void linear_amx(const cpu::LinearTask& t) {
    cpu::AmxActivations a;
    a.parts = split_act_ ? 2 : 1;
    a.m_pad = (t.m + 15) / 16 * 16;
    a.ldx = (t.k + 31) / 32 * 32;
    const int64_t part = a.m_pad * a.ldx, ksteps = a.ldx / 32;
    const size_t need = static_cast<size_t>(a.parts * part) * sizeof(uint16_t);
    if (xb_.size() < need) xb_ = AlignedBuffer(need);
    auto* xt = reinterpret_cast<uint16_t*>(xb_.data());
    // Row i, k in [32s, 32s + 32) of part p -> tile (i / 16, s), line i % 16.
    for_rows(t.m, t.k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        kt_.x_row_to_amx_tiles(t.x + i * t.k, t.k, a.parts, xt + (i / 16) * ksteps * 512 + (i % 16) * 32, part);
    });
    // The padding rows [m, m_pad) of the last row tile: zero lines.
    for (int p = 0; p < a.parts; ++p)
      for (int64_t i = t.m; i < a.m_pad; ++i)
        for (int64_t s = 0; s < ksteps; ++s)
          std::memset(xt + p * part + ((i / 16) * ksteps + s) * 512 + (i % 16) * 32, 0, 64);
    a.data = xt;
    if (t.m * t.n_out * t.k < kLinearSerialMacs) return kt_.linear_cols_amx(a, t, 0, t.n_out);
    // Many rows (the GEMM path, m > 32): chunks of whole 256-column groups (linear_amx_impl.h
    // kGroupCols), since each chunk streams all of x's tiles once per group: down_proj (n = 1024)
    // in 128-column chunks ran ~20 % slower at m = 512 than in 256-column ones.
    const int64_t unit = a.m_pad > 32 ? 256 : 32;
    pool_.parallel_for_guided(t.n_out, unit, [&](int64_t b, int64_t e, int) { kt_.linear_cols_amx(a, t, b, e); });
  }

  static constexpr int64_t kAmxInt8Rows = 16;  // int8 weights at medium: AMX-INT8 from this many rows
  // The kernel task of a quantized linear (its panels, scales and zero points inside w.data).
  cpu::QuantLinearTask quant_task(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) const {
    const cpu::QuantPanels l = cpu::quant_panels(w.format, w.n_out, w.k_in, w.group);
    const auto* base = static_cast<const uint8_t*>(w.data);
    cpu::QuantLinearTask t;
    t.format = w.format;
    t.m = m;
    t.k = w.k_in;
    t.n_out = w.n_out;
    t.group = w.group;
    t.groups = l.groups;
    t.w = base;
    t.scale = reinterpret_cast<const float*>(base + l.scale_offset);
    t.aux = base + l.aux_offset;
    t.x = x;
    t.bias = bias;
    t.y = y;
    return t;
  }
  // The column kernel of a quantized linear with `m` rows on VNNI / AVX-512 (null where int8
  // weights go to AMX-INT8 instead), and its activations prepared into `buf` (by quant_act_).
  using QuantCols = void (*)(const cpu::QuantLinearTask&, int64_t, int64_t);
  QuantCols quant_kernel(WeightFormat f) const {
    if (f == WeightFormat::Fp8 || quant_act_ == QuantActivations::F32) {
      if (!kt_.linear_cols_dq) fail(weight_format_name(f), " weights need the AVX2 or AVX-512 kernels; ", kt_.name, " has none");
      return kt_.linear_cols_dq;
    }
    if (quant_act_ == QuantActivations::Bf16Pair)
      return f == WeightFormat::Int8 ? kt_.linear_cols_q8_bf16 : kt_.linear_cols_q4_bf16;
    if (quant_act_ == QuantActivations::Int16)
      return f == WeightFormat::Int8 ? kt_.linear_cols_q8_i16 : kt_.linear_cols_q4_i16;
    return f == WeightFormat::Int4 ? kt_.linear_cols_q4 : kt_.linear_cols_q8;
  }
  bool int8_on_amx(WeightFormat f, int64_t m) const {
    return f == WeightFormat::Int8 && quant_act_ == QuantActivations::Int8 && m >= kAmxInt8Rows &&
           kt_.linear_cols_amx_int8;
  }
  QuantCols prepare_quant(cpu::QuantLinearTask& t, const float* x, QuantActBuffers& buf) {
    const QuantCols fn = quant_kernel(t.format);
    if (t.format == WeightFormat::Fp8 || quant_act_ == QuantActivations::F32) return fn;
    if (quant_act_ == QuantActivations::Bf16Pair) split_rows(t, x, buf);
    else if (quant_act_ == QuantActivations::Int16) quantize_rows_i16(t, x, buf);
    else quantize_rows(t, x, buf);
    return fn;
  }
  // True when linear_grouped can run this weight's columns in a joint job.
  bool grouped_kernel(const LinearWeight& w, int64_t m) const {
    if (w.format == WeightFormat::Float)
      return panels(w.dtype) && (kernel_ == CpuLinearKernel::Bf16Dot || bf16_f32_panels_);
    return !int8_on_amx(w.format, m);
  }

  // Quantized linear (WeightFormat Int8 / Int4 / Fp8), by quant_act_: f32 activations through the
  // dequantizing kernel (and Fp8 always); bf16-pair activations (High) through the VDPBF16PS
  // kernels, the same kernel for every m; int8 activations (Medium) through VNNI, and AMX-INT8
  // for Int8 weights from kAmxInt8Rows rows on (the integer sums are exact, so which kernel runs
  // never changes a result).
  void linear_quant(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) {
    cpu::QuantLinearTask t = quant_task(x, m, w, bias, y);
    if (int8_on_amx(w.format, m)) {
      quantize_rows(t, x);
      return linear_q8_amx(t);
    }
    const QuantCols fn = prepare_quant(t, x, act_);
    if (m * w.n_out * w.k_in < kLinearSerialMacs) fn(t, 0, w.n_out);
    else pool_.parallel_for_guided(w.n_out, 128, [&](int64_t b, int64_t e, int) { fn(t, b, e); });
    if (m == 1 && w.format == WeightFormat::Int4 && quant_act_ != QuantActivations::F32) prefetch_next_int4(w);
  }

  // Decode steps run the same linears in the same order, and between two of them the main thread
  // does serial work (norms, RoPE, SiLU, quantizing x: ~4 us per linear at m = 1) while the worker
  // spins and DRAM idles. So the backend remembers which int4 weight followed which, and after a
  // one-row int4 linear starts the next one's streams: the worker prefetches kIdlePrefetchBytes
  // from the start of each of the two super-panels its first guided chunk will read (into L2,
  // stopped when the next job arrives; at k = 1024 a super-panel is 37 KiB, so this runs on into
  // the chunk's next ones), the main thread the first kMainPrefetchBytes of its own two. Measured on
  // qwen3-0.6b int4 decode (Xeon with AMX, 2 threads, 10 alternating rounds): median 83.7 -> 86.1 %
  // of the read bound; 32 and 128 KiB no better than none. On int8 weights (4 streams per chunk)
  // it measured no faster, so it is left to int4. Prefetches are hints: results never change.
  static constexpr int64_t kIdlePrefetchBytes = 64 << 10, kMainPrefetchBytes = 4 << 10;
  std::unordered_map<const void*, LinearWeight> next_int4_;
  const void* prev_int4_ = nullptr;
  void prefetch_next_int4(const LinearWeight& w) {
    if (prev_int4_ && prev_int4_ != w.data) next_int4_[prev_int4_] = w;
    prev_int4_ = w.data;
    const auto it = next_int4_.find(w.data);
    if (it == next_int4_.end()) return;
    const LinearWeight& nx = it->second;
    const auto* base = static_cast<const uint8_t*>(nx.data);
    const int64_t stream = (nx.k_in + nx.group - 1) / nx.group * cpu::q4_record_bytes(nx.group);  // one super-panel
    // Guided chunks: the main thread takes the first round_up(n / 4, 128) columns, the worker the
    // next chunk; a lone row reads two super-panels (64 columns each) side by side.
    const int64_t c0 = ((nx.n_out + 3) / 4 + 127) / 128 * 128;
    if (c0 < nx.n_out) {
      const void* worker[2] = {base + (c0 / 64) * stream, base + (c0 / 64 + 1) * stream};
      pool_.prefetch_while_idle(worker, 2, kIdlePrefetchBytes);
    }
    for (int64_t off = 0; off < kMainPrefetchBytes; off += 64) {
      __builtin_prefetch(base + off, 0, 2);
      __builtin_prefetch(base + stream + off, 0, 2);
    }
  }

  // x rows → buf.x [m, ldq] (u8 = q + 128 for Int8 weights, s8 for Int4), buf.scale [m], and for
  // Int4 buf.isum [m, groups]; the formula of backend.h int8_row_inv, so every backend gets these integers.
  void quantize_rows(cpu::QuantLinearTask& t, const float* x) { quantize_rows(t, x, act_); }
  void quantize_rows(cpu::QuantLinearTask& t, const float* x, QuantActBuffers& buf) {
    const int64_t ldq = cpu::quant_act_stride(t.k, t.format == WeightFormat::Int4 ? t.group : 0);
    const size_t bytes = static_cast<size_t>(t.m * ldq);
    if (buf.x.size() < bytes) buf.x = AlignedBuffer(bytes);
    buf.scale.resize(static_cast<size_t>(t.m));
    if (t.format == WeightFormat::Int4) buf.isum.resize(static_cast<size_t>(t.m * t.groups));
    const bool shifted = t.format == WeightFormat::Int8;
    uint8_t* xq = buf.x.data();
    for_rows(t.m, t.k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float amax = kt_.quantize_row_int8(x + i * t.k, t.k, ldq, shifted, shifted ? 0 : t.group,
                                                 xq + i * ldq, shifted ? nullptr : buf.isum.data() + i * t.groups);
        buf.scale[size_t(i)] = int8_row_scale(amax);
      }
    });
    t.xq = xq;
    t.ldq = ldq;
    t.xscale = buf.scale.data();
    t.xsum = buf.isum.data();
  }

  // x rows → buf.x [m, ldp] bf16 (hi then lo per 8 inputs, in the kernel's order) and for Int4
  // buf.fsum [m, groups] (kernel_table.h quant_x_bf16_pairs).
  void split_rows(cpu::QuantLinearTask& t, const float* x) { split_rows(t, x, act_); }
  void split_rows(cpu::QuantLinearTask& t, const float* x, QuantActBuffers& buf) {
    const bool int4 = t.format == WeightFormat::Int4;
    const int32_t group = int4 ? t.group : 0;
    const int64_t ldp = 2 * cpu::quant_act_stride(t.k, group);
    const size_t bytes = static_cast<size_t>(t.m * ldp) * sizeof(uint16_t);
    if (buf.x.size() < bytes) buf.x = AlignedBuffer(bytes);
    auto* xp = reinterpret_cast<uint16_t*>(buf.x.data());
    if (int4) buf.fsum.resize(static_cast<size_t>(t.m * t.groups));
    for_rows(t.m, t.k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        kt_.quant_x_bf16_pairs(x + i * t.k, t.k, ldp, int4, group, xp + i * ldp,
                               int4 ? buf.fsum.data() + i * t.groups : nullptr);
    });
    t.xp = xp;
    t.ldp = ldp;
    t.xsumf = buf.fsum.data();
  }

  // x rows → buf.x [m, ldw] int16 in the kernel's order, buf.scale [m, blocks] and for Int4
  // buf.isum [m, blocks] (kernel_table.h quantize_row_int16, blocks of backend.h int16_act_block).
  void quantize_rows_i16(cpu::QuantLinearTask& t, const float* x, QuantActBuffers& buf) {
    const bool int4 = t.format == WeightFormat::Int4;
    const int32_t block = int16_act_block(t.format, t.group);
    const int64_t ldw = cpu::quant_act_stride(t.k, int4 ? t.group : 0), blocks = (t.k + block - 1) / block;
    const size_t bytes = static_cast<size_t>(t.m * ldw) * sizeof(int16_t);
    if (buf.x.size() < bytes) buf.x = AlignedBuffer(bytes);
    buf.scale.resize(static_cast<size_t>(t.m * blocks));
    if (int4) buf.isum.resize(static_cast<size_t>(t.m * blocks));
    auto* xw = reinterpret_cast<int16_t*>(buf.x.data());
    for_rows(t.m, t.k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        kt_.quantize_row_int16(x + i * t.k, t.k, ldw, int4, block, xw + i * ldw, buf.scale.data() + i * blocks,
                               int4 ? buf.isum.data() + i * blocks : nullptr);
    });
    t.xw = xw;
    t.ldw = ldw;
    t.xblock = block;
    t.xscale = buf.scale.data();
    t.xsum = buf.isum.data();
  }

  // Int8 weights, many rows: xq in A-tile order, TDPBUSD into s32 sums, then the epilogue per
  // column chunk (the same formula as the VNNI kernel's).
  void linear_q8_amx(const cpu::QuantLinearTask& t) {
    cpu::AmxInt8Activations a;
    a.m_pad = (t.m + 15) / 16 * 16;
    a.ldx = cpu::amx_int8_ldx(t.k);
    const int64_t ksteps = a.ldx / 64;
    const size_t need = static_cast<size_t>(a.m_pad * a.ldx);
    if (xt8_.size() < need) xt8_ = AlignedBuffer(need);
    uint8_t* xt = xt8_.data();
    for_rows(a.m_pad, a.ldx, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        for (int64_t s = 0; s < ksteps; ++s) {
          uint8_t* dst = xt + ((i / 16) * ksteps + s) * 1024 + (i % 16) * 64;
          if (i < t.m) std::memcpy(dst, t.xq + i * t.ldq + 64 * s, 64);
          else std::memset(dst, 0, 64);
        }
    });
    a.data = xt;
    const size_t acc_bytes = static_cast<size_t>(t.m * t.n_out) * sizeof(int32_t);
    if (acc32_.size() < acc_bytes) acc32_ = AlignedBuffer(acc_bytes);
    auto* acc = reinterpret_cast<int32_t*>(acc32_.data());
    cpu::LinearInt8Task it{t.m, t.k, reinterpret_cast<const int8_t*>(t.w), t.n_out, acc};
    pool_.parallel_for_guided(t.n_out, 32, [&](int64_t b, int64_t e, int) {
      kt_.linear_cols_amx_int8(a, it, b, e);
      kt_.q8_epilogue(t, acc, b, e);
    });
  }

  const cpu::KernelTable& kt_;
  ThreadPool pool_;
  std::vector<AlignedBuffer> scratch_;   // per thread: linear W blocks / attention K,V blocks
  std::vector<int64_t> scratch_floats_;
  CpuLinearKernel kernel_ = CpuLinearKernel::F32;  // resolved: never Auto
  bool bf16_act_ = false;
  bool split_act_ = false;
  // bf16 weights in pair panels meet f32 x on f32 FMA (linear_bf16_panels_f32_impl.h): an ISA
  // with that kernel (AVX2) and no bf16-dot or AMX kernel chosen.
  bool bf16_f32_panels_ = false;
  QuantActivations quant_act_ = QuantActivations::F32;  // resolved for this ISA
  bool gdn_bf16_ = false;  // chunked gated delta rule on bf16 dot products (medium precision, AVX512_BF16)
  AlignedBuffer xt8_, acc32_;  // int8 activations in A-tile order; AMX s32 sums
  QuantActBuffers act_;         // the activations of the current quantized linear
  std::vector<QuantActBuffers> group_act_;  // linear_grouped: one per call (grow only)
  // True when weights of `dtype` are packed in pair panels: for the bf16-dot or AMX kernel, or for
  // the f32-FMA panel kernel (AVX2).
  bool panels(DType dtype) const { return (bf16_act_ || split_act_ || bf16_f32_panels_) && dtype == DType::BF16; }
  // True when f16 weights are packed as column panels (f16_panels.h): wherever the ISA has the
  // kernel (AVX-512, AVX2), at every precision.
  bool f16_panels(DType dtype) const { return kt_.linear_cols_f16_panels && dtype == DType::F16; }
  AlignedBuffer xb_;  // [m, k] bf16 activations (hi, then lo when split) of the current bf16-dot linear
  // cos / sin (× the attention factor) of every (position, pair) for one (head_dim, RopeSpec):
  // [rope_positions_, head_dim / 2].
  AlignedBuffer rope_cos_, rope_sin_;
  int32_t rope_positions_ = 0, rope_head_dim_ = 0;
  RopeSpec rope_spec_;
  // paged_attention task list, costs and run order (kept to avoid reallocating).
  std::vector<cpu::AttentionTask> tasks_;
  std::vector<int64_t> task_cost_;
  std::vector<size_t> task_order_;
  // Split decode sequences: their fold (the task over all KV heads, number of segments) and the
  // segments' partial softmax states (grow only).
  std::vector<std::pair<cpu::AttentionTask, int32_t>> folds_;
  AlignedBuffer partials_;
};

void CpuBackend::ensure_rope_table(int32_t max_pos, int32_t head_dim, const RopeSpec& rope) {
  const bool same = head_dim == rope_head_dim_ && rope == rope_spec_;
  if (same && max_pos < rope_positions_) return;
  // Grow geometrically (at least 4096 positions) so a growing context rebuilds rarely.
  int32_t n = std::max<int32_t>(4096, same ? rope_positions_ : 0);
  while (n <= max_pos) n *= 2;
  const int32_t half = head_dim / 2;
  rope_cos_ = AlignedBuffer(static_cast<size_t>(n) * half * sizeof(float));
  rope_sin_ = AlignedBuffer(static_cast<size_t>(n) * half * sizeof(float));
  float* c = reinterpret_cast<float*>(rope_cos_.data());
  float* s = reinterpret_cast<float*>(rope_sin_.data());
  // Angles in double (as the reference): f32 angles lose ~1e-4 rad at positions in the thousands.
  const std::vector<double> inv_freq = rope_inv_freq(rope, head_dim);
  const double af = rope.attention_factor;
  for (int32_t p = 0; p < n; ++p)
    for (int32_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(p) * inv_freq[size_t(j)];
      c[static_cast<int64_t>(p) * half + j] = static_cast<float>(std::cos(a) * af);
      s[static_cast<int64_t>(p) * half + j] = static_cast<float>(std::sin(a) * af);
    }
  rope_positions_ = n;
  rope_head_dim_ = head_dim;
  rope_spec_ = rope;
}

void CpuBackend::paged_attention(const float* q, int64_t m, int32_t n_heads, const KvCacheLayer& cache,
                                 const AttentionBatch& batch, float* out) {
  check_kv_dtype(cache.dtype);
  PYPTO_ASSERT(cache.n_kv_heads > 0 && n_heads % cache.n_kv_heads == 0, "n_heads ", n_heads, " n_kv_heads ",
               cache.n_kv_heads);
  const int32_t group = n_heads / cache.n_kv_heads;
  PYPTO_ASSERT(group <= cpu::kAttentionMaxQueries, "GQA group ", group, " too large");
  const int32_t rows_per_task = cpu::kAttentionMaxQueries / group;

  // Decode rows (one query, GQA group on the row path) go out as tasks over `decode_heads` KV
  // heads at once, so each cache block's rows of those heads are read as one contiguous run
  // (attention_decode_heads.h): as many heads as still leave a task per thread. Which heads share
  // a task never changes a result.
  // Sequences of a few rows (a verify step's k + 1, a short chunk: rows × group at most
  // kAttentionFewRowsMaxQueries) go out the same way, their rows' query-heads side by side.
  // Decode rows go out so whatever the group: a GQA group of 8 (the Qwen3.5 / 3.6 hybrids,
  // Qwen3-30B-A3B) would otherwise take the column path with half its query vector's lanes empty,
  // while a decode-heads task reads the cache rows once for the group's 8 query-heads
  // (attention_decode_heads.h). Few-row sequences only below a vector of query-heads.
  const bool row_path_group = group < cpu::kAttentionColsMin;
  int32_t n_decode = 0, n_few = 0;
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    const int32_t rows = batch.query_start[s + 1] - batch.query_start[s];
    n_decode += rows == 1;
    n_few += rows > 1 && rows * group <= cpu::kAttentionFewRowsMaxQueries;
  }
  // KV heads per task for sequences of `rows` rows (`count` of them in the batch).
  auto heads_per_task = [&](int32_t rows, int32_t count) {
    for (int32_t d = cache.n_kv_heads; d > 1 && (row_path_group || rows == 1); --d)
      if (cache.n_kv_heads % d == 0 && d * rows * group <= cpu::kAttentionMaxQueries &&
          static_cast<int64_t>(count) * (cache.n_kv_heads / d) >= pool_.num_threads())
        return d;
    return 1;
  };
  const int32_t decode_heads = heads_per_task(1, n_decode);

  // Too few tasks to keep the threads busy (few decode sequences, few KV heads): decode sequences
  // of more than one segment are split along the sequence, one task per segment over all KV heads
  // (each a run of n_kv_heads rows per block), and folded afterwards (attention_decode_heads.h).
  // The split changes no bit of any result (segments are part of every query's arithmetic).
  const int64_t unsplit_tasks = static_cast<int64_t>(n_decode) * (cache.n_kv_heads / decode_heads) +
                                static_cast<int64_t>(batch.num_seqs - n_decode) * cache.n_kv_heads;
  const int64_t segment_keys = static_cast<int64_t>(cpu::kAttentionSegmentBlocks) * cache.block_size;
  int64_t split_tasks = static_cast<int64_t>(batch.num_seqs - n_decode) * cache.n_kv_heads;
  for (int32_t s = 0; s < batch.num_seqs; ++s)
    if (batch.query_start[s + 1] - batch.query_start[s] == 1)
      split_tasks += (batch.context_len[s] + segment_keys - 1) / segment_keys;
  // Split only where it gives the threads more tasks than the heads alone do.
  const bool split = pool_.num_threads() > 1 && unsplit_tasks < 2 * pool_.num_threads() &&
                     split_tasks > unsplit_tasks && n_heads <= cpu::kAttentionMaxQueries &&
                     kt_.attention_splits(cache.head_dim);
  const int64_t partial_floats = static_cast<int64_t>(n_heads) * (cache.head_dim + 2);  // one segment
  folds_.clear();
  if (split) {
    int64_t total = 0;
    for (int32_t s = 0; s < batch.num_seqs; ++s)
      if (batch.query_start[s + 1] - batch.query_start[s] == 1)
        total += (batch.context_len[s] + segment_keys - 1) / segment_keys * partial_floats;
    if (partials_.size() < static_cast<size_t>(total) * sizeof(float))
      partials_ = AlignedBuffer(static_cast<size_t>(total) * sizeof(float));
  }
  float* next_partial = reinterpret_cast<float*>(partials_.data());

  // Tasks ordered (sequence, KV head, query chunk); each costs ~ queries × keys seen.
  tasks_.clear();
  task_cost_.clear();
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    const int32_t q0 = batch.query_start[s], q1 = batch.query_start[s + 1], ctx = batch.context_len[s];
    PYPTO_ASSERT(q0 <= q1 && q1 <= m && q1 - q0 <= ctx, "seq ", s, ": queries [", q0, ", ", q1, ") context ", ctx);
    PYPTO_ASSERT((ctx + cache.block_size - 1) / cache.block_size <= batch.max_blocks_per_seq, "seq ", s,
                 " context ", ctx, " exceeds its block table");
    const int32_t nseg = static_cast<int32_t>((ctx + segment_keys - 1) / segment_keys);
    if (q1 - q0 == 1 && split && nseg > 1) {
      for (int32_t g = 0; g < nseg; ++g) {
        cpu::AttentionTask t{q, out, n_heads, &cache, &batch, s, 0, q0, q1, cache.n_kv_heads};
        t.seg = g;
        t.partial = next_partial + g * partial_floats;
        tasks_.push_back(t);
        task_cost_.push_back(static_cast<int64_t>(cache.n_kv_heads) * std::min<int64_t>(segment_keys, ctx - g * segment_keys));
      }
      cpu::AttentionTask f{q, out, n_heads, &cache, &batch, s, 0, q0, q1, cache.n_kv_heads};
      f.partial = next_partial;
      folds_.push_back({f, nseg});
      next_partial += nseg * partial_floats;
      continue;
    }
    const int32_t heads = q1 - q0 == 1                                                ? decode_heads
                          : (q1 - q0) * group <= cpu::kAttentionFewRowsMaxQueries ? heads_per_task(q1 - q0, n_few)
                                                                                  : 1;
    if (heads > 1 || (q1 - q0 == 1 && !row_path_group)) {  // a decode-heads task (kv_head_end set)
      for (int32_t h = 0; h < cache.n_kv_heads; h += heads) {
        tasks_.push_back({q, out, n_heads, &cache, &batch, s, h, q0, q1, h + heads});
        task_cost_.push_back(static_cast<int64_t>(heads) * (q1 - q0) * (ctx + cache.block_size));
      }
      continue;
    }
    for (int32_t h = 0; h < cache.n_kv_heads; ++h)
      for (int32_t t0 = q0; t0 < q1; t0 += rows_per_task) {
        const int32_t t1 = std::min(q1, t0 + rows_per_task);
        tasks_.push_back({q, out, n_heads, &cache, &batch, s, h, t0, t1});
        const int64_t last_pos = ctx - (q1 - t1) + 1;
        task_cost_.push_back(static_cast<int64_t>(t1 - t0) * (last_pos + cache.block_size));
      }
  }
  if (tasks_.empty()) return;
  reserve_scratch(kt_.attention_scratch_floats(cache.block_size, cache.head_dim));

  if (pool_.num_threads() == 1 || tasks_.size() == 1) {
    for (const auto& t : tasks_) kt_.attention(t, scratch(0));
    for (const auto& f : folds_) kt_.attention_fold(f.first, f.second);
    return;
  }
  // Costliest tasks first, handed out one at a time: the threads finish together even when one
  // of them loses its core for a while. (Which thread runs a task never changes its result.)
  task_order_.resize(tasks_.size());
  for (size_t i = 0; i < tasks_.size(); ++i) task_order_[i] = i;
  std::sort(task_order_.begin(), task_order_.end(), [&](size_t a, size_t b) {
    return task_cost_[a] != task_cost_[b] ? task_cost_[a] > task_cost_[b] : a < b;  // in place, no allocation
  });
  pool_.parallel_for_dynamic(static_cast<int64_t>(tasks_.size()), 1, [&](int64_t b, int64_t e, int tid) {
    for (int64_t i = b; i < e; ++i) kt_.attention(tasks_[task_order_[i]], scratch(tid));
  });
  if (!folds_.empty())
    pool_.parallel_for_dynamic(static_cast<int64_t>(folds_.size()), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) kt_.attention_fold(folds_[i].first, folds_[i].second);
    });
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend_for_isa(Isa isa, int num_threads, const std::vector<int>& cores,
                                                  const CpuBackendOptions& options) {
  if (num_threads <= 0) num_threads = cores.empty() ? cpu_count() : static_cast<int>(cores.size());
  const cpu::KernelTable* kt = cpu::kernel_table(isa);
  if (!kt) return make_reference_backend();
  return std::make_unique<CpuBackend>(*kt, num_threads, cores, options);
}

const char* matmul_precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::Highest: return "highest";
    case MatmulPrecision::High: return "high";
    case MatmulPrecision::Medium: return "medium";
  }
  return "?";
}

MatmulPrecision parse_matmul_precision(const std::string& s) {
  for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium})
    if (s == matmul_precision_name(p)) return p;
  fail("--matmul-precision must be one of highest, high, medium; got '", s, "'");
}

const char* quant_activations_name(QuantActivations a) {
  switch (a) {
    case QuantActivations::F32: return "f32";
    case QuantActivations::Bf16Pair: return "bf16x2";
    case QuantActivations::Int8: return "int8";
    case QuantActivations::Int16: return "int16";
  }
  return "?";
}

const char* cpu_linear_kernel_name(CpuLinearKernel k) {
  switch (k) {
    case CpuLinearKernel::Auto: return "auto";
    case CpuLinearKernel::F32: return "f32";
    case CpuLinearKernel::Bf16Dot: return "bf16dot";
    case CpuLinearKernel::Amx: return "amx";
  }
  return "?";
}

CpuLinearKernel parse_cpu_linear_kernel(const std::string& s) {
  for (CpuLinearKernel k : {CpuLinearKernel::Auto, CpuLinearKernel::F32, CpuLinearKernel::Bf16Dot, CpuLinearKernel::Amx})
    if (s == cpu_linear_kernel_name(k)) return k;
  fail("--cpu-linear-kernel must be one of auto, f32, bf16dot, amx; got '", s, "'");
}

std::string describe_cpu_linear_choice() {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt) return "scalar reference kernels (no AVX2 here)";
  auto what = [&](bool split) {
    CpuBackendOptions o;
    o.split_bf16_activations = split;
    o.bf16_activations = !split;
    const CpuLinearKernel k = resolve_linear_kernel(*kt, o);
    return k == CpuLinearKernel::Amx ? "AMX tiles" : k == CpuLinearKernel::Bf16Dot ? "AVX-512 BF16 dot products" : "f32 FMA";
  };
  std::string why = amx_status();
  if (!kt->linear_cols_amx && kt->linear_cols_bf16dot)
    why = str_cat(amx_status(), "; ", cpu_features().vendor_amd ? "AMD" : "not AMD", ": vdpbf16ps ",
                  static_cast<int>(dot_vs_fma().dot / 1e9), " vs fma ", static_cast<int>(dot_vs_fma().fma / 1e9),
                  " GFLOP/s per core, measured");
  // Quantized weights: which activations each precision gives int8 / int4 weights here.
  auto quant = [&](QuantActivations a) {
    const QuantActivations r = resolve_quant_activations(*kt, a);
    return r == QuantActivations::Bf16Pair ? "bf16x2 activations (~16 bits, vdpbf16ps)"
           : r == QuantActivations::Int16  ? "int16 activations (per 64-input block, vpmaddwd)"
           : r == QuantActivations::Int8   ? (kt->linear_cols_amx_int8 ? "int8 activations (vpdpbusd, amx-int8)"
                                              : kt->isa == Isa::Avx2  ? "int8 activations (vpmaddubsw)"
                                                                      : "int8 activations (vpdpbusd)")
                                           : "f32 activations (fma)";
  };
  return str_cat(what(true), " for high, ", what(false), " for medium, f32 FMA for highest (", kt->name, ", ", why,
                 "); int8/int4 weights: ", quant(QuantActivations::Bf16Pair), " at high, ",
                 quant(QuantActivations::Int8), " at medium, f32 activations at highest; fp8 weights: f32 activations");
}

namespace {
QuantActivations asked_quant_activations(MatmulPrecision precision) {
  return precision == MatmulPrecision::Highest ? QuantActivations::F32
         : precision == MatmulPrecision::High  ? QuantActivations::Bf16Pair
                                               : QuantActivations::Int8;
}
}  // namespace

QuantActivations cpu_quant_activations(MatmulPrecision precision) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  return kt ? resolve_quant_activations(*kt, asked_quant_activations(precision)) : asked_quant_activations(precision);
}

std::unique_ptr<Backend> make_cpu_backend(int num_threads, const std::vector<int>& cores, MatmulPrecision precision,
                                          CpuLinearKernel kernel) {
  CpuBackendOptions o;
  o.split_bf16_activations = precision == MatmulPrecision::High;
  o.bf16_activations = precision == MatmulPrecision::Medium;
  o.quant_activations = asked_quant_activations(precision);
  o.linear_kernel = kernel;
  return make_cpu_backend_for_isa(cpu_isa(), num_threads, cores, o);
}

}  // namespace pypto
