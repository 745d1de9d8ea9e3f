// Backend::linear_grouped (the MoE experts' products in one job): every call's output is bitwise
// linear()'s on the same call, on every optimised backend this CPU runs (each precision and
// kernel, 1-3 threads), for bf16 weights and each quantized format; calls of different widths
// and row counts (one of them 0 rows), small enough to run on the calling thread and large
// enough to go to the pool, and a mixed group that falls back to one op per call.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace pypto::test {
namespace {

struct Shape {
  int64_t m, n;
};

// Runs calls of `shapes` (weights from make_weight(i, n, k)) grouped and one by one; every output
// must be bitwise equal.
template <typename MakeWeight>
void check_group(Backend& be, const std::vector<Shape>& shapes, int64_t k, MakeWeight make_weight) {
  std::vector<LinearWeight> w;
  for (size_t i = 0; i < shapes.size(); ++i) w.push_back(make_weight(i, shapes[i].n, k));
  std::vector<std::vector<float>> x, y1, yg;
  std::vector<Backend::LinearCall> calls;
  for (size_t i = 0; i < shapes.size(); ++i) {
    x.push_back(random_f32(size_t(shapes[i].m * k), 100u + uint32_t(i), -3.0f, 3.0f));
    y1.emplace_back(size_t(shapes[i].m * shapes[i].n), NAN);
    yg.emplace_back(size_t(shapes[i].m * shapes[i].n), NAN);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    be.linear(x[i].data(), shapes[i].m, w[i], nullptr, y1[i].data());
    calls.push_back({x[i].data(), shapes[i].m, &w[i], yg[i].data()});
  }
  be.linear_grouped(calls.data(), int64_t(calls.size()));
  for (size_t i = 0; i < shapes.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "call " << i << ": m " << shapes[i].m << " n " << shapes[i].n << " k " << k);
    EXPECT_TRUE(bitwise_equal(y1[i].data(), yg[i].data(), y1[i].size()));
  }
}

// Small (serial), wide (pool), and with a zero-row call; widths off every column unit.
const std::vector<std::vector<Shape>> kGroups = {
    {{1, 17}, {1, 48}, {2, 5}},
    {{1, 1536}, {1, 1536}, {1, 1536}, {1, 1536}, {1, 1536}, {1, 1536}, {1, 1536}, {1, 1536}},
    {{3, 150}, {0, 64}, {7, 300}, {1, 129}, {17, 200}},
};

TEST(LinearGrouped, Bf16WeightsEqualOneCallAtATime) {
  for (const BackendCase& c : optimised_cases()) {
    SCOPED_TRACE(c.label);
    auto be = make_case(c);
    for (const auto& shapes : kGroups)
      for (int64_t k : {int64_t(72), int64_t(1024)}) {
        std::vector<std::unique_ptr<PackedWeight>> keep;
        check_group(*be, shapes, k, [&](size_t i, int64_t n, int64_t kk) {
          keep.push_back(std::make_unique<PackedWeight>(
              *be, encode(random_f32(size_t(n * kk), 7u + uint32_t(i)), DType::BF16), DType::BF16, n, kk));
          return keep.back()->w;
        });
      }
  }
}

TEST(LinearGrouped, QuantizedWeightsEqualOneCallAtATime) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  // Without the f32-activation kernel (linear_cols_dq) only int8 activations run: Int8 / Int4 at medium.
  const bool dq = kt && kt->linear_cols_dq, q8 = kt && kt->linear_cols_q8;
  if (!dq && !q8) GTEST_SKIP() << "no quantized kernels on " << isa_name(cpu_isa());
  for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium})
    for (int threads : {1, 2, 3}) {
      if (!dq && p != MatmulPrecision::Medium) continue;
      auto be = make_cpu_backend(threads, {}, p);
      SCOPED_TRACE(testing::Message() << matmul_precision_name(p) << " x" << threads << " "
                                      << quant_activations_name(be->quant_activations()));
      for (auto [format, group] : {std::pair{WeightFormat::Int8, 0}, {WeightFormat::Int4, 64}, {WeightFormat::Int4, 24},
                                   {WeightFormat::Fp8, 128}}) {
        if (!dq && format == WeightFormat::Fp8) continue;
        for (const auto& shapes : kGroups)
          for (int64_t k : {int64_t(72), int64_t(1024)}) {
            SCOPED_TRACE(testing::Message() << weight_format_name(format) << " g" << group);
            std::vector<RandomQuant> rq;
            std::vector<Staged> st;
            rq.reserve(shapes.size());
            st.reserve(shapes.size());
            check_group(*be, shapes, k, [&](size_t i, int64_t n, int64_t kk) {
              rq.push_back(random_quant(format, n, kk, group, 11u + uint32_t(i)));
              st.push_back(stage(*be, rq.back().w));
              return st.back().lw;
            });
          }
      }
    }
}

// Calls whose weights differ in format cannot share a kernel: the group runs call by call, with
// the same results.
TEST(LinearGrouped, MixedFormatsFallBackToOneCallAtATime) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_dq) GTEST_SKIP() << "no quantized kernels on " << isa_name(cpu_isa());
  auto be = make_cpu_backend(2, {}, MatmulPrecision::High);
  std::vector<RandomQuant> rq;
  std::vector<Staged> st;
  std::vector<std::unique_ptr<PackedWeight>> keep;
  rq.reserve(4);
  st.reserve(4);
  check_group(*be, {{2, 100}, {1, 300}, {3, 64}, {1, 129}}, 256, [&](size_t i, int64_t n, int64_t k) -> LinearWeight {
    if (i == 2) {
      keep.push_back(std::make_unique<PackedWeight>(*be, encode(random_f32(size_t(n * k), 5u), DType::BF16),
                                                    DType::BF16, n, k));
      return keep.back()->w;
    }
    rq.push_back(random_quant(i == 1 ? WeightFormat::Int8 : WeightFormat::Int4, n, k, i == 1 ? 0 : 32, 3u + uint32_t(i)));
    st.push_back(stage(*be, rq.back().w));
    return st.back().lw;
  });
}

}  // namespace
}  // namespace pypto::test
