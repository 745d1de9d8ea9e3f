#pragma once
// Rows of a quantized weight being assembled while staging: a projection quantized online from its
// float checkpoint tensor (--quantization int8 | int4) or read from a pre-quantized checkpoint
// (FP8 blocks, AWQ), sliced for a tensor-parallel rank and fused (q|k|v, gate|up) by appending
// rows, then handed to Backend::pack_quantized as a QuantizedWeight. Scales are per row (Int8) or
// per row and group (Int4, Fp8), so appending rows never changes a value, and a rank's column
// slice (whole groups) holds exactly the values a single rank would: quantization happens on the
// whole row before slicing.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/backend.h"
#include "model/quantized_source.h"

namespace pypto {

class QuantRows {
 public:
  QuantRows(WeightFormat format, int64_t k, int32_t group);

  // Online quantization of rows [r0, r1) of a plain row-major float matrix [*, k] of `dtype`:
  //   Int8: per row, scale = amax / 127, q = round-to-nearest-even(w · 127 / amax).
  //   Int4: per row and group of `group`, asymmetric over [min(w, 0), max(w, 0)]: scale =
  //         (hi − lo) / 15, zero = clamp(round(−lo / scale), 0, 15), q = clamp(round(w / scale) +
  //         zero, 0, 15) (a constant-zero group gets scale 1, zero 0).
  void append_quantized(const uint8_t* src, DType dtype, int64_t r0, int64_t r1);
  // Rows [r0, r1) of a whole pre-quantized projection (k and the group must match this object's).
  void append(const Fp8Source& s, int64_t r0, int64_t r1);
  void append(const AwqSource& s, int64_t r0, int64_t r1);
  // All rows of another QuantRows of the same format, k and group (fusing q|k|v, gate|up).
  void append(const QuantRows& o);
  // Columns [c0, c1) of every row (c0 and c1 - c0 whole groups, or c1 == k): a row-parallel
  // rank's slice.
  QuantRows slice_cols(int64_t c0, int64_t c1) const;

  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  QuantizedWeight view() const;  // valid while this object lives and is not changed

 private:
  WeightFormat format_;
  int64_t k_ = 0, rows_ = 0, groups_ = 1;
  int32_t group_ = 0;
  std::vector<int8_t> q8_;
  std::vector<uint8_t> q_;      // Int4 values (one per byte) or Fp8 e4m3 codes
  std::vector<uint8_t> zero_;   // Int4 [rows, groups]
  std::vector<float> scale_;    // Int8 [rows]; Int4 / Fp8 [rows, groups]
};

}  // namespace pypto
