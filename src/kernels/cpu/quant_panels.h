#pragma once
// Run-time layouts of quantized weights on the optimised CPU backend (WeightFormat, backend.h).
// All three keep panels of 16 output columns, as the bf16 and int8 tile kernels do, so one 64-byte
// load holds 16 columns and no horizontal sums are needed; scales follow the weights.
//
//   Int8 (Q8): quad panels of kernels/cpu/int8_panels.h, Wq[p][q][c][s] = q[16p + c][4q + s],
//     shared with the AMX-INT8 tile kernel | scale f32 [P·16] | colsum s32 [P·16] = 128 · Σ_k q
//     (the int8-activation kernels take x as u8 = xq + 128 and subtract it).
//   Int4 (Q4): super-panels of 4 panels (64 columns; P padded to a multiple of 4), and per
//     super-panel and group one record of kQ4RecordBytes(group): group / 8 chunks of 4 × 64 bytes
//     (chunk j, panel lane l: byte 4c + s holds column c's values at k = 8j + s (low nibble) and
//     8j + 4 + s (high nibble), relative to the group's first input) | scale f32 [4][16] | zero u8
//     [4][16]. One decode pass over 64 columns is then one sequential stream (separate panel,
//     scale and zero streams measured ~65 % of the read bandwidth; one stream ~90 %).
//   Fp8: [P][k][16] e4m3 bytes (one 16-byte row of 16 columns per input) | scale f32 [P][G][16].
// P = ceil(n / 16), G = ceil(k / group); zeros past n and k (their scales 0). Each array starts
// on a 64-byte boundary.
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"

namespace pypto::cpu {

struct QuantPanels {
  int64_t panels = 0, groups = 0;
  size_t weights_bytes = 0;         // the panels
  size_t scale_offset = 0;          // byte offsets from the start of the packed weight
  size_t aux_offset = 0;            // Q8: colsum, Q4: zero (Fp8: unused)
  size_t total_bytes = 0;
};

// The layout of a [n, k] weight of `format` (not Float) with `group` inputs per scale.
QuantPanels quant_panels(WeightFormat format, int64_t n, int64_t k, int32_t group);
// Packs src (plain, QuantizedWeight) into dst (quant_panels(...).total_bytes, 64-byte aligned):
// src holds rows [row0, row0 + src.n_out) of a weight of n_total rows (row0 % 16 == 0); the chunk
// with row0 == 0 clears the whole weight first.
void pack_quant_panels(const QuantizedWeight& src, uint8_t* dst, int64_t row0, int64_t n_total);
// Row r of W dequantized to f32 (k values): the lookup of a tied, quantized embedding table.
void quant_panel_row_to_f32(const LinearWeight& w, int64_t r, float* out);

// Bytes of one Int4 record (a super-panel's group): weights, scales, zero points.
inline int64_t q4_record_bytes(int32_t group) { return int64_t(group / 8) * 256 + 256 + 64; }

// Bytes per row of quantized activations for a [*, k] weight with `group`: a multiple of 64 that
// also covers whole groups (zeros past k).
inline int64_t quant_act_stride(int64_t k, int32_t group) {
  int64_t g = group > 0 ? (k + group - 1) / group * group : k;
  int64_t n = g > k ? g : k;
  return (n + 63) / 64 * 64;
}

}  // namespace pypto::cpu
