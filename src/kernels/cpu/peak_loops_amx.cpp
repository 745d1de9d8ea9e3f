// AMX compute-peak loops (AMX flags; called only where amx_usable()). Four independent C tiles
// hide the tile-product latency, so the loop runs at the tile unit's throughput; A and B stay in
// tile registers (the figure a kernel's % is measured against).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/peak_loops.h"
#include "kernels/cpu/amx_tile.h"

namespace pypto::cpu {

namespace {
// Loads tmm4-7 (A, A', B, B') from `bytes` and zeros tmm0-3.
void load_operands(const void* bytes) {
  _tile_loadconfig(&kAmxConfigFull);
  _tile_loadd(4, bytes, 64);
  _tile_loadd(5, bytes, 64);
  _tile_loadd(6, bytes, 64);
  _tile_loadd(7, bytes, 64);
  zero_acc_tiles<2, 2>();
}

// `iters` rounds of `round` (four independent tile products into tmm0-3) over 64-byte rows of
// `fill` bytes; returns the multiply-adds: 16 × 16 outputs × `per_output` per product.
template <typename Round>
int64_t amx_loop(int64_t iters, uint8_t fill_lo, uint8_t fill_hi, int64_t per_output, Round round) {
  alignas(64) uint8_t ops[16 * 64];
  for (size_t i = 0; i < sizeof ops; ++i) ops[i] = i % 2 ? fill_hi : fill_lo;
  load_operands(ops);
  for (int64_t i = 0; i < iters; ++i) round();
  alignas(64) int32_t c[16 * 16];
  _tile_stored(0, c, 64);
  volatile int32_t sink = c[0];
  (void)sink;
  _tile_release();
  return iters * 4 * 16 * 16 * per_output;
}
}  // namespace

int64_t amx_bf16_loop(int64_t iters) {
  // bf16 0x3c00 (a small value: the sums stay finite), 32 multiply-adds per output and product.
  return amx_loop(iters, 0x00, 0x3c, 32, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
}

int64_t amx_int8_loop(int64_t iters) {
  // u8 · s8 ones, 64 multiply-adds per output and product.
  return amx_loop(iters, 0x01, 0x01, 64, [] {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  });
}

}  // namespace pypto::cpu
