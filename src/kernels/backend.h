#pragma once
// The backend op table: the small set of operations the Qwen3 forward pass needs. The model code
// (src/model) is written only against this interface, so a CUDA backend can be added without
// touching it. Every buffer is row-major; shapes are given in brackets next to each pointer.
//
// Numerics contract (DESIGN.md "Numerics"): activations and accumulation are f32; weights stay in
// the checkpoint dtype (bf16/f16/f32) or a packed layout of it; the KV cache is bf16, f32, or 8-bit
// (int8 / fp8 e4m3 with a per-row scale, kernels/kv_quant.h).
// Batch invariance: every op computes a row's result with the same instruction sequence and
// reduction order whatever the number of rows (M) in the call, so a token's output does not depend
// on what else is in the batch or how its prompt was chunked.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/rope_spec.h"

namespace pypto {

// How a linear weight's values are stored. Float: the checkpoint's float dtype (bf16/f16/f32).
// The quantized formats (docs/architecture.md "Quantized weights"):
//   Int8: symmetric per output row, w[r][c] = q[r][c] · scale[r], q in [-127, 127].
//   Int4: groups of `group` inputs along k with a zero point, w[r][c] = (q − zero[r][g]) ·
//         scale[r][g], q and zero in [0, 15], g = c / group (AWQ's and our online format).
//   Fp8:  e4m3 with one scale per `group` inputs of a row, w[r][c] = e4m3(q[r][c]) · scale[r][g]
//         (block FP8 checkpoints: the 128 × 128 block scale repeated on each of its rows).
enum class WeightFormat : uint8_t { Float, Int8, Int4, Fp8 };
const char* weight_format_name(WeightFormat f);  // "float" | "int8" | "int4" | "fp8"

// A linear layer's weight as staged: logically W[n_out, k_in] (PyTorch nn.Linear layout,
// y = x · Wᵀ). `data` points at pack_weight()'s (or pack_quantized()'s) output for this backend.
struct LinearWeight {
  const void* data = nullptr;
  DType dtype = DType::BF16;  // Float only
  int64_t n_out = 0;
  int64_t k_in = 0;
  WeightFormat format = WeightFormat::Float;
  int32_t group = 0;  // Int4 / Fp8: inputs per scale (0 for Float and Int8)
};

// A quantized weight in plain row-major form, as staging hands it to Backend::pack_quantized
// (and as the reference backend keeps it). Only the arrays of `format` are set.
struct QuantizedWeight {
  WeightFormat format = WeightFormat::Int8;
  int64_t n_out = 0, k_in = 0;
  int32_t group = 0;             // Int4 / Fp8 inputs per scale; groups = ceil(k_in / group)
  const int8_t* q8 = nullptr;    // Int8: [n_out, k_in]
  const uint8_t* q4 = nullptr;   // Int4: [n_out, k_in], one value 0..15 per byte
  const uint8_t* e4m3 = nullptr; // Fp8: [n_out, k_in]
  const uint8_t* zero = nullptr; // Int4: [n_out, groups], 0..15
  const float* scale = nullptr;  // Int8: [n_out]; Int4 / Fp8: [n_out, groups]
  int64_t groups() const { return group > 0 ? (k_in + group - 1) / group : 1; }
};

// One layer's paged KV cache: k and v are [num_blocks, n_kv_heads, block_size, head_dim] in
// `dtype`. A token at slot s lives at block s / block_size, offset s % block_size: its head h is
// the row ((block · n_kv_heads + h) · block_size + offset) · head_dim. Head-major within a block,
// so the keys (values) one KV head reads from a block are one contiguous run of block_size ·
// head_dim elements (4 KiB at bf16, block 16, head_dim 128) that the hardware prefetchers stream,
// not block_size pieces n_kv_heads · head_dim apart.
// dtype is BF16, F32, or one of the 8-bit formats I8 / F8_E4M3 (kernels/kv_quant.h): then
// k_scale and v_scale are [num_blocks, n_kv_heads, block_size] f32, one scale per row, the row's
// scale at row(...) / head_dim = scale_index(...). kv_store quantizes, attention dequantizes.
struct KvCacheLayer {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::BF16;
  int64_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  float* k_scale = nullptr;  // 8-bit dtypes only
  float* v_scale = nullptr;

  // Element offset of the row of KV head `head` at `offset` within cache block `block` (k or v).
  int64_t row(int64_t block, int64_t head, int64_t offset) const {
    return ((block * n_kv_heads + head) * block_size + offset) * head_dim;
  }
  // Index of that row's scale in k_scale / v_scale (8-bit dtypes).
  int64_t scale_index(int64_t block, int64_t head, int64_t offset) const {
    return (block * n_kv_heads + head) * block_size + offset;
  }
};

// Attention metadata for one forward call holding several sequences' new tokens, packed:
// sequence i owns query rows [query_start[i], query_start[i+1]) (cu_seqlens_q in vLLM terms);
// those rows are its tokens at positions context_len[i] - n_new .. context_len[i] - 1, and its
// keys/values for positions 0 .. context_len[i]-1 are in the cache already (kv_store runs first).
struct AttentionBatch {
  int32_t num_seqs = 0;
  const int32_t* query_start = nullptr;   // [num_seqs + 1]
  const int32_t* context_len = nullptr;   // [num_seqs] tokens in cache incl. the new ones
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq] physical block ids
  int32_t max_blocks_per_seq = 0;
};

// One sequence's n tokens through the gated delta rule of a Gated DeltaNet layer (Qwen3.5 /
// Qwen3.6), token by token in order (the recurrent form). Per token t and value head h, whose key
// head is kh = h / (n_v / n_k), with S = state[h] ([d_k, d_v] f32):
//   S ← exp(g[t, h]) · S;   u = beta[t, h] · (v[t, h] − Sᵀ k[t, kh]);   S ← S + k[t, kh] uᵀ;
//   out[t, h] = Sᵀ q[t, kh]
// q and k of token t start at q + t · qk_stride (key heads of d_k, L2-normed; q already scaled by
// 1/sqrt(d_k)), v at v + t · v_stride (value heads of d_v); g, beta [n, n_v]; out [n, n_v, d_v];
// state [n_v, d_k, d_v] is read and left holding the state after token n − 1.
struct GdnSequence {
  const float* q = nullptr;
  const float* k = nullptr;
  int64_t qk_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
  int64_t n = 0;
  int32_t n_k = 0, n_v = 0, d_k = 0, d_v = 0;
  float* state = nullptr;
  float* out = nullptr;
};

// The activations of Int8 / Int4 linears (by MatmulPrecision on the CPU backend):
//   F32 (highest): x as given, W dequantized exactly, f32 FMA.
//   Bf16Pair (high, the default): x ≈ hi + lo, two bf16 (~16 significant bits, as bf16 weights
//     get at high), W converted exactly to bf16 ((q − zero) for Int4 and q for Int8 are small
//     integers), bf16 dot products, scales in f32: the published W4A16 / W8A16 accuracy.
//   Int8 (medium): x quantized per row to int8 (symmetric, amax / 127, round to nearest even;
//     int8_row_inv below) and exact integer dot products (W4A8 / W8A8): the fastest, but a row's
//     outlier channels set its step for every other channel (see docs/status.md for the cost).
//   Int16 (high where the CPU has no bf16 dot product: AVX2): x quantized to int16 per row and per
//     block of int16_act_block() inputs (symmetric, block amax / 32767, round to nearest even;
//     int16_block_inv below), exact integer sums per block (VPMADDWD), block and weight scales in
//     f32: W4A16 / W8A16 in integers. A block's largest input sets its step, so ~15 bits for the
//     block's largest values; an outlier channel costs only its own block (docs/status.md).
enum class QuantActivations { F32, Bf16Pair, Int8, Int16 };
const char* quant_activations_name(QuantActivations a);  // "f32" | "bf16x2" | "int8" | "int16"

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;  // e.g. "cpu-avx512", "cpu-scalar"

  // --- weights -------------------------------------------------------------------------------
  // Bytes pack_weight() writes for a [n_out, k_in] weight of `dtype` (64-byte multiple).
  virtual size_t packed_weight_bytes(DType dtype, int64_t n_out, int64_t k_in) const = 0;
  // Converts a plain row-major W[n_out, k_in] into this backend's run-time layout at dst
  // (64-byte aligned). The default layout is a plain copy.
  virtual void pack_weight(const void* src, DType dtype, int64_t n_out, int64_t k_in, void* dst) const = 0;
  // True when pack_weight is a plain copy for `dtype`: then a tied lm_head can share the
  // embedding table's memory instead of holding a second copy.
  virtual bool weight_layout_is_plain(DType dtype) const = 0;
  // Quantized weights (WeightFormat): the bytes pack_quantized() writes for this shape, and the
  // packing itself into dst (64-byte aligned). A backend without quantized kernels throws.
  virtual size_t packed_quantized_bytes(WeightFormat format, int64_t n_out, int64_t k_in, int32_t group) const;
  // A large table may be packed in chunks of rows: src then holds rows [row0, row0 + src.n_out)
  // of a weight of n_total rows (row0 a multiple of 16; the chunk with row0 == 0 comes first).
  virtual void pack_quantized(const QuantizedWeight& src, void* dst, int64_t row0 = 0, int64_t n_total = -1) const;

  // --- ops -----------------------------------------------------------------------------------
  // y[m, n_out] = x[m, k_in] · Wᵀ (+ bias[n_out] when bias != nullptr). For Int8 and Int4
  // weights the activations are taken as quant_activations() says (QuantActivations below); W is
  // always used exactly as its format defines it.
  virtual void linear(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) = 0;
  // A group of independent linears run as one op: y_i = x_i · W_iᵀ for every call (no bias).
  // Each call's result is exactly linear()'s (the same kernel on the same rows), so grouping
  // never changes a value; a backend may hand out all calls' output tiles in one parallel job
  // (the MoE experts of a step: one job per (expert, column tile) instead of one op per expert).
  // The default runs the calls one after another.
  struct LinearCall {
    const float* x = nullptr;  // [m, w->k_in]
    int64_t m = 0;
    const LinearWeight* w = nullptr;
    float* y = nullptr;  // [m, w->n_out]
  };
  virtual void linear_grouped(const LinearCall* calls, int64_t n) {
    for (int64_t i = 0; i < n; ++i) linear(calls[i].x, calls[i].m, *calls[i].w, nullptr, calls[i].y);
  }
  // y[m, d] = x / sqrt(mean(x²) + eps) * gamma[d]   (y may alias x)
  virtual void rms_norm(const float* x, const float* gamma, int64_t m, int64_t d, float eps, float* y) = 0;
  // In place on x[m, n_heads, head_dim]: rotate-half RoPE (plain or YaRN, kernels/rope_spec.h)
  // for each row's position.
  virtual void rope(float* x, const int32_t* positions, int64_t m, int32_t n_heads, int32_t head_dim,
                    const RopeSpec& rope) = 0;
  // out[m, inter] = silu(gate_up[m, 0:inter]) * gate_up[m, inter:2*inter]
  virtual void silu_mul(const float* gate_up, int64_t m, int64_t inter, float* out) = 0;
  // out[m, d] = table[ids[m], :] converted to f32; table is [vocab, d] in `dtype`.
  virtual void embedding(const int32_t* ids, int64_t m, const void* table, DType dtype, int64_t d, float* out) = 0;
  // out[m, w.k_in] = rows ids[m] of W as f32, read from its run-time layout (pack_weight's output):
  // a tied model looks its embeddings up in the lm_head's staged copy, so the table is staged
  // once. The default serves plain layouts; a backend that packs overrides it.
  virtual void weight_rows(const int32_t* ids, int64_t m, const LinearWeight& w, float* out) {
    embedding(ids, m, w.data, w.dtype, w.k_in, out);
  }
  // y[i] += x[i] for i < n (residual connections)
  virtual void add_inplace(float* y, const float* x, int64_t n) = 0;
  // Writes k[t], v[t] ([m, n_kv_heads, head_dim] f32) into cache slots slot_mapping[t].
  virtual void kv_store(const float* k, const float* v, const int64_t* slot_mapping, int64_t m,
                        const KvCacheLayer& cache) = 0;
  // Causal attention over the paged cache. q is [m, n_heads, head_dim] (RoPE applied);
  // out is [m, n_heads, head_dim]. Query head h reads KV head h / (n_heads / n_kv_heads).
  // Scale is 1/sqrt(head_dim). Must not materialise a [T, T] matrix (online softmax).
  virtual void paged_attention(const float* q, int64_t m, int32_t n_heads, const KvCacheLayer& cache,
                               const AttentionBatch& batch, float* out) = 0;

  // The gated delta rule over one sequence (GdnSequence above). The default is the scalar
  // definition (kernels/gdn_recurrence.h); a backend may run heads in parallel and vectorised, as
  // long as each head's arithmetic does not depend on the thread count.
  virtual void gated_delta_rule(const GdnSequence& s);
  // Value head h of s alone, on the calling thread, with exactly the arithmetic gated_delta_rule
  // gives that head (a fused decode path runs its heads inside its own parallel jobs).
  virtual void gated_delta_rule_head(const GdnSequence& s, int32_t h);
  // The same rule in the chunked WY form (kernels/gdn_chunked.h, C = 64), for --gdn-prefill chunked:
  // equal to gated_delta_rule up to rounding. Only where gdn_chunked_supported(d_k, d_v) says so
  // (the default: nowhere; the loader refuses the option otherwise).
  virtual bool gdn_chunked_supported(int32_t d_k, int32_t d_v) const {
    (void)d_k;
    (void)d_v;
    return false;
  }
  virtual void gated_delta_rule_chunked(const GdnSequence& s);

  // What Int8 / Int4 linears take as activations (Fp8 weights always take f32).
  virtual QuantActivations quant_activations() const { return QuantActivations::F32; }
  bool quant_int8_activations() const { return quant_activations() == QuantActivations::Int8; }

  // (optional) wait for queued work; CPU backends are synchronous.
  virtual void synchronize() {}

  // Host work between kernels, row by row (the engine's sampler): fn(i) for every i in [0, n),
  // returning when all are done. The CPU backend spreads rows over its own (pinned) threads;
  // the default runs them on the calling thread. fn must not throw.
  virtual void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
};

// Bytes of `w` as staged for `backend` (pack_weight's or pack_quantized's output, scales and zero
// points included): what one pass over the weight reads from memory.
size_t linear_weight_bytes(const Backend& backend, const LinearWeight& w);

// What the matrix products may round their f32 inputs to (weights are always used as stored and
// accumulation is always f32). Named as torch.set_float32_matmul_precision names its levels:
//   Highest: x in f32, f32 FMA (24 significant bits).
//   High:    x ≈ hi + lo, two bf16 (~16 bits), two AVX512_BF16 dot products per pair: the f32-FMA
//            rate without widening W; max|Δlogit| ~1e-5 of the logit range. The default.
//   Medium:  x rounded to one bf16 (8 bits): twice the multiply-add rate, logits off by ~1e-2 of
//            their range (measured in the kernels report), for throughput over exactness.
// High and Medium apply to bf16 weights on CPUs with AVX512_BF16; Medium also to f16 weights there
// (W rounded to bf16 as well, as torch's "medium" computes in bf16; High keeps them exact with f32
// x); elsewhere the f32 path runs
// (which is at least as exact) and Backend::name() says which path is in use. Int8 / Int4 weights
// (QuantActivations): High gives them the same two-bf16 x (W4A16 / W8A16; int16 x per block of 64
// inputs on AVX2, which has no bf16 dot product), Medium int8 x per token (W4A8 / W8A8, the
// fastest), Highest f32; Fp8 weights take f32 x at every level.
enum class MatmulPrecision { Highest, High, Medium };
inline constexpr MatmulPrecision kDefaultMatmulPrecision = MatmulPrecision::High;
const char* matmul_precision_name(MatmulPrecision p);  // "highest" | "high" | "medium"
// Parses a --matmul-precision value; an unknown one is an error naming the allowed values.
MatmulPrecision parse_matmul_precision(const std::string& s);

// Which CPU kernel runs the products of bf16 weights at High and Medium (Highest is always the
// f32 FMA kernel). Auto picks per CPU (cpu_backend.cpp, choose_linear_kernel): AMX tiles where
// the OS grants them, else the AVX-512 BF16 dot product where it measures faster than f32 FMA
// for the precision, else f32 FMA. Asking for a kernel this CPU cannot run is an error.
enum class CpuLinearKernel { Auto, F32, Bf16Dot, Amx };
const char* cpu_linear_kernel_name(CpuLinearKernel k);  // "auto" | "f32" | "bf16dot" | "amx"
// Parses a --cpu-linear-kernel value; an unknown one is an error naming the allowed values.
CpuLinearKernel parse_cpu_linear_kernel(const std::string& s);
// One line for --help and the start-up log: what Auto picks on this CPU for each precision and
// why (e.g. "amx tiles (amx-bf16+int8) for high and medium; f32 FMA for highest").
std::string describe_cpu_linear_choice();

// The CPU backend for the best ISA of this CPU (cpu_isa(), capped by $PYPTO_ISA), running its
// ops on `num_threads` threads pinned to `cores` (empty = no pinning).
std::unique_ptr<Backend> make_cpu_backend(int num_threads, const std::vector<int>& cores = {},
                                          MatmulPrecision precision = kDefaultMatmulPrecision,
                                          CpuLinearKernel kernel = CpuLinearKernel::Auto);
// The activations make_cpu_backend(..., precision) gives Int8 / Int4 weights on this CPU (High:
// Bf16Pair with AVX512_BF16, Int16 on AVX2; F32 where the ISA has neither kernel).
QuantActivations cpu_quant_activations(MatmulPrecision precision);
// The scalar reference backend (single thread): the definition every optimised kernel is tested
// against. quant_act: how Int8 / Int4 linears take x, defined as the optimised kernels take it
// (Bf16Pair: x rounded to hi + lo; Int8: quantized per row; Int16: per row and block), each sum
// then exact in double.
std::unique_ptr<Backend> make_reference_backend(QuantActivations quant_act = QuantActivations::F32);

// Per-row activation quantization of the int8-activation linears, shared by every backend so the
// integers are identical: amax = max|x|; inv = 127 / amax (0 when amax is 0); xq[c] =
// round-to-nearest-even(x[c] · inv) in [-127, 127]; the row's scale is amax / 127.
inline float int8_row_inv(float amax) { return amax > 0.0f ? 127.0f / amax : 0.0f; }
inline float int8_row_scale(float amax) { return amax / 127.0f; }

// Int16 activations (QuantActivations::Int16), the same on every backend: x is cut per row into
// blocks of int16_act_block(format, group) inputs (64 for Int8 weights; for Int4 the largest of
// 64, 32, 16, 8 that divides the group, so blocks nest in groups); per block amax = max|x|,
// inv = 32767 / amax (0 when amax is 0), xq[c] = round-to-nearest-even(x[c] · inv) in
// [-32767, 32767], the block's scale amax / 32767. A block's integer sum Σ xq · q is at most
// 64 · 128 · 32767 < 2^31 (exact in s32).
inline int32_t int16_act_block(WeightFormat format, int32_t group) {
  if (format != WeightFormat::Int4) return 64;
  int32_t b = 64;
  while (b > 8 && group % b != 0) b /= 2;
  return b;
}
inline float int16_block_inv(float amax) { return amax > 0.0f ? 32767.0f / amax : 0.0f; }
inline float int16_block_scale(float amax) { return amax / 32767.0f; }

}  // namespace pypto
