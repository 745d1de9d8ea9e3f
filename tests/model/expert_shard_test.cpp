// How Qwen3-MoE experts are divided among tensor-parallel ranks (model/moe_staging.h): every
// (expert, intermediate column) is held by exactly one rank, under the TP split and under expert
// parallelism, and the splits that do not divide are refused naming the field and the other split.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/moe_staging.h"

namespace pypto {
namespace {

ModelConfig moe_config(int64_t experts, int64_t moe_inter) {
  ModelConfig c;
  c.num_experts = int32_t(experts);
  c.moe_intermediate_size = moe_inter;
  return c;
}

// Counts how many ranks hold each (expert, column) cell: all must be 1.
void expect_partition(const ModelConfig& c, int tp, bool ep, WeightFormat f, int32_t group) {
  std::vector<int> held(size_t(c.num_experts * c.moe_intermediate_size), 0);
  for (int r = 0; r < tp; ++r) {
    const ExpertShard s = expert_shard(c, r, tp, ep, f, group);
    ASSERT_GT(s.count, 0);
    ASSERT_GT(s.inter, 0);
    for (int64_t e = s.first; e < s.first + s.count; ++e)
      for (int64_t i = s.inter_begin; i < s.inter_begin + s.inter; ++i) ++held[size_t(e * c.moe_intermediate_size + i)];
  }
  for (size_t i = 0; i < held.size(); ++i) ASSERT_EQ(held[i], 1) << "cell " << i << ", tp " << tp << ", ep " << ep;
}

std::string error_of(const ModelConfig& c, int tp, bool ep, WeightFormat f, int32_t group) {
  try {
    (void)expert_shard(c, 0, tp, ep, f, group);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ExpertShard, EveryExpertColumnHeldByExactlyOneRank) {
  const ModelConfig c = moe_config(128, 768);  // Qwen3-30B-A3B
  for (int tp : {1, 2, 4, 8}) {
    expect_partition(c, tp, false, WeightFormat::Float, 0);
    expect_partition(c, tp, true, WeightFormat::Float, 0);
  }
  expect_partition(c, 2, false, WeightFormat::Int4, 128);  // 384 columns: 3 whole groups
  const ExpertShard s = expert_shard(c, 3, 4, true, WeightFormat::Int4, 128);
  EXPECT_EQ(s.first, 96);
  EXPECT_EQ(s.count, 32);
  EXPECT_EQ(s.inter, 768);
}

TEST(ExpertShard, RefusesSplitsThatDoNotDivideNamingTheField) {
  const ModelConfig c = moe_config(128, 768);
  // 768 / 4 = 192 columns per rank: not whole groups of 128 (GPTQ-Int4) → expert parallelism.
  std::string e = error_of(c, 4, false, WeightFormat::Int4, 128);
  EXPECT_NE(e.find("would hold 192 input columns (moe_intermediate_size 768 / 4), not a multiple of the int4 group of "
                   "128 inputs; use --enable-expert-parallel"),
            std::string::npos)
      << e;
  EXPECT_EQ(error_of(c, 4, true, WeightFormat::Int4, 128), "");
  EXPECT_EQ(error_of(c, 4, false, WeightFormat::Int8, 0), "") << "int8 scales are per row: any column split works";
  e = error_of(c, 5, false, WeightFormat::Float, 0);
  EXPECT_NE(e.find("moe_intermediate_size (768) is not divisible by it; use --enable-expert-parallel"), std::string::npos)
      << e;
  e = error_of(moe_config(60, 768), 8, true, WeightFormat::Float, 0);
  EXPECT_NE(e.find("num_experts (60) is not divisible by it"), std::string::npos) << e;
}

}  // namespace
}  // namespace pypto
