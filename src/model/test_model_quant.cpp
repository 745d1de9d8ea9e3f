#include "model/test_model_quant.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/quant_config.h"

namespace pypto {

void quantize_fp8_blocks(const float* w, int64_t n, int64_t k, int32_t bn, int32_t bk, uint8_t* codes,
                         uint16_t* scale_bf16) {
  PYPTO_ASSERT(n > 0 && k > 0 && bn > 0 && bk > 0);
  const int64_t gn = (n + bn - 1) / bn, gk = (k + bk - 1) / bk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < gn; i++) {
    const int64_t r0 = i * bn, r1 = std::min(n, r0 + bn);
    for (int64_t j = 0; j < gk; j++) {
      const int64_t c0 = j * bk, c1 = std::min(k, c0 + bk);
      float amax = 0;
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) amax = std::max(amax, std::fabs(w[r * k + c]));
      // The stored (bf16) scale is the one the codes are made with, so code · scale is the
      // checkpoint's weight; rounding it down may push |w / scale| a little past 448: saturated.
      const uint16_t s16 = f32_to_bf16(amax > 0 ? amax / 448.0f : 1.0f);
      scale_bf16[i * gk + j] = s16;
      const float s = bf16_to_f32(s16);
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) codes[r * k + c] = f32_to_e4m3(w[r * k + c] / s);
    }
  }
}

void quantize_awq_gemm(const float* w, int64_t n, int64_t k, int32_t g, int32_t* qweight, int32_t* qzeros,
                       uint16_t* scales_f16) {
  PYPTO_ASSERT(n % 8 == 0 && g > 0 && k % g == 0, "n ", n, " k ", k, " group ", g);
  const int64_t n8 = n / 8, groups = k / g;
  int slot_of[8];  // the nibble slot holding column 8j + m
  for (int s = 0; s < 8; s++) slot_of[kAwqOrder[s]] = s;
#pragma omp parallel for schedule(dynamic)
  for (int64_t j = 0; j < n8; j++) {
    for (int64_t gi = 0; gi < groups; gi++) {
      float scale[8];
      int zero[8];
      for (int m = 0; m < 8; m++) {
        const float* row = w + (8 * j + m) * k + gi * g;
        float lo = row[0], hi = row[0];
        for (int32_t c = 1; c < g; c++) {
          lo = std::min(lo, row[c]);
          hi = std::max(hi, row[c]);
        }
        const uint16_t s16 = f32_to_f16(std::max(hi - lo, 1e-5f) / 15.0f);
        scales_f16[gi * n + 8 * j + m] = s16;
        scale[m] = f16_to_f32(s16);
        // std::nearbyint rounds half to even in the default rounding mode, as torch.round.
        zero[m] = static_cast<int>(std::clamp(std::nearbyint(-lo / scale[m]), 0.0f, 15.0f));
      }
      uint32_t zword = 0;
      for (int m = 0; m < 8; m++) zword |= static_cast<uint32_t>(zero[m]) << (4 * slot_of[m]);
      qzeros[gi * n8 + j] = static_cast<int32_t>(zword);
      for (int32_t c = 0; c < g; c++) {
        uint32_t word = 0;
        for (int m = 0; m < 8; m++) {
          const float v = w[(8 * j + m) * k + gi * g + c];
          const float q = std::clamp(std::nearbyint(v / scale[m]) + static_cast<float>(zero[m]), 0.0f, 15.0f);
          word |= static_cast<uint32_t>(q) << (4 * slot_of[m]);
        }
        qweight[(gi * g + c) * n8 + j] = static_cast<int32_t>(word);
      }
    }
  }
}

void quantize_gptq_sym(const float* w, int64_t n, int64_t k, int32_t g, int32_t* qweight, int32_t* qzeros,
                       uint16_t* scales_f16, int32_t* g_idx) {
  PYPTO_ASSERT(n % 8 == 0 && k % 8 == 0 && g > 0 && k % g == 0, "n ", n, " k ", k, " group ", g);
  const int64_t groups = k / g, k8 = k / 8;
  constexpr int kZero = 8;  // (maxq + 1) / 2 for 4 bits; stored as 7 (v1)
  std::vector<uint8_t> q(static_cast<size_t>(n * k));
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < n; r++) {
    const float* row = w + r * k;
    for (int64_t gi = 0; gi < groups; gi++) {
      float lo = 0.0f, hi = 0.0f;
      for (int32_t c = 0; c < g; c++) lo = std::min(lo, row[gi * g + c]), hi = std::max(hi, row[gi * g + c]);
      hi = std::max(-lo, hi);
      if (lo < 0.0f) lo = -hi;
      if (lo == 0.0f && hi == 0.0f) lo = -1.0f, hi = 1.0f;
      const uint16_t s16 = f32_to_f16((hi - lo) / 15.0f);
      scales_f16[gi * n + r] = s16;
      const float s = f16_to_f32(s16);
      for (int32_t c = 0; c < g; c++) {
        const float v = std::nearbyint(row[gi * g + c] / s) + static_cast<float>(kZero);
        q[static_cast<size_t>(r * k + gi * g + c)] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
      }
    }
  }
  for (int64_t kr = 0; kr < k8; kr++)
    for (int64_t r = 0; r < n; r++) {
      uint32_t word = 0;
      for (int s = 0; s < 8; s++) word |= static_cast<uint32_t>(q[static_cast<size_t>(r * k + 8 * kr + s)]) << (4 * s);
      qweight[kr * n + r] = static_cast<int32_t>(word);
    }
  uint32_t zword = 0;
  for (int s = 0; s < 8; s++) zword |= static_cast<uint32_t>(kZero - 1) << (4 * s);
  for (int64_t i = 0; i < groups * (n / 8); i++) qzeros[i] = static_cast<int32_t>(zword);
  for (int64_t c = 0; c < k; c++) g_idx[c] = static_cast<int32_t>(c / g);
}

}  // namespace pypto
