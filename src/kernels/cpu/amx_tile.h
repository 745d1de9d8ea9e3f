#pragma once
// AMX tile configuration (palette 1) for the kernels in linear_amx_impl.h. A configuration is a
// 64-byte block read by LDTILECFG; it must be a constant in static storage: GCC 12 can drop the
// stores to a local struct whose only reader is the LDTILECFG instruction, which then loads
// garbage and faults. Every configuration here is a constexpr object, so there are no stores.
//
// One shape serves every kernel: all eight tiles are 16 rows × 64 bytes.
//   bf16: A = 16 rows × 32 bf16 (16 pairs of k), B = 16 pair rows × 16 columns × 2 bf16 (one
//         run of 16 pairs of a bf16 panel, kernels/cpu/bf16_panels.h), C = 16 × 16 f32.
//   int8: A = 16 rows × 64 u8, B = 16 quad rows × 16 columns × 4 s8, C = 16 × 16 s32.
#if defined(__AMX_TILE__)
#include <immintrin.h>
#endif

#include <cstdint>

namespace pypto::cpu {

struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i (tiles 8..15 unused in palette 1)
  uint8_t rows[16] = {};
};
static_assert(sizeof(AmxTileConfig) == 64, "LDTILECFG reads exactly 64 bytes");

constexpr int kAmxTileRows = 16;
constexpr int kAmxTileBytes = 64;

constexpr AmxTileConfig amx_config_all_full() {
  AmxTileConfig c;
  c.palette_id = 1;
  for (int i = 0; i < 8; ++i) {
    c.colsb[i] = kAmxTileBytes;
    c.rows[i] = kAmxTileRows;
  }
  return c;
}

// All eight tiles 16 × 64 bytes (static storage: see the note above).
inline constexpr AmxTileConfig kAmxConfigFull = amx_config_all_full();

#if defined(__AMX_TILE__)
// The accumulator tiles of an RT × CT register block (RT, CT ≤ 2): tmm(2r + c) holds row tile r,
// column tile c. In memory tile (r, c) starts at base + r · row_step + c · col_step elements, and
// its 16 rows are ld_bytes apart. (Tile numbers must be constants: hence the four spelled out.)
template <int RT, int CT>
inline void zero_acc_tiles() {
  _tile_zero(0);
  if constexpr (CT == 2) _tile_zero(1);
  if constexpr (RT == 2) _tile_zero(2);
  if constexpr (RT == 2 && CT == 2) _tile_zero(3);
}
template <int RT, int CT, typename T>
inline void load_acc_tiles(const T* base, int64_t row_step, int64_t col_step, int64_t ld_bytes) {
  _tile_loadd(0, base, ld_bytes);
  if constexpr (CT == 2) _tile_loadd(1, base + col_step, ld_bytes);
  if constexpr (RT == 2) _tile_loadd(2, base + row_step, ld_bytes);
  if constexpr (RT == 2 && CT == 2) _tile_loadd(3, base + row_step + col_step, ld_bytes);
}
template <int RT, int CT, typename T>
inline void store_acc_tiles(T* base, int64_t row_step, int64_t col_step, int64_t ld_bytes) {
  _tile_stored(0, base, ld_bytes);
  if constexpr (CT == 2) _tile_stored(1, base + col_step, ld_bytes);
  if constexpr (RT == 2) _tile_stored(2, base + row_step, ld_bytes);
  if constexpr (RT == 2 && CT == 2) _tile_stored(3, base + row_step + col_step, ld_bytes);
}
#endif

}  // namespace pypto::cpu
