#pragma once
// What the quantized-weight register tiles share (the VNNI tiles of linear_quant_vnni.cpp, the
// W8A16 / W4A16 tiles of linear_quant_bf16_q8.h and linear_quant_bf16_q4.h): the L1 prefetch along
// a weight stream, the masked store of 16 output columns (bias added); where an Int4 group's
// record lies is quant_q4_group.h. AVX-512F only; included by ISA translation units only (each compiles it with its
// own flags), hence the anonymous namespace.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/quant_q4_group.h"

namespace pypto::cpu {
namespace {

inline void prefetch_l1(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

inline __mmask16 col_mask(int64_t c0, int64_t n_out) {
  const int64_t left = n_out - c0;
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

// y[i][c0 .. c0 + 16) = v (+ bias), the columns past n_out masked off.
inline void store_out(const QuantLinearTask& t, int64_t i, int64_t c0, __m512 v) {
  const __mmask16 mk = col_mask(c0, t.n_out);
  if (t.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mk, t.bias + c0));
  _mm512_mask_storeu_ps(t.y + i * t.n_out + c0, mk, v);
}

}  // namespace
}  // namespace pypto::cpu
