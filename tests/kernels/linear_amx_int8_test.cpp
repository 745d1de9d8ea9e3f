// The AMX-INT8 core (kernels/cpu/linear_amx_int8_impl.h) against a scalar integer reference, on
// awkward shapes (m = 1, 7, 16, 17, 512; k and n not multiples of a tile) with the full u8 and s8
// ranges. The sums are exact integers, so the check is equality, and a row's result must be the
// same alone, in any batch and in any column split (threads). Skips where AMX is not usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "core/cpu_features.h"
#include "core/memory.h"
#include "kernels/cpu/int8_panels.h"
#include "kernels/cpu/kernel_table.h"

namespace pypto::test {
namespace {

struct Int8Problem {
  int64_t m, n, k;
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
};

Int8Problem make_problem(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  Int8Problem p{m, n, k, std::vector<uint8_t>(m * k), std::vector<int8_t>(n * k)};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
  for (auto& v : p.x) v = static_cast<uint8_t>(u8(rng));
  for (auto& v : p.w) v = static_cast<int8_t>(s8(rng));
  return p;
}

std::vector<int32_t> scalar_reference(const Int8Problem& p) {
  std::vector<int32_t> y(p.m * p.n);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t c = 0; c < p.n; ++c) {
      int64_t acc = 0;
      for (int64_t j = 0; j < p.k; ++j) acc += int64_t(p.x[i * p.k + j]) * p.w[c * p.k + j];
      y[i * p.n + c] = static_cast<int32_t>(acc);
    }
  return y;
}

// Runs the kernel on rows [r0, r0 + rows) of p, columns split at `split` (a multiple of 16).
std::vector<int32_t> run_amx(const cpu::KernelTable& kt, const Int8Problem& p, const AlignedBuffer& wq, int64_t r0,
                             int64_t rows, int64_t split) {
  AlignedBuffer xq(cpu::amx_int8_rows_bytes(rows, p.k));
  cpu::pack_amx_int8_rows(p.x.data() + r0 * p.k, rows, p.k, reinterpret_cast<uint8_t*>(xq.data()));
  cpu::AmxInt8Activations a{reinterpret_cast<const uint8_t*>(xq.data()), (rows + 15) / 16 * 16, cpu::amx_int8_ldx(p.k)};
  std::vector<int32_t> y(rows * p.n, -7);
  cpu::LinearInt8Task t{rows, p.k, reinterpret_cast<const int8_t*>(wq.data()), p.n, y.data()};
  if (split > 0 && split < p.n) {
    kt.linear_cols_amx_int8(a, t, 0, split);
    kt.linear_cols_amx_int8(a, t, split, p.n);
  } else {
    kt.linear_cols_amx_int8(a, t, 0, p.n);
  }
  return y;
}

TEST(LinearAmxInt8, ExactOnAwkwardShapesAndBatchInvariant) {
  if (!amx_usable()) GTEST_SKIP() << "AMX not usable on this machine (" << amx_status() << ")";
  const cpu::KernelTable& kt = cpu::kernel_table_avx512();
  ASSERT_NE(kt.linear_cols_amx_int8, nullptr);
  uint32_t seed = 5;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {1, 37, 63}, {7, 16, 64}, {16, 33, 65},
                         {17, 100, 1000}, {512, 48, 130}, {33, 64, 3072}, {512, 17, 64}}) {
    SCOPED_TRACE(testing::Message() << "m=" << m << " n=" << n << " k=" << k);
    Int8Problem p = make_problem(m, n, k, seed++);
    AlignedBuffer wq(cpu::int8_panels_bytes(n, k));
    cpu::pack_int8_panels(p.w.data(), n, k, reinterpret_cast<int8_t*>(wq.data()));
    const auto ref = scalar_reference(p);
    const auto y = run_amx(kt, p, wq, 0, m, 0);
    ASSERT_EQ(y, ref);
    ASSERT_EQ(run_amx(kt, p, wq, 0, m, 16), ref) << "columns split at 16";
    // Rows alone and in chunks of 7 give the same integers.
    for (int64_t r0 = 0; r0 < m; r0 += 7) {
      const int64_t rows = std::min<int64_t>(7, m - r0);
      const auto part = run_amx(kt, p, wq, r0, rows, 0);
      ASSERT_TRUE(std::equal(part.begin(), part.end(), ref.begin() + r0 * n)) << "rows from " << r0;
    }
  }
}

}  // namespace
}  // namespace pypto::test
