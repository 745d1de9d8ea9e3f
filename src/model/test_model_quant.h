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
#include <cstdint>

namespace pypto {

// codes [n, k] e4m3; scale_bf16 [ceil(n / bn), ceil(k / bk)].
void quantize_fp8_blocks(const float* w, int64_t n, int64_t k, int32_t bn, int32_t bk, uint8_t* codes,
                         uint16_t* scale_bf16);

// n % 8 == 0, k % g == 0. qweight [k, n / 8], qzeros [k / g, n / 8], scales_f16 [k / g, n].
void quantize_awq_gemm(const float* w, int64_t n, int64_t k, int32_t g, int32_t* qweight, int32_t* qzeros,
                       uint16_t* scales_f16);

}  // namespace pypto
