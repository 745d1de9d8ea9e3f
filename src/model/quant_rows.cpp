#include "model/quant_rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace pypto {

QuantRows::QuantRows(WeightFormat format, int64_t k, int32_t group)
    : format_(format), k_(k), groups_(format == WeightFormat::Int8 ? 1 : (k + group - 1) / group),
      group_(format == WeightFormat::Int8 ? 0 : group) {
  PYPTO_ASSERT(format != WeightFormat::Float);
  PYPTO_ASSERT(format == WeightFormat::Int8 || group > 0, "group ", group);
}

namespace {
// Round to nearest, ties to even, for |v| < 2^22 (the default rounding mode does it: adding and
// removing 1.5 · 2^23 leaves no fraction bits). Equals std::nearbyint there, without a libm call.
inline float round_even(float v) {
  const float big = 12582912.0f;  // not folded away: without -ffast-math (v + big) - big is kept
  return (v + big) - big;
}
}  // namespace

void QuantRows::append_quantized(const uint8_t* src, DType dtype, int64_t r0, int64_t r1) {
  PYPTO_ASSERT(format_ == WeightFormat::Int8 || format_ == WeightFormat::Int4, "online quantization is int8 or int4");
  const size_t esz = dtype_size(dtype);
  const int64_t n = r1 - r0, base = rows_;
  if (format_ == WeightFormat::Int8) {
    q8_.resize(static_cast<size_t>((base + n) * k_));
    scale_.resize(static_cast<size_t>(base + n));
  } else {
    q_.resize(static_cast<size_t>((base + n) * k_));
    scale_.resize(static_cast<size_t>((base + n) * groups_));
    zero_.resize(static_cast<size_t>((base + n) * groups_));
  }
  // Rows are independent: quantized in parallel, each writing only its own slots.
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    thread_local std::vector<float> w;
    w.resize(static_cast<size_t>(k_));
    const uint8_t* row = src + static_cast<size_t>((r0 + i) * k_) * esz;
    if (dtype == DType::BF16) {
      for (int64_t c = 0; c < k_; ++c) {
        uint16_t h;
        std::memcpy(&h, row + 2 * c, 2);
        w[size_t(c)] = bf16_to_f32(h);
      }
    } else {
      for (int64_t c = 0; c < k_; ++c) w[size_t(c)] = load_as_f32(row, dtype, size_t(c));
    }
    const int64_t r = base + i;
    if (format_ == WeightFormat::Int8) {
      float amax = 0.0f;
      for (float v : w) amax = std::max(amax, std::fabs(v));
      const float inv = int8_row_inv(amax);
      int8_t* q = q8_.data() + r * k_;
      for (int64_t c = 0; c < k_; ++c)
        q[c] = static_cast<int8_t>(std::clamp(static_cast<int>(round_even(w[size_t(c)] * inv)), -127, 127));
      scale_[size_t(r)] = int8_row_scale(amax);
      continue;
    }
    uint8_t* q = q_.data() + r * k_;
    for (int64_t g = 0; g < groups_; ++g) {
      const int64_t c0 = g * group_, c1 = std::min<int64_t>(k_, c0 + group_);
      float lo = 0.0f, hi = 0.0f;
      for (int64_t c = c0; c < c1; ++c) lo = std::min(lo, w[size_t(c)]), hi = std::max(hi, w[size_t(c)]);
      float scale = (hi - lo) / 15.0f;
      int zero = 0;
      if (scale > 0.0f) zero = std::clamp(static_cast<int>(round_even(-lo / scale)), 0, 15);
      else scale = 1.0f;
      scale_[size_t(r * groups_ + g)] = scale;
      zero_[size_t(r * groups_ + g)] = static_cast<uint8_t>(zero);
      for (int64_t c = c0; c < c1; ++c)
        q[c] = static_cast<uint8_t>(std::clamp(static_cast<int>(round_even(w[size_t(c)] / scale)) + zero, 0, 15));
    }
  }
  rows_ += n;
}

void QuantRows::append(const Fp8Source& s, int64_t r0, int64_t r1) {
  PYPTO_ASSERT(format_ == WeightFormat::Fp8 && s.k == k_ && s.block_k == group_ && r1 <= s.n, "fp8 rows of k ", s.k,
               " block ", s.block_k, " into k ", k_, " group ", group_);
  q_.insert(q_.end(), s.e4m3 + r0 * s.k, s.e4m3 + r1 * s.k);
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t g = 0; g < groups_; ++g) scale_.push_back(s.scale[size_t((r / s.block_n) * s.grid_k + g)]);
  rows_ += r1 - r0;
}

void QuantRows::append(const AwqSource& s, int64_t r0, int64_t r1) {
  PYPTO_ASSERT(format_ == WeightFormat::Int4 && s.k == k_ && s.group == group_ && r1 <= s.n, "awq rows of k ", s.k,
               " group ", s.group, " into k ", k_, " group ", group_);
  q_.insert(q_.end(), s.q.begin() + r0 * s.k, s.q.begin() + r1 * s.k);
  zero_.insert(zero_.end(), s.zero.begin() + r0 * s.groups, s.zero.begin() + r1 * s.groups);
  scale_.insert(scale_.end(), s.scale.begin() + r0 * s.groups, s.scale.begin() + r1 * s.groups);
  rows_ += r1 - r0;
}

void QuantRows::append(const QuantRows& o) {
  PYPTO_ASSERT(o.format_ == format_ && o.k_ == k_ && o.group_ == group_);
  q8_.insert(q8_.end(), o.q8_.begin(), o.q8_.end());
  q_.insert(q_.end(), o.q_.begin(), o.q_.end());
  zero_.insert(zero_.end(), o.zero_.begin(), o.zero_.end());
  scale_.insert(scale_.end(), o.scale_.begin(), o.scale_.end());
  rows_ += o.rows_;
}

QuantRows QuantRows::slice_cols(int64_t c0, int64_t c1) const {
  PYPTO_ASSERT(c0 >= 0 && c0 < c1 && c1 <= k_);
  if (format_ != WeightFormat::Int8 && (c0 % group_ != 0 || ((c1 - c0) % group_ != 0 && c1 != k_)))
    fail("a tensor-parallel slice of columns [", c0, ", ", c1, ") does not fall on whole ", weight_format_name(format_),
         " groups of ", group_, " inputs; use a --tp that divides the groups");
  QuantRows out(format_, c1 - c0, format_ == WeightFormat::Int8 ? 0 : group_);
  const int64_t g0 = format_ == WeightFormat::Int8 ? 0 : c0 / group_;
  for (int64_t r = 0; r < rows_; ++r) {
    if (format_ == WeightFormat::Int8) {
      out.q8_.insert(out.q8_.end(), q8_.begin() + r * k_ + c0, q8_.begin() + r * k_ + c1);
      out.scale_.push_back(scale_[size_t(r)]);
    } else {
      out.q_.insert(out.q_.end(), q_.begin() + r * k_ + c0, q_.begin() + r * k_ + c1);
      for (int64_t g = 0; g < out.groups_; ++g) {
        out.scale_.push_back(scale_[size_t(r * groups_ + g0 + g)]);
        if (format_ == WeightFormat::Int4) out.zero_.push_back(zero_[size_t(r * groups_ + g0 + g)]);
      }
    }
  }
  out.rows_ = rows_;
  return out;
}

QuantizedWeight QuantRows::view() const {
  QuantizedWeight w;
  w.format = format_;
  w.n_out = rows_;
  w.k_in = k_;
  w.group = group_;
  w.q8 = q8_.data();
  w.q4 = format_ == WeightFormat::Int4 ? q_.data() : nullptr;
  w.e4m3 = format_ == WeightFormat::Fp8 ? q_.data() : nullptr;
  w.zero = zero_.data();
  w.scale = scale_.data();
  return w;
}

}  // namespace pypto
