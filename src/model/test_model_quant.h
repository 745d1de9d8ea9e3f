#pragma once
// The two pre-quantized formats make-test-model writes (io/quant_config.h), made from f32 weights
// W[n, k] (nn.Linear orientation: n output rows, k input columns) the way their tools make them:
//   block FP8 (Qwen/DeepSeek): per bn × bk tile, scale = amax / 448 rounded to bf16 (the dtype of
//     Qwen's weight_scale_inv), code = e4m3 RNE(w / scale), saturating; an all-zero tile gets
//     scale 1. The last tile row/column covers the leftovers.
//   AWQ GEMM (AutoAWQ's pseudo_quantize_tensor with zero points): per output row and group of g
//     input columns, scale = max(max − min, 1e-5) / 15 rounded to f16, zero = clamp(round(−min /
//     scale), 0, 15), q = clamp(round(w / scale) + zero, 0, 15), rounding half to even as
//     torch.round; q and zero packed 8 per int32 with kAwqOrder, transposed to [k, n / 8].
//   GPTQ-Int4, symmetric (AutoGPTQ's Quantizer with sym, 4 bits, then QuantLinear.pack, v1 zeros;
//     round-to-nearest: without calibration data there is no Hessian to compensate errors with,
//     so GPTQ's column updates are skipped — the grid and the packing are the published ones):
//     per output row and group of g inputs, lo = min(w, 0), hi = max(w, 0), hi = max(−lo, hi), lo = −hi
//     if lo < 0 (both 0: ±1), scale = (hi − lo) / 15 rounded to f16, zero = 8, q = clamp(round(w /
//     scale) + 8, 0, 15) with the f16 scale, half to even; qweight packs 8 consecutive inputs per
//     int32 (nibble s = input 8r + s), qzeros the stored zero 8 − 1 = 7 for 8 consecutive outputs.
#include <cstdint>
#include <string>
#include <vector>

#include "io/quant_config.h"
#include "io/safetensors.h"

namespace pypto {

// Appends the tensors of one projection `name` ("<proj>.weight", logical W [n, k]) of a
// pre-quantized checkpoint in `method`'s form, made from the bf16 weights uniform in [-a, a] with
// `seed` that the unquantized checkpoint of the same seed holds (so the two differ only by the
// quantization): fp8 `name` F8_E4M3 + `<proj>.weight_scale_inv` bf16 (tiles group × group); awq
// `<proj>.qweight` / `.qzeros` / `.scales` (n % 8 == 0); gptq the same plus `.g_idx` (n, k % 8 ==
// 0). `group` is the FP8 tile or the 4-bit group along k. The tensors are made when the first of
// them is written and freed after the last, so memory stays at one projection.
void add_quantized_projection(std::vector<SafetensorWrite>& tensors, QuantMethod method, const std::string& name,
                              int64_t n, int64_t k, int32_t group, uint64_t seed, float a);

// codes [n, k] e4m3; scale_bf16 [ceil(n / bn), ceil(k / bk)].
void quantize_fp8_blocks(const float* w, int64_t n, int64_t k, int32_t bn, int32_t bk, uint8_t* codes,
                         uint16_t* scale_bf16);

// n % 8 == 0, k % g == 0. qweight [k, n / 8], qzeros [k / g, n / 8], scales_f16 [k / g, n].
void quantize_awq_gemm(const float* w, int64_t n, int64_t k, int32_t g, int32_t* qweight, int32_t* qzeros,
                       uint16_t* scales_f16);

// n % 8 == 0, k % 8 == 0, k % g == 0. qweight [k / 8, n], qzeros [k / g, n / 8], scales_f16
// [k / g, n], g_idx [k] (= input / g).
void quantize_gptq_sym(const float* w, int64_t n, int64_t k, int32_t g, int32_t* qweight, int32_t* qzeros,
                       uint16_t* scales_f16, int32_t* g_idx);

}  // namespace pypto
