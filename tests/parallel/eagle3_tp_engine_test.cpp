// The EAGLE-3 drafter under --tp and --pp (thread ranks) through the engine
// (parallel/replicas/eagle3_tp_executor.h), on the tiny dense target cut to 4 layers with heads
// from make-test-model --eagle3 (with pp 2 the stages hold layers 0-1 and 2-3; the random head's
// aux layers 0, 2, 3 and the oracle's 2, 2, 1 sit on both, so a row's three aux states are
// written by both stages):
//  - "oracle" (fc zero; it reads the target's embedding, vocab-parallel under tp 2): every greedy
//    draft is accepted under tp 2, pp 2 (micro-batches) and pp 2 × tp 2, and the output is the
//    output without speculation;
//  - "random" (its fused state is fc over the three aux states): the drafts proposed for every
//    request at every step, and the accepted count, are those of one rank (Eagle3Executor) token
//    for token, and the output is unchanged despite the rejections. Aux rows from the wrong layer,
//    stage or row offset change the drafts.
// Several requests, chunked prefill and verify steps mixed. And under --pp-virtual-engines
// (parallel/replicas/eagle3_virtual_engines.h: the aux rows travel the step pipeline back to rank
// 0): each engine's drafts are one rank's for its requests, the oracle's all accepted.
#include <gtest/gtest.h>

#include <map>

#include "engine/eagle3_executor.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "io/checkpoint.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "parallel/replicas/eagle3_tp_executor.h"
#include "parallel/replicas/eagle3_virtual_engines.h"
#include "parallel/replicas/step_pipeline.h"
#include "parallel/shm_communicator.h"
#include "drafter_engine_run.h"

namespace pypto {
namespace {

using namespace test;
constexpr int32_t kBlockSize = 16, kBlocks = 128, kHeadBlocks = kBlocks + 32;

// The tiny target (4 layers) with a head of `kind` in DIR/eagle3.
const std::string& model_dir(const std::string& kind) {
  static std::map<std::string, std::string> dirs;
  std::string& dir = dirs[kind];
  if (dir.empty()) {
    TestModelOptions o;
    o.preset = "tiny";
    o.layers = 4;
    o.eagle3 = kind;
    dir = test::ensure_test_model("tiny-eagle3-" + kind, o);
  }
  return dir;
}

DrafterRun drafter_run(const std::string& dir) {
  DrafterRun run;
  run.method = SpeculativeMethod::Eagle3;
  run.draft_model = dir + "/eagle3";
  run.blocks = kBlocks;
  run.max_tokens = 14;
  return run;
}

Qwen3Weights stage(const Checkpoint& ck, int tp_rank, int tp, int layer_begin, int layer_end) {
  auto stager = make_cpu_backend(1);
  return stage_qwen3_weights(ck, *stager, rank_staging(tp_rank, tp, layer_begin, layer_end));
}

// pp stages of tp ranks over the target's layers (an equal split).
std::vector<TpRankParts> pipeline_parts(const Checkpoint& ck, int tp, int pp) {
  return test::pipeline_parts(tp, pp, ck.config().num_hidden_layers,
                              [&](int t, int begin, int end, bool) { return stage(ck, t, tp, begin, end); });
}

std::shared_ptr<const Eagle3Weights> head_weights(const std::string& dir, const Checkpoint& ck) {
  auto packer = make_cpu_backend(1);
  return load_eagle3_weights(read_eagle3_config(dir + "/eagle3"), ck.config(), *packer);
}

// tp × pp thread ranks (pp 0: one rank, Eagle3Executor; k 0: no speculation, one rank). The head's
// KV is F32: the oracle's attention passes the normed embedding through exactly.
Outcome run_engine(const std::string& kind, int tp, int pp, int k, uint64_t seed = 40) {
  const std::string dir = model_dir(kind);
  auto ck = Checkpoint::open(dir);
  std::shared_ptr<const Eagle3Weights> head_w = head_weights(dir, *ck);
  std::shared_ptr<const Qwen3Weights> one_weights;
  std::unique_ptr<Backend> one_backend;
  std::unique_ptr<Qwen3Model> one_model;
  std::unique_ptr<KvCache> one_cache;
  std::shared_ptr<Eagle3Head> one_head;
  std::shared_ptr<KvCache> one_head_cache;
  std::unique_ptr<ModelExecutor> exec;
  std::shared_ptr<MtpProposer> drafter;
  if (pp == 0) {
    one_weights = std::make_shared<const Qwen3Weights>(stage(*ck, 0, 1, 0, -1));
    one_backend = make_cpu_backend(1);
    one_model = std::make_unique<Qwen3Model>(*one_weights, *one_backend);
    one_cache = std::make_unique<KvCache>(one_model->kv_cache_spec(kBlocks, kBlockSize, DType::BF16));
    if (k > 0) {
      one_head = std::make_shared<Eagle3Head>(head_w, *one_weights, *one_backend);
      one_head_cache = std::make_shared<KvCache>(one_head->kv_cache_spec(kHeadBlocks, kBlockSize, DType::F32));
      drafter = make_eagle3_proposer(one_weights->config, *one_head, *one_head_cache);
      exec = std::make_unique<Eagle3Executor>(*one_model, *one_cache, *one_head, drafter);
    } else {
      exec = std::make_unique<ModelRunner>(*one_model, *one_cache);
    }
  } else {
    auto runner = std::make_unique<TpModelRunner>(pipeline_parts(*ck, tp, pp), kBlocks, kBlockSize, DType::BF16,
                                                  "", pp, MicroBatchPolicy{4, 1});  // micro-batches of any size
    auto e = std::make_unique<Eagle3TpExecutor>(std::move(runner), head_w, kHeadBlocks, kBlockSize, DType::F32);
    drafter = e->proposer();
    exec = std::move(e);
  }
  return run_requests(drafter_run(dir), k, ck->config().vocab_size, std::move(exec), drafter, seed);
}

// --pp-virtual-engines: two engines over one threaded pipeline of 2 stages × tp, each with its own
// requests (prompts from seeds[g]), drafter and head KV, stepped in turn so both have steps and
// drafter passes in the pipeline.
std::vector<Outcome> run_virtual_engines(const std::string& kind, int tp, const uint64_t seeds[2]) {
  constexpr int kPp = 2;
  const std::string dir = model_dir(kind);
  auto ck = Checkpoint::open(dir);
  std::shared_ptr<const Eagle3Weights> head_w = head_weights(dir, *ck);
  auto pipeline = make_threaded_step_pipeline(pipeline_parts(*ck, tp, kPp), kPp,
                                              kPp * kBlocks, kBlockSize, DType::BF16, "", 0, head_w->aux_layers);
  return test::run_virtual_engines(drafter_run(dir), 2, ck->config().vocab_size, kPp, seeds,
                                   [&](int g, std::shared_ptr<DraftProposer>* drafter) {
                                     VirtualEngineShare share;
                                     share.block_offset = g * kBlocks;
                                     return make_eagle3_virtual_engine_executor(pipeline, share, head_w, kHeadBlocks,
                                                                                kBlockSize, DType::F32, drafter);
                                   });
}

const std::pair<int, int> kLayouts[] = {{2, 1}, {1, 2}, {2, 2}};  // (tp, pp)

TEST(Eagle3TpEngine, OracleDraftsAreAllAcceptedUnderTpAndPp) {
  const Outcome plain = run_engine("oracle", 1, 0, 0);
  ASSERT_EQ(plain.tokens.size(), 3u);
  for (auto [tp, pp] : kLayouts) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
    const Outcome got = run_engine("oracle", tp, pp, 3);
    EXPECT_EQ(got.tokens, plain.tokens);
    EXPECT_GT(got.stats.num_draft_tokens, 10);
    EXPECT_EQ(got.stats.num_accepted_tokens, got.stats.num_draft_tokens) << "an oracle draft was rejected";
  }
}

TEST(Eagle3TpEngine, RandomHeadDraftsUnderTpAndPpAreThoseOfOneRank) {
  const Outcome plain = run_engine("random", 1, 0, 0);
  const Outcome one = run_engine("random", 1, 0, 2);
  ASSERT_EQ(plain.tokens.size(), 3u);
  EXPECT_EQ(one.tokens, plain.tokens);
  ASSERT_GT(one.stats.num_draft_tokens, 10) << "too few drafts to compare";
  EXPECT_LT(one.stats.num_accepted_tokens, one.stats.num_draft_tokens) << "a random head accepted every draft";
  for (auto [tp, pp] : kLayouts) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
    const Outcome got = run_engine("random", tp, pp, 2);
    EXPECT_EQ(got.tokens, plain.tokens);
    EXPECT_EQ(got.drafts, one.drafts);
    EXPECT_EQ(got.stats.num_draft_tokens, one.stats.num_draft_tokens);
    EXPECT_EQ(got.stats.num_accepted_tokens, one.stats.num_accepted_tokens);
  }
}

// Each virtual engine's drafts (random head; tp 1 and 2, the head has its own embed_tokens) are
// those of one rank running its requests alone, and the oracle (tp 1: it reads stage 0's
// embedding) has every draft accepted: the aux rows of each step come back along the stages.
TEST(Eagle3TpEngine, DraftsUnderVirtualEnginesAreThoseOfOneRank) {
  const uint64_t seeds[2] = {40, 70};
  for (const std::string kind : {"random", "oracle"}) {
    Outcome one[2], plain[2];
    for (int g = 0; g < 2; ++g) {
      plain[g] = run_engine(kind, 1, 0, 0, seeds[g]);
      one[g] = run_engine(kind, 1, 0, 2, seeds[g]);
      EXPECT_EQ(one[g].tokens, plain[g].tokens) << kind;
    }
    for (int tp : {1, 2}) {
      if (kind == "oracle" && tp > 1) continue;  // refused (check_eagle3_virtual_engines)
      const std::vector<Outcome> got = run_virtual_engines(kind, tp, seeds);
      for (int g = 0; g < 2; ++g) {
        SCOPED_TRACE(kind + " tp " + std::to_string(tp) + " engine " + std::to_string(g));
        EXPECT_EQ(got[size_t(g)].tokens, plain[g].tokens);
        EXPECT_EQ(got[size_t(g)].drafts, one[g].drafts);
        EXPECT_GT(got[size_t(g)].stats.num_draft_tokens, 10);
        EXPECT_EQ(got[size_t(g)].stats.num_accepted_tokens, one[g].stats.num_accepted_tokens);
        if (kind == "oracle")
          EXPECT_EQ(got[size_t(g)].stats.num_accepted_tokens, got[size_t(g)].stats.num_draft_tokens);
      }
    }
  }
}

}  // namespace
}  // namespace pypto
