#include "model/test_model_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/quant_config.h"
#include "model/test_model.h"

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

namespace {

using test_model_detail::fill_uniform;

// One projection of a pre-quantized checkpoint. Its 2 (FP8), 3 (AWQ) or 4 (GPTQ) tensors are written one
// after another: the first fill generates the bf16 source weights and quantizes them, each fill
// copies its part out, and the last frees everything, so memory stays at one projection.
struct QuantizedProjection {
  QuantMethod method = QuantMethod::None;
  int64_t n = 0, k = 0;
  int32_t group = 0;  // FP8: the tile is group × group; AWQ / GPTQ: the group size along k
  uint64_t seed = 0;
  float a = 0;        // uniform half-width of the source weights
  int pending = 0;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  std::vector<int32_t> qweight, qzeros, g_idx;

  void ensure() {
    if (!scales.empty()) return;
    std::vector<uint16_t> src(static_cast<size_t>(n * k));
    fill_uniform(reinterpret_cast<uint8_t*>(src.data()), DType::BF16, n * k, seed, 0.0f, a);
    std::vector<float> w(src.size());
    for (size_t i = 0; i < src.size(); i++) w[i] = bf16_to_f32(src[i]);
    std::vector<uint16_t>().swap(src);
    if (method == QuantMethod::Fp8) {
      const int64_t gn = (n + group - 1) / group, gk = (k + group - 1) / group;
      codes.resize(static_cast<size_t>(n * k));
      scales.resize(static_cast<size_t>(gn * gk));
      quantize_fp8_blocks(w.data(), n, k, group, group, codes.data(), scales.data());
    } else if (method == QuantMethod::Gptq) {
      qweight.resize(static_cast<size_t>(k / 8 * n));
      qzeros.resize(static_cast<size_t>(k / group * n / 8));
      scales.resize(static_cast<size_t>(k / group * n));
      g_idx.resize(static_cast<size_t>(k));
      quantize_gptq_sym(w.data(), n, k, group, qweight.data(), qzeros.data(), scales.data(), g_idx.data());
    } else {
      qweight.resize(static_cast<size_t>(k * n / 8));
      qzeros.resize(static_cast<size_t>(k / group * n / 8));
      scales.resize(static_cast<size_t>(k / group * n));
      quantize_awq_gemm(w.data(), n, k, group, qweight.data(), qzeros.data(), scales.data());
    }
  }
};

// The fill of one of q's tensors: the member vector `part` once q is quantized.
template <typename T>
std::function<void(uint8_t*)> fill_part(const std::shared_ptr<QuantizedProjection>& q,
                                        std::vector<T> QuantizedProjection::*part) {
  q->pending++;
  return [q, part](uint8_t* dst) {
    q->ensure();
    const std::vector<T>& buf = (*q).*part;
    std::memcpy(dst, buf.data(), buf.size() * sizeof(T));
    if (--q->pending == 0) {  // swap with empties: `v = {}` would keep the capacity
      std::vector<uint8_t>().swap(q->codes);
      std::vector<uint16_t>().swap(q->scales);
      std::vector<int32_t>().swap(q->qweight);
      std::vector<int32_t>().swap(q->qzeros);
      std::vector<int32_t>().swap(q->g_idx);
    }
  };
}

}  // namespace

void add_quantized_projection(std::vector<SafetensorWrite>& tensors, QuantMethod method, const std::string& name,
                              int64_t n, int64_t k, int32_t group, uint64_t seed, float a) {
  PYPTO_ASSERT(method != QuantMethod::None && name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0, name);
  const std::string stem = name.substr(0, name.size() - 7);
  auto q = std::make_shared<QuantizedProjection>();
  q->method = method;
  q->n = n;
  q->k = k;
  q->group = group;
  q->seed = seed;
  q->a = a;
  if (method == QuantMethod::Fp8) {
    const int64_t gn = (n + group - 1) / group, gk = (k + group - 1) / group;
    tensors.push_back({name, DType::F8_E4M3, {n, k}, fill_part(q, &QuantizedProjection::codes)});
    tensors.push_back({stem + ".weight_scale_inv", DType::BF16, {gn, gk}, fill_part(q, &QuantizedProjection::scales)});
  } else if (method == QuantMethod::Gptq) {
    // AutoGPTQ's QuantLinear buffers, as Qwen/Qwen3-*-GPTQ-Int4 store them.
    if (n % 8 || k % 8) fail("GPTQ packs 8 inputs / 8 outputs per int32: ", name, " is [", n, ", ", k, "]");
    tensors.push_back({stem + ".qweight", DType::I32, {k / 8, n}, fill_part(q, &QuantizedProjection::qweight)});
    tensors.push_back({stem + ".qzeros", DType::I32, {k / group, n / 8}, fill_part(q, &QuantizedProjection::qzeros)});
    tensors.push_back({stem + ".scales", DType::F16, {k / group, n}, fill_part(q, &QuantizedProjection::scales)});
    tensors.push_back({stem + ".g_idx", DType::I32, {k}, fill_part(q, &QuantizedProjection::g_idx)});
  } else {
    if (n % 8) fail("AWQ packs 8 output features per int32: ", name, " has ", n);
    tensors.push_back({stem + ".qweight", DType::I32, {k, n / 8}, fill_part(q, &QuantizedProjection::qweight)});
    tensors.push_back({stem + ".qzeros", DType::I32, {k / group, n / 8}, fill_part(q, &QuantizedProjection::qzeros)});
    tensors.push_back({stem + ".scales", DType::F16, {k / group, n}, fill_part(q, &QuantizedProjection::scales)});
  }
}

}  // namespace pypto
