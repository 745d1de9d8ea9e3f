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
//   m >= kScratchRows (prefill): blocks of W rows are widened to f32 into the thread's scratch
//     k-chunk by k-chunk and reused by every kMR-row tile of x (gemm_cols: blocked for L1/L2).
//     Compute-bound. Chunking k keeps each lane's order: accumulators are saved between chunks.
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512F__)
constexpr int kMR = 4, kNR = 6, kNR1 = 8;  // 24 (or 8) accumulators + W vectors: fits 32 zmm
#else
constexpr int kMR = 4, kNR = 3, kNR1 = 4;  // 12 (or 4) accumulators + W vectors: fits 16 ymm
#endif
constexpr int64_t kScratchRows = 8;  // m at which W blocks are widened once into scratch (gemm_cols)

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

// acc[i][j] lane l += x[i, kk]·w[j, kk] for kk = l, l + L, ... < len (masked tail when len % L).
//   x [MR, len] with row stride ldx, w [NR, len] with row stride ldw.
template <int MR, int NR, class W>
inline void dot_tile_accumulate(const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t len,
                                vf (&acc)[MR][NR]) {
  int64_t kk = 0;
  for (; kk + kLanes <= len; kk += kLanes) {
    vf wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = W::load(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      vf xv = vload(x + i * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfma(xv, wv[j], acc[i][j]);
    }
  }
  if (kk < len) {
    const int rest = static_cast<int>(len - kk);
    vf wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = W::load_n(w + j * ldw + kk, rest);
    for (int i = 0; i < MR; ++i) {
      vf xv = vload_n(x + i * ldx + kk, rest);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfma(xv, wv[j], acc[i][j]);
    }
  }
}

// y[i, j] = hsum(acc[i][j]) (+ bias[j]): the accumulators reduced 8 at a time by hsum8() (the
// same bits as hsum(), fewer instructions), padded with zero vectors to a multiple of 8.
template <int MR, int NR>
inline void tile_store(vf (&acc)[MR][NR], const float* bias, float* y, int64_t ldy) {
  constexpr int kN = MR * NR, kGroups = (kN + 7) / 8;
  float sums[kGroups * 8];
  for (int g = 0; g < kGroups; ++g) {
    vf v[8];
    for (int q = 0; q < 8; ++q) v[q] = g * 8 + q < kN ? acc[(g * 8 + q) / NR][(g * 8 + q) % NR] : vzero();
    hsum8(v, sums + g * 8);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = sums[i * NR + j];
      if (bias) s += bias[j];
      y[i * ldy + j] = s;
    }
}

// y[i, j] = Σ_k x[i, k] · w[j, k] (+ bias[j]) for i < MR, j < NR, over the whole k at once.
template <int MR, int NR, class W>
inline void dot_tile(const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t k,
                     const float* bias, float* y, int64_t ldy) {
  vf acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vzero();
  dot_tile_accumulate<MR, NR, W>(x, ldx, w, ldw, k, acc);
  tile_store<MR, NR>(acc, bias, y, ldy);
}

// The same tile over one k-chunk [k0, k0 + len) of a longer k: the lane accumulators come from
// (and go back to) `saved` ([MR * NR] vectors) between chunks, so each lane still sums its
// elements in increasing k exactly as dot_tile does (chunks start at multiples of L); the first
// chunk starts from zero and the last one stores y.
template <int MR, int NR, class W>
inline void dot_tile_chunk(const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t len, bool first,
                           bool last, float* saved, const float* bias, float* y, int64_t ldy) {
  vf acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = first ? vzero() : vload(saved + (i * NR + j) * kLanes);
  dot_tile_accumulate<MR, NR, W>(x, ldx, w, ldw, len, acc);
  if (last) {
    tile_store<MR, NR>(acc, bias, y, ldy);
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) vstore(saved + (i * NR + j) * kLanes, acc[i][j]);
  }
}

// A tile of mr (1..kMR) rows by NR columns: picks the instantiation.
template <int NR, class W>
inline void dot_tile_rows(int64_t mr, const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t k,
                          const float* bias, float* y, int64_t ldy) {
  static_assert(kMR <= 4, "dot_tile_rows handles 1..4 rows");
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

// Blocking of the m >= kScratchRows path (per thread, sizes for a 48 KiB L1 / 1 MiB L2):
//   kKc     k-chunk: a kMR-row x tile (8 KiB) and a kNR-row W tile (12 KiB) of one chunk sit in L1
//   kNb     W rows widened to f32 per block: [kNb, kKc] = 96 KiB of scratch, in L2
//   kMb     rows of x per pass: [kMb, kKc] = 128 KiB in L2, re-read for every W tile
constexpr int64_t kKc = 1024, kNb = 8 * kNR, kMb = 128 / kMR * kMR;  // kMb: a multiple of kMR

template <int NR, class W>
inline void chunk_tile_rows(int64_t mr, const float* x, int64_t ldx, const typename W::T* w, int64_t ldw, int64_t len,
                            bool first, bool last, float* saved, const float* bias, float* y, int64_t ldy) {
  switch (mr) {
    case 4: dot_tile_chunk<4, NR, W>(x, ldx, w, ldw, len, first, last, saved, bias, y, ldy); break;
    case 3: dot_tile_chunk<3, NR, W>(x, ldx, w, ldw, len, first, last, saved, bias, y, ldy); break;
    case 2: dot_tile_chunk<2, NR, W>(x, ldx, w, ldw, len, first, last, saved, bias, y, ldy); break;
    default: dot_tile_chunk<1, NR, W>(x, ldx, w, ldw, len, first, last, saved, bias, y, ldy); break;
  }
}

template <class W>
inline void widen_block(const typename W::T* w, int64_t ldw_src, int64_t rows, int64_t len, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const typename W::T* src = w + r * ldw_src;
    float* d = dst + r * kKc;
    int64_t kk = 0;
    for (; kk + kLanes <= len; kk += kLanes) vstore(d + kk, W::load(src + kk));
    if (kk < len) vstore_n(d + kk, W::load_n(src + kk, static_cast<int>(len - kk)), static_cast<int>(len - kk));
  }
}

// scratch: [kNb, kKc] widened W chunk, then the saved lane accumulators of every
// (x tile, W tile) pair of one (m-pass, W block): [kMb, kNb, L] floats.
inline int64_t linear_scratch_floats(int64_t) { return kNb * kKc + kMb * kNb * kLanes; }

template <class W>
inline void gemm_cols(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) {
  const auto* w = static_cast<const typename W::T*>(t.w);
  float* wf = scratch;
  float* saved = scratch + kNb * kKc;
  for (int64_t m0 = 0; m0 < t.m; m0 += kMb) {
    const int64_t m1 = m0 + kMb < t.m ? m0 + kMb : t.m;
    for (int64_t b0 = n0; b0 < n1; b0 += kNb) {
      const int64_t b1 = b0 + kNb < n1 ? b0 + kNb : n1;
      for (int64_t k0 = 0; k0 < t.k; k0 += kKc) {
        const int64_t len = t.k - k0 < kKc ? t.k - k0 : kKc;
        const bool first = k0 == 0, last = k0 + len == t.k;
        widen_block<W>(w + b0 * t.k + k0, t.k, b1 - b0, len, wf);
        // W tile outer (it stays in L1), x tiles inner (streamed from L2): each x vector loaded is
        // used kNR times, each W vector kMR times, so the operand with more reuse comes from L2.
        for (int64_t j = b0; j < b1;) {
          const int64_t nr = b1 - j >= kNR ? kNR : 1;
          for (int64_t i = m0; i < m1; i += kMR) {
            const int64_t mr = m1 - i < kMR ? m1 - i : kMR;
            const float* xi = t.x + i * t.k + k0;
            float* yij = t.y + i * t.n_out + j;
            // Saved accumulators of tile (i, j): this x tile owns kMR * kNb vectors.
            float* sv = saved + (i - m0) * kNb * kLanes + (j - b0) * kMR * kLanes;
            const float* bj = t.bias ? t.bias + j : nullptr;
            if (nr == kNR)
              chunk_tile_rows<kNR, LoadF32>(mr, xi, t.k, wf + (j - b0) * kKc, kKc, len, first, last, sv, bj, yij, t.n_out);
            else
              chunk_tile_rows<1, LoadF32>(mr, xi, t.k, wf + (j - b0) * kKc, kKc, len, first, last, sv, bj, yij, t.n_out);
          }
          j += nr;
        }
      }
    }
  }
}

template <class W>
inline void linear_cols_typed(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) {
  const auto* w = static_cast<const typename W::T*>(t.w);
  if (t.m >= kScratchRows) return gemm_cols<W>(t, n0, n1, scratch);
  if (t.m == 1)
    linear_block<kNR1, W>(t.x, t.m, t.k, w + n0 * t.k, t.k, n0, n1, t.bias, t.y, t.n_out);
  else
    linear_block<kNR, W>(t.x, t.m, t.k, w + n0 * t.k, t.k, n0, n1, t.bias, t.y, t.n_out);
}

inline void linear_cols(const LinearTask& t, int64_t n0, int64_t n1, float* scratch) {
  switch (t.dtype) {
    case DType::BF16: linear_cols_typed<LoadBf16>(t, n0, n1, scratch); break;
    case DType::F16: linear_cols_typed<LoadF16>(t, n0, n1, scratch); break;
    default: linear_cols_typed<LoadF32>(t, n0, n1, scratch); break;
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
