#pragma once
// y[m, n_out] = x[m, k] · W[n_out, k]ᵀ (+ bias) on a plain row-major W (bf16 / f16 / f32),
// compiled once per ISA (include after simd.h).
//
// Every output element y[i, n] is computed the same way whatever m is, which is what makes the
// op batch-invariant: lane l of one f32 vector accumulator sums x[i, k]·W[n, k] over
// k = l, l + L, l + 2L, ... with FMA in increasing k (the tail masked to zeros), then hsum() adds
// the L lanes in a fixed tree, then the bias is added. Only the way tiles are scheduled changes
// with m:
//   m < kScratchRows (decode): W is streamed once from memory and widened to f32 in registers,
//     tiles of up to kMR rows of x by kNR1 (m = 1) or kNR W rows. Memory-bound: each weight byte
//     is read once per call, by one thread.
//   m >= kScratchRows (prefill): a block of W rows is widened to f32 once into the thread's
//     scratch (sized to stay in L2) and reused by every kMR-row tile of x. Compute-bound.
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512F__)
constexpr int kMR = 4, kNR = 6, kNR1 = 8;  // 24 (or 8) accumulators + W vectors: fits 32 zmm
#else
constexpr int kMR = 4, kNR = 3, kNR1 = 4;  // 12 (or 4) accumulators + W vectors: fits 16 ymm
#endif
constexpr int64_t kScratchRows = 8;              // m at which W blocks are widened once into scratch
constexpr int64_t kScratchBytes = 256 * 1024;    // per-thread W block, well inside L2

// How a W row segment is widened to f32 lanes.
struct LoadBf16 {
  using T = uint16_t;
  static vf load(const T* p) { return load_bf16(p); }
  static vf load_n(const T* p, int n) { return load_bf16_n(p, n); }
};
struct LoadF16 {
  using T = uint16_t;
  static vf load(const T* p) { return load_f16(p); }
  static vf load_n(const T* p, int n) { return load_f16_n(p, n); }
};
struct LoadF32 {
  using T = float;
  static vf load(const T* p) { return vload(p); }
  static vf load_n(const T* p, int n) { return vload_n(p, n); }
};

// y[i, j] = Σ_k x[i, k] · w[j, k] (+ bias[j]) for i < MR, j < NR.
//   x [MR, k] with row stride ldx, w [NR, k] with row stride ldw, y [MR, NR] with row stride ldy.
template <int MR, int NR, class W>
inline void dot_tile(const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t k,
                     const float* bias, float* y, int64_t ldy) {
  vf acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vzero();
  int64_t kk = 0;
  for (; kk + kLanes <= k; kk += kLanes) {
    vf wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = W::load(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      vf xv = vload(x + i * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfma(xv, wv[j], acc[i][j]);
    }
  }
  if (kk < k) {
    const int rest = static_cast<int>(k - kk);
    vf wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = W::load_n(w + j * ldw + kk, rest);
    for (int i = 0; i < MR; ++i) {
      vf xv = vload_n(x + i * ldx + kk, rest);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfma(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      if (bias) s += bias[j];
      y[i * ldy + j] = s;
    }
}

// A tile of mr (1..kMR) rows by NR columns: picks the instantiation.
template <int NR, class W>
inline void dot_tile_rows(int64_t mr, const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t k,
                          const float* bias, float* y, int64_t ldy) {
  static_assert(kMR == 4, "dot_tile_rows handles 1..4 rows");
  switch (mr) {
    case 4: dot_tile<4, NR, W>(x, ldx, w, ldw, k, bias, y, ldy); break;
    case 3: dot_tile<3, NR, W>(x, ldx, w, ldw, k, bias, y, ldy); break;
    case 2: dot_tile<2, NR, W>(x, ldx, w, ldw, k, bias, y, ldy); break;
    default: dot_tile<1, NR, W>(x, ldx, w, ldw, k, bias, y, ldy); break;
  }
}

// All m rows by W rows [n0, n1): tiles of NR W rows, the last < NR rows one at a time.
template <int NR, class W>
inline void linear_block(const float* x, int64_t m, int64_t k, const typename W::T* w, int64_t ldw, int64_t n0,
                         int64_t n1, const float* bias, float* y, int64_t n_out) {
  int64_t j = n0;
  for (; j + NR <= n1; j += NR)
    for (int64_t i = 0; i < m; i += kMR)
      dot_tile_rows<NR, W>(m - i < kMR ? m - i : kMR, x + i * k, k, w + (j - n0) * ldw, ldw, k,
                           bias ? bias + j : nullptr, y + i * n_out + j, n_out);
  for (; j < n1; ++j)
    for (int64_t i = 0; i < m; i += kMR)
      dot_tile_rows<1, W>(m - i < kMR ? m - i : kMR, x + i * k, k, w + (j - n0) * ldw, ldw, k,
                          bias ? bias + j : nullptr, y + i * n_out + j, n_out);
}

inline int64_t scratch_ldw(int64_t k) { return (k + 15) / 16 * 16; }  // 64-byte rows in scratch
inline int64_t scratch_block_rows(int64_t k) {
  int64_t rows = kScratchBytes / (scratch_ldw(k) * 4) / kNR * kNR;
  return rows < kNR ? kNR : rows;
}

template <class W>
inline void widen_rows(const typename W::T* w, int64_t rows, int64_t k, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    const typename W::T* src = w + r * k;
    float* d = dst + r * ldd;
    int64_t kk = 0;
    for (; kk + kLanes <= k; kk += kLanes) vstore(d + kk, W::load(src + kk));
    if (kk < k) vstore_n(d + kk, W::load_n(src + kk, static_cast<int>(k - kk)), static_cast<int>(k - kk));
  }
}

template <class W>
inline void linear_cols_typed(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) {
  const auto* w = static_cast<const typename W::T*>(t.w);
  if (t.m < kScratchRows) {
    if (t.m == 1)
      linear_block<kNR1, W>(t.x, t.m, t.k, w + n0 * t.k, t.k, n0, n1, t.bias, t.y, t.n_out);
    else
      linear_block<kNR, W>(t.x, t.m, t.k, w + n0 * t.k, t.k, n0, n1, t.bias, t.y, t.n_out);
    return;
  }
  const int64_t ldw = scratch_ldw(t.k), block = scratch_block_rows(t.k);
  for (int64_t b0 = n0; b0 < n1; b0 += block) {
    const int64_t b1 = b0 + block < n1 ? b0 + block : n1;
    widen_rows<W>(w + b0 * t.k, b1 - b0, t.k, scratch, ldw);
    linear_block<kNR, LoadF32>(t.x, t.m, t.k, scratch, ldw, b0, b1, t.bias, t.y, t.n_out);
  }
}

inline void linear_cols(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) {
  switch (t.dtype) {
    case DType::BF16: linear_cols_typed<LoadBf16>(t, n0, n1, scratch); break;
    case DType::F16: linear_cols_typed<LoadF16>(t, n0, n1, scratch); break;
    default: linear_cols_typed<LoadF32>(t, n0, n1, scratch); break;
  }
}

inline int64_t linear_scratch_floats(int64_t k) { return scratch_block_rows(k) * scratch_ldw(k); }

}  // namespace pypto::cpu::PYPTO_ISA_NS
