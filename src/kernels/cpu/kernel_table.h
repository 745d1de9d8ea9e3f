#pragma once
// The per-ISA kernel entry points behind the optimised CPU backend. Each entry works on a range
// of rows / columns so CpuBackend (ISA-neutral, cpu_backend.cpp) can split an op across its
// thread pool; the kernels themselves never touch threads. One table per ISA, filled in
// kernel_table_<isa>.cpp from the <op>_<isa>.cpp files.
#include <cstdint>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/backend.h"

namespace pypto::cpu {

// Most query-heads one attention task holds (its running softmax state lives in scratch). A
// prefill task widens each cache block of its KV head to f32 once for all of them, and streams
// that head's K / V once: 128 (64 rows of the 0.6B's GQA group of 2) measured 9 % faster than 64
// on a 16K prefill on 2 threads (issue 31), half the K / V read from memory per query.
constexpr int32_t kAttentionMaxQueries = 128;
// A cache block goes through the attention's column path when at least this many query-heads of
// a task see it; below that (decode with GQA groups < 8) the row path (attention_impl.h).
constexpr int32_t kAttentionColsMin = 8;
// Every query's keys are taken in fixed segments of this many cache blocks, folded in order
// (attention_impl.h): what lets a decode query be split along its sequence across threads.
constexpr int32_t kAttentionSegmentBlocks = 128;
// A sequence with 2 or more query rows whose query-heads per KV head (rows × GQA group) are at
// most this many goes out as decode-heads tasks (attention_decode_heads.h: several KV heads per
// task, the rows' query-heads side by side) instead of one task per KV head: a speculative verify
// step's k + 1 rows, a short chunk. Same bits either way; below a vector of query-heads the
// column path would leave lanes empty.
constexpr int32_t kAttentionFewRowsMaxQueries = 15;

// y[m, n_out] = x[m, k] · W[n_out, k]ᵀ (+ bias[n_out]); W plain row-major in `dtype`.
struct LinearTask {
  const float* x = nullptr;    // [m, k]
  int64_t m = 0, k = 0;
  const void* w = nullptr;     // [n_out, k] bf16 / f16 / f32
  DType dtype = DType::BF16;
  int64_t n_out = 0;
  const float* bias = nullptr; // [n_out] or nullptr
  float* y = nullptr;          // [m, n_out]
};

// Activations of an AMX linear: x as `parts` bf16 terms (x ≈ Σ parts), each in A tiles of
// 16 rows × 32 k (1 KiB, rows of 64 bytes), with zeros past m and k: m_pad = ceil(m / 16) · 16,
// ldx = ceil(k / 32) · 32. Element (i, k) of part p is at
//   data[p · m_pad · ldx + ((i / 16) · (ldx / 32) + k / 32) · 512 + (i % 16) · 32 + k % 32].
// (Plain rows with a power-of-two stride put a tile's 16 lines into a few cache sets; each tile
// contiguous loads as one 1 KiB run.)
struct AmxActivations {
  const uint16_t* data = nullptr;  // parts × [m_pad / 16, ldx / 32, 16, 32]
  int parts = 1;
  int64_t m_pad = 0, ldx = 0;
};

// The int8 core on AMX-INT8 (kernels/cpu/linear_amx_int8_impl.h): acc[m, n_out] = xq · wqᵀ in
// exact s32, xq u8 in A-tile order [m_pad / 16, ldx / 64, 16, 64] (ldx = ceil(k / 64) · 64, zeros
// past m and k), wq s8 in quad panels (kernels/cpu/int8_panels.h).
struct AmxInt8Activations {
  const uint8_t* data = nullptr;
  int64_t m_pad = 0, ldx = 0;
};
struct LinearInt8Task {
  int64_t m = 0, k = 0;
  const int8_t* w = nullptr;  // quad panels of [n_out, k]
  int64_t n_out = 0;
  int32_t* y = nullptr;       // [m, n_out]
};

// A quantized linear (WeightFormat Int8 / Int4 / Fp8; layouts in kernels/cpu/quant_panels.h):
// y[m, n_out] = x · Wᵀ (+ bias). The f32-activation kernel reads x; the bf16-pair kernels (High)
// read xp, x as hi + lo bf16 in kernel order (quant_x_bf16_pairs), and for Int4 xsumf, Σ (hi + lo)
// per row and group; the int8-activation kernels
// read xq, x quantized per row (backend.h int8_row_inv): u8 = xq + 128 for Int8 weights (VPDPBUSD
// multiplies u8 by s8; the weight's colsum removes the +128), s8 for Int4 (the weights are the u8
// side), rows of ldq bytes with zeros past k.
//   Int8: y = float(Σ xu·q − colsum) · (xscale · scale[n])
//   Int4: y = (Σ_g float(Σ_{k∈g} xq·q − zero · xsum[g]) · scale[n][g]) · xscale   (groups in order)
// The int16-activation kernels (High on AVX2) read xw, x quantized per row and block b
// (backend.h int16_act_block), with xscale [m, blocks] and for Int4 xsum [m, blocks]:
//   Int8: y = (Σ_b float(Σ_{k∈b} xq·q) · xscale[b]) · scale[n]              (blocks in order, FMA)
//   Int4: y = Σ_b float(Σ_{k∈b} xq·q − zero[g]·xsum[b]) · (scale[n][g] · xscale[b])   (g ∋ b; FMA)
// Every row is computed with the same operations whatever m, the column chunk or the kernel
// (VNNI or AMX: the integer sums are exact), so these are batch-invariant.
struct QuantLinearTask {
  WeightFormat format = WeightFormat::Int8;
  int64_t m = 0, k = 0, n_out = 0;
  int32_t group = 0;
  int64_t groups = 1;
  const uint8_t* w = nullptr;      // the panels
  const float* scale = nullptr;    // Int8 [P·16]; Int4 / Fp8 [P][G][16]
  const void* aux = nullptr;       // Int8: colsum s32 [P·16]; Int4: zero u8 [P][G][16]
  const float* x = nullptr;        // [m, k] f32 (f32-activation kernel)
  const uint8_t* xq = nullptr;     // [m, ldq] int8 activations
  int64_t ldq = 0;
  const float* xscale = nullptr;   // [m] amax / 127
  const int32_t* xsum = nullptr;   // [m, groups] Σ xq per group (Int4)
  const uint16_t* xp = nullptr;    // [m, ldp] bf16 pairs (bf16-pair kernels)
  int64_t ldp = 0;
  const float* xsumf = nullptr;    // [m, groups] Σ (hi + lo) per row and group (Int4, bf16-pair kernels)
  // Int16 kernels (High on AVX2): x as int16 per row and block of xblock inputs (backend.h
  // int16_act_block), rows of ldw int16 in kernel order (quantize_row_int16), zeros past k;
  // xscale then holds [m, blocks] block scales and, for Int4, xsum [m, blocks] Σ xq per block.
  const int16_t* xw = nullptr;
  int64_t ldw = 0;
  int32_t xblock = 0;
  const float* bias = nullptr;     // [n_out] or nullptr
  float* y = nullptr;              // [m, n_out]
};

// Attention for the query rows [t0, t1) of sequence `seq`, all query heads of KV head `kv_head`.
struct AttentionTask {
  const float* q = nullptr;  // [m, n_heads, head_dim]
  float* out = nullptr;      // [m, n_heads, head_dim]
  int32_t n_heads = 0;
  const KvCacheLayer* cache = nullptr;
  const AttentionBatch* batch = nullptr;
  int32_t seq = 0, kv_head = 0;
  int32_t t0 = 0, t1 = 0;
  // KV heads [kv_head, kv_head_end) for a decode-heads task (the rows [t0, t1) of a sequence of
  // one query row or of a few, kAttentionFewRowsMaxQueries; the backend makes them for GQA groups
  // below kAttentionColsMin, for one-row sequences of any group — one KV head or more — and split
  // tasks over all heads for one-row sequences): its heads' rows of each cache block are read as
  // one contiguous run (attention_decode_heads.h). 0: kv_head only (attention_fast).
  int32_t kv_head_end = 0;
  // Split along the sequence (a decode task over several KV heads only): this task computes
  // segment `seg` (kAttentionSegmentBlocks cache blocks) and writes its partial softmax state to
  // `partial` ([nq] max, [nq] sum, [nq, head_dim] numerator, nq = its query-heads) instead of out;
  // KernelTable::attention_fold then folds the sequence's segments into out. nullptr: no split.
  int32_t seg = 0;
  float* partial = nullptr;
};

struct KernelTable {
  Isa isa = Isa::Scalar;
  const char* name = nullptr;  // backend name, e.g. "cpu-avx512"

  // Columns [n0, n1) of y for all m rows. scratch: this thread's f32 buffer of
  // linear_scratch_floats(k) floats (holds a block of W widened to f32 for m >= some rows).
  void (*linear_cols)(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) = nullptr;
  int64_t (*linear_scratch_floats)(int64_t k) = nullptr;
  // (optional, AVX-512 BF16) bf16-dot linear for bf16 weights, columns [n0, n1): x given as
  // xh [m, k] bf16 (+ xl [m, k], x ≈ xh + xl, when xl != nullptr); see linear_bf16dot_impl.h.
  // nullptr where the ISA has no bf16 dot product.
  void (*linear_cols_bf16dot)(const uint16_t* xh, const uint16_t* xl, const LinearTask& t, int64_t n0,
                              int64_t n1) = nullptr;
  // (optional, AVX-512 and AVX2) linear for f16 weights packed as column panels (f16_panels.h),
  // columns [n0, n1) (n0 a multiple of 16), x in f32; see linear_f16_panels_impl.h. nullptr (the
  // reference backend): f16 weights stay plain rows and go through linear_cols.
  void (*linear_cols_f16_panels)(const LinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (optional, AVX2) linear for bf16 weights packed as pair panels (bf16_panels.h) with f32 x and
  // f32 FMA, columns [n0, n1) (n0 a multiple of 16); see linear_bf16_panels_f32_impl.h. nullptr:
  // bf16 weights meet f32 x on plain rows (linear_cols) unless a bf16-dot or AMX kernel takes them.
  void (*linear_cols_bf16_panels_f32)(const LinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (optional, AVX-512 BF16) the same f16 panels at --matmul-precision medium: xh [m, k] = bf16(x),
  // W rounded to bf16 (in registers at m = 1, into scratch of f16_bf16dot_scratch_bytes(k) bytes,
  // 64-byte aligned, at m >= 2), VDPBF16PS; see linear_f16_panels_bf16dot_impl.h.
  void (*linear_cols_f16_panels_bf16dot)(const uint16_t* xh, const LinearTask& t, int64_t n0, int64_t n1,
                                         uint16_t* scratch) = nullptr;
  // (optional, AMX-BF16 where the OS granted the tile state) the same product on AMX tiles,
  // columns [n0, n1) (n0 a multiple of 16), W in pair panels; see linear_amx_impl.h.
  void (*linear_cols_amx)(const AmxActivations& x, const LinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (optional, AMX-INT8 where granted) the integer core of an int8 linear, columns [n0, n1)
  // (n0 a multiple of 16); the quantized formats build on it.
  void (*linear_cols_amx_int8)(const AmxInt8Activations& x, const LinearInt8Task& t, int64_t n0, int64_t n1) = nullptr;
  // (optional, AVX-512 VNNI) quantized linears with int8 activations, columns [n0, n1) (n0 a
  // multiple of 16): Int8 and Int4 weights.
  void (*linear_cols_q8)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  void (*linear_cols_q4)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (with linear_cols_q8) one row of activations quantized to int8 (backend.h int8_row_inv):
  // q[0, k) = clamp(round-even(x · inv), ±127) (+ 128 when shifted), zeros in [k, ld); for
  // group > 0, xsum[g] = Σ q over group g (unshifted). Returns max|x|.
  float (*quantize_row_int8)(const float* x, int64_t k, int64_t ld, bool shifted, int32_t group, uint8_t* q,
                             int32_t* xsum) = nullptr;
  // (optional, AVX-512 BF16) quantized linears with 16-bit activations (High), columns [n0, n1)
  // (n0 a multiple of 16 for Int8, 64 for Int4): W converted exactly to bf16 in registers, x as
  // hi + lo bf16, VDPBF16PS; kernels/cpu/linear_quant_bf16_avx512.cpp.
  void (*linear_cols_q8_bf16)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  void (*linear_cols_q4_bf16)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (with them) one row of x [k] as their xp row [ldp] (ldp / 2 a multiple of 16 covering k and,
  // for Int4, whole groups): per 8 inputs 8 hi then 8 lo bf16 (hi = bf16(x), lo = bf16(x − hi)),
  // in Int4's order (k 0,2,4,6,1,3,5,7) when int4_order, else natural, zeros past k; for
  // group > 0 also xsum[g] = Σ (hi + lo) over group g (double, rounded once).
  void (*quant_x_bf16_pairs)(const float* x, int64_t k, int64_t ldp, bool int4_order, int32_t group, uint16_t* dst,
                             float* xsum) = nullptr;
  // (optional, AVX2) quantized linears with int16 activations (High where no bf16 dot product
  // exists), columns [n0, n1) (n0 a multiple of 16 for Int8, 64 for Int4): W widened exactly to
  // s16 in registers, VPMADDWD into exact s32 sums per block of x; linear_quant_i16_avx2.cpp.
  void (*linear_cols_q8_i16)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  void (*linear_cols_q4_i16)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (with them) one row of x [k] as int16 (backend.h int16_block_inv, blocks of `block` inputs)
  // into q [ld] in kernel order (int4_order: k 0,2,4,6,1,3,5,7 per 8 inputs; else k 0,2,1,3 per
  // 4), zeros past k; scale[b] = the block's amax / 32767 and, when xsum is not null, xsum[b] =
  // Σ xq over block b.
  void (*quantize_row_int16)(const float* x, int64_t k, int64_t ld, bool int4_order, int32_t block, int16_t* q,
                             float* scale, int32_t* xsum) = nullptr;
  // (optional) quantized linears with f32 activations, any quantized format: W dequantized
  // exactly in registers, f32 FMA.
  void (*linear_cols_dq)(const QuantLinearTask& t, int64_t n0, int64_t n1) = nullptr;
  // (optional, with linear_cols_q8 on AMX-INT8) y = float(acc − colsum) · (xscale · scale) for
  // columns [n0, n1) of the s32 sums acc [m, n_out] of linear_cols_amx_int8 (+ bias).
  void (*q8_epilogue)(const QuantLinearTask& t, const int32_t* acc, int64_t n0, int64_t n1) = nullptr;
  // (optional, with linear_cols_bf16dot) hi = bf16(x), lo = bf16(x - hi) for n elements.
  void (*split_bf16)(const float* x, int64_t n, uint16_t* hi, uint16_t* lo) = nullptr;
  // One row of x [k] as `parts` (1 or 2) bf16 terms straight into its line of AMX A tiles
  // (AmxActivations; dst = the row's line of its first tile, part p at dst + p · part_elems),
  // rounded as split_bf16 / from_f32 round, zeros past k. AVX-512 only (where AMX can exist).
  void (*x_row_to_amx_tiles)(const float* x, int64_t k, int parts, uint16_t* dst, int64_t part_elems) = nullptr;
  // Rows [r0, r1) of rms_norm (y may alias x).
  void (*rms_norm_rows)(const float* x, const float* gamma, int64_t r0, int64_t r1, int64_t d, float eps, float* y) = nullptr;
  // Rows [r0, r1) of rope. cos_t / sin_t are [max_pos, head_dim / 2] tables of this head_dim/theta.
  void (*rope_rows)(float* x, const int32_t* positions, int64_t r0, int64_t r1, int32_t n_heads, int32_t head_dim,
                    const float* cos_t, const float* sin_t) = nullptr;
  // Rows [r0, r1) of silu_mul.
  void (*silu_mul_rows)(const float* gate_up, int64_t r0, int64_t r1, int64_t inter, float* out) = nullptr;
  // dst[n] = src[n] widened to f32 (src bf16 / f16 / f32).
  void (*to_f32)(const void* src, DType dtype, int64_t n, float* dst) = nullptr;
  void (*add_f32)(float* y, const float* x, int64_t n) = nullptr;
  // dst[n] = src[n] in `dtype` (bf16: round-to-nearest-even, as f32_to_bf16; f32: copy).
  void (*from_f32)(const float* src, int64_t n, void* dst, DType dtype) = nullptr;
  // One attention task; scratch: attention_scratch_floats(block_size, head_dim) floats.
  void (*attention)(const AttentionTask& t, float* scratch) = nullptr;
  // Folds the nseg segment partials of a split decode task (t.partial: segment 0's) into t.out.
  void (*attention_fold)(const AttentionTask& t, int32_t nseg) = nullptr;
  // Whether a head_dim goes through the vector kernels a split decode task needs.
  bool (*attention_splits)(int32_t head_dim) = nullptr;
  int64_t (*attention_scratch_floats)(int32_t block_size, int32_t head_dim) = nullptr;
};

const KernelTable& kernel_table_avx512();
const KernelTable& kernel_table_avx2();
// The table for `isa` (Scalar has none: nullptr).
const KernelTable* kernel_table(Isa isa);

}  // namespace pypto::cpu
