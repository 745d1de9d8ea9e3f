#pragma once
// Where an Int4 group's record lies in the packed weight (quant_panels.h), for the quantized-weight
// register tiles of every ISA (quant_tile_io.h's AVX-512 tiles, linear_quant_avx2.cpp). Included
// by ISA translation units only, each compiling it with its own flags, hence the anonymous
// namespace (no inline symbol shared between an AVX-512 and an AVX2 object).
#include <cstdint>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"

namespace pypto::cpu {
namespace {

// Group gi of Int4 super-panel sp: its weight chunks (chunk ch, panel v at w + ch * 256 + v * 64),
// its tail (scales f32 [4][16], then zero points u8 [4][16] at tail + 256), its first input k0 and
// how many of its chunks of 8 inputs lie below k (the last group may be short; k % 8 == 0).
struct Q4Group {
  const uint8_t* w;
  const uint8_t* tail;
  int64_t k0, n_chunks;
};
inline Q4Group q4_group(const QuantLinearTask& t, int64_t sp, int64_t gi) {
  const int64_t chunks = t.group / 8;
  const uint8_t* record = t.w + (sp * t.groups + gi) * q4_record_bytes(t.group);
  const int64_t k0 = gi * t.group;
  return {record, record + chunks * 256, k0, (t.k - k0) / 8 < chunks ? (t.k - k0) / 8 : chunks};
}

}  // namespace
}  // namespace pypto::cpu
