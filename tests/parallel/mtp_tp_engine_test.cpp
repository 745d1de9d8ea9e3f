// The MTP drafter under --tp and --pp through the engine (parallel/replicas/mtp_tp_executor.h):
// on tiny-hybrid with random MTP weights (drafts that depend on the target's hidden states and on
// the head's own layer, unlike the oracle checkpoints, whose head reads the embedding only), the
// drafts proposed for every request at every step under tp 2, pp 2 (with micro-batches, so the
// last stage writes the hidden rows of each micro-batch at its offset) and pp 2 × tp 2 are the
// drafts of one rank (MtpExecutor), token for token, and the output is the output without
// speculation; several requests, chunked prefill and verify steps mixed. And under
// --pp-virtual-engines: each engine's drafts are one rank's for its requests.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/mtp_executor.h"
#include "io/checkpoint.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "parallel/replicas/mtp_tp_executor.h"
#include "parallel/replicas/mtp_virtual_engines.h"
#include "parallel/replicas/step_pipeline.h"
#include "parallel/shm_communicator.h"
#include "drafter_engine_run.h"

namespace pypto {
namespace {

using namespace test;
constexpr int32_t kBlockSize = 16, kMaxSeqs = 4, kK = 2, kBlocks = 128;

const std::string& model_dir() {
  static const std::string dir = [] {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    o.mtp = "random";
    return test::ensure_test_model("tiny-hybrid-mtp", o);
  }();
  return dir;
}

DrafterRun drafter_run() {
  DrafterRun run;
  run.method = SpeculativeMethod::Mtp;
  run.max_seqs = kMaxSeqs;
  run.blocks = kBlocks;
  run.recurrent_state = true;
  run.max_tokens = 12;
  return run;
}

Qwen3Weights stage(const Checkpoint& ck, int tp_rank, int tp, int layer_begin, int layer_end, bool mtp,
                   int engines = 1) {
  auto stager = make_cpu_backend(1);
  StagingOptions so = rank_staging(tp_rank, tp, layer_begin, layer_end);
  so.mtp = mtp;
  Qwen3Weights w = stage_qwen3_weights(ck, *stager, so);
  w.state_slots = kMaxSeqs * engines;  // --pp-virtual-engines: every engine's slots
  w.state_rollback = kK;
  return w;
}

// The ranks of a threaded pipeline: pp stages of tp ranks over the target's layers (an equal
// split), the last stage with the MTP head; `engines` as stage() takes it.
std::vector<TpRankParts> pipeline_parts(const Checkpoint& ck, int tp, int pp, int engines = 1) {
  return test::pipeline_parts(tp, pp, ck.config().num_hidden_layers, [&](int t, int begin, int end, bool last) {
    return stage(ck, t, tp, begin, end, /*mtp=*/last, engines);
  });
}

// tp × pp thread ranks (pp 0: the one-rank MtpExecutor; k 0: no speculation, one rank).
Outcome run_engine(int tp, int pp, int k, uint64_t seed = 40) {
  auto ck = Checkpoint::open(model_dir());
  std::vector<std::shared_ptr<const Qwen3Weights>> keep;
  std::unique_ptr<ModelExecutor> exec;
  std::shared_ptr<MtpProposer> mtp;
  std::unique_ptr<Backend> one_backend;
  std::unique_ptr<Qwen3Model> one_model;
  std::unique_ptr<KvCache> one_cache;
  if (pp == 0) {
    keep.push_back(std::make_shared<const Qwen3Weights>(stage(*ck, 0, 1, 0, -1, true)));
    one_backend = make_cpu_backend(1);
    one_model = std::make_unique<Qwen3Model>(*keep[0], *one_backend);
    one_cache = std::make_unique<KvCache>(one_model->kv_cache_spec(kBlocks, kBlockSize, DType::BF16));
    if (k > 0) {
      mtp = std::make_shared<MtpProposer>(*keep[0], *one_backend, kBlocks + 32, kBlockSize, DType::BF16);
      exec = std::make_unique<MtpExecutor>(*one_model, *one_cache, mtp);
    } else {
      exec = std::make_unique<ModelRunner>(*one_model, *one_cache);
    }
  } else {
    auto runner = std::make_unique<TpModelRunner>(pipeline_parts(*ck, tp, pp), kBlocks, kBlockSize, DType::BF16, "", pp,
                                                  MicroBatchPolicy{4, 1});  // micro-batches of any size
    auto e = std::make_unique<MtpTpExecutor>(std::move(runner), kBlocks + 32, kBlockSize, DType::BF16);
    mtp = e->mtp_proposer();
    exec = std::move(e);
  }
  return run_requests(drafter_run(), k, ck->config().vocab_size, std::move(exec), mtp, seed);
}

// --pp-virtual-engines (parallel/replicas/mtp_virtual_engines.h): two engines over one threaded
// pipeline of 2 stages × tp, each with its own requests (prompts from seeds[g]) and drafter,
// stepped in turn so both engines' requests hold MTP KV blocks at once.
std::vector<Outcome> run_virtual_engines(int tp, const uint64_t seeds[2]) {
  constexpr int kPp = 2, kMtpBlocks = kBlocks + 32;
  auto ck = Checkpoint::open(model_dir());
  auto pipeline = make_threaded_step_pipeline(pipeline_parts(*ck, tp, kPp, /*engines=*/kPp), kPp, kPp * kBlocks,
                                              kBlockSize, DType::BF16, "", kPp * kMtpBlocks);
  return test::run_virtual_engines(drafter_run(), kK, ck->config().vocab_size, kPp, seeds,
                                   [&](int g, std::shared_ptr<DraftProposer>* drafter) {
                                     VirtualEngineShare share;
                                     share.block_offset = g * kBlocks;
                                     share.state_slots = kMaxSeqs;
                                     share.state_slot_offset = g * kMaxSeqs;
                                     return make_mtp_virtual_engine_executor(pipeline, share, kBlockSize, ck->config(),
                                                                             g, kMtpBlocks, drafter);
                                   });
}

TEST(MtpTpEngine, DraftsUnderTpAndPpAreThoseOfOneRank) {
  const Outcome plain = run_engine(1, 0, 0);
  const Outcome one = run_engine(1, 0, kK);
  ASSERT_EQ(plain.tokens.size(), 3u);
  EXPECT_EQ(one.tokens, plain.tokens);
  size_t drafted = 0;
  for (const auto& [id, d] : one.drafts) drafted += size_t(std::count_if(d.begin(), d.end(), [](int32_t x) { return x >= 0; }));
  ASSERT_GT(drafted, 10u) << "too few drafts to compare";
  for (auto [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    const Outcome got = run_engine(tp, pp, kK);
    EXPECT_EQ(got.tokens, plain.tokens) << "tp " << tp << " pp " << pp;
    EXPECT_EQ(got.drafts, one.drafts) << "tp " << tp << " pp " << pp;
  }
}

// Each virtual engine's drafts are those of one rank running its requests alone: the engines'
// MTP contexts live in their own stretches of the last stage's pool (it fails when every engine
// uses block ids from 0: the other engine's rows overwrite them), and the passes and hidden rows
// travel the pipeline between the steps.
TEST(MtpTpEngine, DraftsUnderVirtualEnginesAreThoseOfOneRank) {
  const uint64_t seeds[2] = {40, 70};
  Outcome one[2], plain[2];
  for (int g = 0; g < 2; ++g) {
    plain[g] = run_engine(1, 0, 0, seeds[g]);
    one[g] = run_engine(1, 0, kK, seeds[g]);
    EXPECT_EQ(one[g].tokens, plain[g].tokens);
  }
  for (int tp : {1, 2}) {
    const std::vector<Outcome> got = run_virtual_engines(tp, seeds);
    for (int g = 0; g < 2; ++g) {
      EXPECT_EQ(got[size_t(g)].tokens, plain[g].tokens) << "tp " << tp << " engine " << g;
      EXPECT_EQ(got[size_t(g)].drafts, one[g].drafts) << "tp " << tp << " engine " << g;
    }
  }
}

}  // namespace
}  // namespace pypto
