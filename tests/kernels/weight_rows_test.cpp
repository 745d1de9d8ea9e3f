// Backend::weight_rows: the embedding lookup of a tied model reads rows from the lm_head's staged
// (packed) copy. On every kernel path (ISA x precision) and dtype, rows read back from the packed
// layout must be bitwise the f32 of the checkpoint rows, as the reference backend's embedding of
// the plain table gives them (weights are stored exactly; the lookup only widens).
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace pypto::test {
namespace {

TEST(WeightRows, PackedRowsReadBackAsThePlainEmbedding) {
  auto ref = make_reference_backend();
  // n not a multiple of the 16-row panels, odd and even k, k past one panel's pair run.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{37, 70}, {16, 33}, {5, 1}, {50, 1030}}) {
    const std::vector<int32_t> ids = {0, int32_t(n - 1), int32_t(n / 2), 3 % int32_t(n), 0};
    const int64_t m = int64_t(ids.size());
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      const auto table = encode(random_f32(size_t(n * k), uint32_t(n + k)), dt);
      std::vector<float> want(size_t(m * k));
      ref->embedding(ids.data(), m, table.data(), dt, k, want.data());
      for (const auto& c : optimised_cases()) {
        auto be = make_case(c);
        const PackedWeight packed(*be, table, dt, n, k);
        std::vector<float> got(size_t(m * k), NAN);
        be->weight_rows(ids.data(), m, packed.w, got.data());
        ASSERT_TRUE(bitwise_equal(got.data(), want.data(), got.size()))
            << c.label << " " << dtype_name(dt) << " n=" << n << " k=" << k;
      }
    }
  }
}

}  // namespace
}  // namespace pypto::test
