// Int8 weights at high (W8A16) where the CPU has AVX-512 VBMI: the tiles of linear_quant_bf16_q8.h
// with the byte look-up conversion (Q8Lookup), in place of the widening one of
// linear_quant_bf16_avx512.cpp. Same operations per output in the same order, so the same bits.
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/linear_quant_bf16_q8.h"

#ifndef __AVX512VBMI__
#error "linear_quant_bf16_vbmi.cpp needs -mavx512vbmi (src/kernels/CMakeLists.txt)"
#endif

namespace pypto::cpu {
void fill_linear_quant_bf16_vbmi(KernelTable& t) { t.linear_cols_q8_bf16 = qbf16::linear_cols_q8_bf16<qbf16::Q8Lookup>; }
}  // namespace pypto::cpu
