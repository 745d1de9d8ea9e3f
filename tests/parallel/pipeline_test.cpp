// Pipeline parallelism in one process (parallel/replicas/pipeline_stage.h):
//  - stages are balanced by bytes (expected splits worked out by hand), and a --pp larger than the
//    layer count is refused naming the flag, the value and the limit;
//  - a step's batch splits into micro-batches of whole sequences that put it back together exactly;
//  - a staged stage holds only its layers (the embedding on the first, lm_head on the last), and
//    the compile cache keys its slab by its layer range;
//  - a TpModelRunner of pp = 2 stages (tp 1 and tp 2 inside each, 1 and 3 micro-batches) gives
//    the single rank's logits for a mixed step of several sequences (within 1e-5 of max|logit| at
//    the exact f32 precision) and the same greedy continuation.
// The single-rank path is checked against PyTorch in tests/model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>

#include <unistd.h>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "parallel/replicas/pipeline_stage.h"
#include "parallel/shm_communicator.h"
#include "tp_harness.h"

namespace pypto::test {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool same(const std::vector<LayerRange>& got, const std::vector<std::pair<int, int>>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].begin != want[i].first || got[i].end != want[i].second) return false;
  return true;
}

TEST(PipelineStages, BalancedByBytes) {
  // Equal layers, equal ends: an even split.
  EXPECT_TRUE(same(balance_pipeline_stages(4, 2, 10, 25, 25), {{0, 2}, {2, 4}}));
  // A heavy embedding: [0,1) + 40 = 50 and [1,4) + 25 = 55 beat [0,2) = 60.
  EXPECT_TRUE(same(balance_pipeline_stages(4, 2, 10, 40, 25), {{0, 1}, {1, 4}}));
  // A heavy lm_head moves layers to the first stage.
  EXPECT_TRUE(same(balance_pipeline_stages(6, 2, 10, 0, 30), {{0, 4}, {4, 6}}));
  EXPECT_TRUE(same(balance_pipeline_stages(7, 3, 10, 0, 0), {{0, 2}, {2, 4}, {4, 7}}) ||
              same(balance_pipeline_stages(7, 3, 10, 0, 0), {{0, 3}, {3, 5}, {5, 7}}) ||
              same(balance_pipeline_stages(7, 3, 10, 0, 0), {{0, 2}, {2, 5}, {5, 7}}));
  EXPECT_TRUE(same(balance_pipeline_stages(3, 3, 10, 100, 100), {{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_TRUE(same(balance_pipeline_stages(5, 1, 10, 1, 1), {{0, 5}}));
}

TEST(PipelineStages, TooManyStagesNameTheFlagValueAndLimit) {
  const std::string e = error_of([] { balance_pipeline_stages(4, 5, 10, 0, 0); });
  EXPECT_NE(e.find("--pp 5"), std::string::npos) << e;
  EXPECT_NE(e.find("4 decoder layers"), std::string::npos) << e;
  EXPECT_NE(e.find("between 1 and 4"), std::string::npos) << e;
  EXPECT_NE(error_of([] { balance_pipeline_stages(4, 0, 10, 0, 0); }).find("--pp 0"), std::string::npos);
}

// Five sequences (prefill chunks and decodes) with logits on some rows.
ForwardBatch mixed_batch() {
  ForwardBatch b;
  b.max_blocks_per_seq = 4;
  const int32_t lens[] = {7, 1, 1, 12, 1}, starts[] = {0, 20, 5, 3, 40};
  const ForwardBatch::Logits want[] = {ForwardBatch::Logits::Last, ForwardBatch::Logits::Last,
                                       ForwardBatch::Logits::None, ForwardBatch::Logits::All,
                                       ForwardBatch::Logits::Last};
  for (int s = 0; s < 5; ++s) {
    std::vector<int32_t> ids(size_t(lens[s]), 3 + s), blocks = {s * 4, s * 4 + 1, s * 4 + 2, s * 4 + 3};
    b.add_sequence(ids.data(), lens[s], starts[s], blocks.data(), 4, 16, want[s]);
  }
  return b;
}

TEST(MicroBatches, SplitIntoWholeSequencesThatPutTheBatchBackTogether) {
  const ForwardBatch b = mixed_batch();
  for (int m : {1, 2, 3, 5, 9}) {
    std::vector<ForwardBatch> parts;
    split_micro_batches(b, m, parts);
    ASSERT_EQ(int(parts.size()), std::min(m, 5)) << m;
    ForwardBatch back;
    back.max_blocks_per_seq = b.max_blocks_per_seq;
    back.query_start.push_back(0);
    for (const ForwardBatch& p : parts) {
      ASSERT_GT(p.num_seqs(), 0);
      p.validate(64, 16);
      const int32_t row0 = int32_t(back.token_ids.size());
      back.token_ids.insert(back.token_ids.end(), p.token_ids.begin(), p.token_ids.end());
      back.positions.insert(back.positions.end(), p.positions.begin(), p.positions.end());
      back.slot_mapping.insert(back.slot_mapping.end(), p.slot_mapping.begin(), p.slot_mapping.end());
      for (int32_t s = 1; s <= p.num_seqs(); ++s) back.query_start.push_back(row0 + p.query_start[size_t(s)]);
      back.context_len.insert(back.context_len.end(), p.context_len.begin(), p.context_len.end());
      back.block_tables.insert(back.block_tables.end(), p.block_tables.begin(), p.block_tables.end());
      for (int32_t r : p.logits_indices) back.logits_indices.push_back(row0 + r);
    }
    EXPECT_EQ(back.token_ids, b.token_ids);
    EXPECT_EQ(back.positions, b.positions);
    EXPECT_EQ(back.slot_mapping, b.slot_mapping);
    EXPECT_EQ(back.query_start, b.query_start);
    EXPECT_EQ(back.context_len, b.context_len);
    EXPECT_EQ(back.block_tables, b.block_tables);
    EXPECT_EQ(back.logits_indices, b.logits_indices);
  }
  // Two micro-batches split the 22 tokens near the middle: sequences {0,1,2} (9) and {3,4} (13).
  std::vector<ForwardBatch> two;
  split_micro_batches(b, 2, two);
  EXPECT_EQ(two[0].num_seqs(), 3);
  EXPECT_EQ(two[1].num_seqs(), 2);
}

TEST(MicroBatches, PartsCarryAtLeastTheMinimumTokens) {
  const MicroBatchPolicy p{4, 64};
  EXPECT_EQ(p.parts(16), 1);    // a 16-sequence decode step stays whole
  EXPECT_EQ(p.parts(130), 2);
  EXPECT_EQ(p.parts(5000), 4);  // a long prefill: every part
  EXPECT_EQ((MicroBatchPolicy{3, 1}).parts(2), 2);
  EXPECT_EQ((MicroBatchPolicy{3, 1}).parts(40), 3);
}

TEST(MicroBatches, LogitsRowsOutOfOrderKeepOneBatch) {
  ForwardBatch b = mixed_batch();
  std::swap(b.logits_indices[0], b.logits_indices[1]);
  std::vector<ForwardBatch> parts;
  split_micro_batches(b, 4, parts);
  EXPECT_EQ(parts.size(), 1u);
}

// The ranks of pp stages × tp, in pipeline rank order, staged with the planned layer ranges.
std::vector<std::shared_ptr<const Qwen3Weights>> stage_pipeline(const std::string& dir, int pp, int tp,
                                                                std::vector<LayerRange>* ranges = nullptr) {
  auto ck = Checkpoint::open(dir);
  auto backend = make_cpu_backend(1, {}, MatmulPrecision::Highest);
  const std::vector<LayerRange> stages = plan_pipeline_stages(*ck, *backend, tp, pp, nullptr);
  if (ranges) *ranges = stages;
  std::vector<std::shared_ptr<const Qwen3Weights>> out;
  for (int r = 0; r < pp * tp; ++r) {
    StagingOptions so;
    so.tp_rank = r % tp;
    so.tp_size = tp;
    so.layer_begin = stages[size_t(r / tp)].begin;
    so.layer_end = stages[size_t(r / tp)].end;
    so.show_progress = false;
    out.push_back(std::make_shared<const Qwen3Weights>(stage_qwen3_weights(*ck, *backend, so)));
  }
  return out;
}

std::unique_ptr<TpModelRunner> make_pipeline_runner(const std::vector<std::shared_ptr<const Qwen3Weights>>& ranks,
                                                    int pp, int micro) {
  const int n = int(ranks.size()), tp = n / pp;
  std::vector<std::unique_ptr<Communicator>> world;
  if (pp > 1) world = make_shm_communicators(n);
  std::vector<TpRankParts> parts;
  for (int s = 0; s < pp; ++s) {
    std::vector<std::unique_ptr<Communicator>> comms;
    if (tp > 1) comms = make_shm_communicators(tp);
    for (int t = 0; t < tp; ++t) {
      const int r = s * tp + t;
      TpRankParts p;
      p.backend = make_cpu_backend(1, {}, MatmulPrecision::Highest);
      p.weights = ranks[size_t(r)];
      if (tp > 1) p.comm = std::move(comms[size_t(t)]);
      if (pp > 1) p.world = std::move(world[size_t(r)]);
      parts.push_back(std::move(p));
    }
  }
  return std::make_unique<TpModelRunner>(std::move(parts), 64, 16, DType::F32, "", pp, MicroBatchPolicy{micro, 1});
}

// One step: three new prompts of different lengths, each sampling its last row.
std::vector<float> step_logits(TpModelRunner& runner) {
  SchedulerOutput so;
  for (int q = 0; q < 3; ++q) {
    ScheduledRequest s;
    s.req_id = "r" + std::to_string(q);
    s.token_ids = random_prompt(5 + 9 * q, 100 + q);
    s.num_scheduled_tokens = int64_t(s.token_ids.size());
    s.is_new = true;
    s.samples = true;
    for (int b = 0; b < 2; ++b) s.block_ids.push_back(q * 2 + b);
    so.total_num_scheduled_tokens += s.num_scheduled_tokens;
    so.scheduled.push_back(s);
  }
  ExecutorOutput out;
  runner.execute(so, out);
  return out.logits;
}

TEST(Pipeline, StagesHoldOnlyTheirLayers) {
  const std::string dir = ensure_test_model("tiny", {.preset = "tiny"});
  std::vector<LayerRange> ranges;
  const auto ranks = stage_pipeline(dir, 2, 1, &ranges);
  const int L = ranks[0]->config.num_hidden_layers;
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].begin, 0);
  EXPECT_EQ(ranges[0].end, ranges[1].begin);
  EXPECT_EQ(ranges[1].end, L);
  EXPECT_TRUE(ranks[0]->has_embed && !ranks[0]->has_head);
  EXPECT_TRUE(!ranks[1]->has_embed && ranks[1]->has_head);
  EXPECT_EQ(int(ranks[0]->layers.size()), ranges[0].end);
  EXPECT_EQ(int(ranks[1]->layers.size()), L - ranges[1].begin);
  EXPECT_EQ(ranks[0]->final_norm, nullptr);  // the last stage's
  EXPECT_NE(ranks[1]->final_norm, nullptr);
  auto ck = Checkpoint::open(dir);
  auto backend = make_cpu_backend(1, {}, MatmulPrecision::Highest);
  const size_t whole = staged_slab_bytes(*ck, *backend, 0, 1);
  EXPECT_LT(ranks[0]->resident_bytes, whole);
  EXPECT_LT(ranks[1]->resident_bytes, whole);
}

TEST(Pipeline, CompileCacheKeysEachStageByItsLayerRange) {
  const std::string dir = ensure_test_model("tiny", {.preset = "tiny"});
  const std::filesystem::path cache = std::filesystem::temp_directory_path() / ("pypto_pp_cache_" + std::to_string(getpid()));
  auto ck = Checkpoint::open(dir);
  auto backend = make_cpu_backend(1);
  auto stage = [&](int b, int e) {
    StagingOptions so;
    so.show_progress = false;
    so.compile_cache_dir = cache.string();
    so.layer_begin = b;
    so.layer_end = e;
    return stage_qwen3_weights(*ck, *backend, so);
  };
  EXPECT_FALSE(stage(0, 1).from_compile_cache);
  EXPECT_FALSE(stage(1, 2).from_compile_cache) << "stage 1 must not read stage 0's slab";
  EXPECT_FALSE(stage(0, 2).from_compile_cache) << "the whole model must not read a stage's slab";
  const Qwen3Weights again = stage(1, 2);
  EXPECT_TRUE(again.from_compile_cache);
  EXPECT_EQ(again.layer_begin, 1);
  EXPECT_TRUE(again.has_head && !again.has_embed);
  std::filesystem::remove_all(cache);
}

void check_pipeline(int pp, int tp, int micro) {
  const std::string dir = ensure_test_model("tiny", {.preset = "tiny"});
  const auto one = stage_pipeline(dir, 1, 1);
  auto ref_runner = make_pipeline_runner(one, 1, 1);
  const std::vector<float> ref = step_logits(*ref_runner);
  const std::vector<int32_t> ref_greedy = tp_greedy(*ref_runner, random_prompt(9, 5), 6);

  const auto ranks = stage_pipeline(dir, pp, tp);
  auto runner = make_pipeline_runner(ranks, pp, micro);
  const std::vector<float> got = step_logits(*runner);
  ASSERT_EQ(got.size(), ref.size());
  const Diff d = compare(got.data(), ref.data(), ref.size());
  std::printf("[pp] pp %d tp %d, %d micro-batches: max|dlogit| %.3g (max|logit| %.3g)\n", pp, tp, micro, d.max_abs_diff,
              d.max_abs_ref);
  EXPECT_LE(d.max_abs_diff, 1e-5 * std::max(1.0, d.max_abs_ref));
  EXPECT_EQ(tp_greedy(*runner, random_prompt(9, 5), 6), ref_greedy);
}

TEST(Pipeline, TwoStagesGiveTheSingleRanksLogits) { check_pipeline(2, 1, 1); }
TEST(Pipeline, TwoStagesWithMicroBatchesGiveTheSingleRanksLogits) { check_pipeline(2, 1, 3); }
TEST(Pipeline, TwoStagesOfTwoTensorParallelRanksGiveTheSingleRanksLogits) { check_pipeline(2, 2, 2); }

}  // namespace
}  // namespace pypto::test
