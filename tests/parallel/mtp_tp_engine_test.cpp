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

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16, kMaxSeqs = 4, kK = 2, kBlocks = 128;

// Records what the scheduler got from the drafter: per request, the drafts of every step.
class RecordingDrafter final : public DraftProposer {
 public:
  explicit RecordingDrafter(std::shared_ptr<MtpProposer> mtp) : mtp_(std::move(mtp)) {}
  void propose(std::span<const int32_t> t, int32_t k, std::vector<int32_t>& out) const override { mtp_->propose(t, k, out); }
  void prepare(std::span<const Query> q) override { mtp_->prepare(q); }
  void prefill(std::span<const Chunk> c) override { mtp_->prefill(c); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    mtp_->propose_for(req, k, out);
    Ids& r = drafts[req.request_id];
    r.insert(r.end(), out.begin(), out.end());
    r.push_back(-1);  // step separator
  }
  void forget(const std::string& id) override { mtp_->forget(id); }
  void set_context_needed(bool n) override { mtp_->set_context_needed(n); }
  const DraftDistribution* distribution(const std::string& id) const override { return mtp_->distribution(id); }
  std::map<std::string, Ids> drafts;

 private:
  std::shared_ptr<MtpProposer> mtp_;
};

const std::string& model_dir() {
  static const std::string dir = [] {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    o.mtp = "random";
    return test::ensure_test_model("tiny-hybrid-mtp", o);
  }();
  return dir;
}

Qwen3Weights stage(const Checkpoint& ck, int tp_rank, int tp, int layer_begin, int layer_end, bool mtp,
                   int engines = 1) {
  auto stager = make_cpu_backend(1);
  StagingOptions so;
  so.tp_rank = tp_rank;
  so.tp_size = tp;
  so.layer_begin = layer_begin;
  so.layer_end = layer_end;
  so.show_progress = false;
  so.mtp = mtp;
  Qwen3Weights w = stage_qwen3_weights(ck, *stager, so);
  w.state_slots = kMaxSeqs * engines;  // --pp-virtual-engines: every engine's slots
  w.state_rollback = kK;
  return w;
}

// The ranks of a threaded pipeline: pp stages of tp ranks over `layers` (an equal split), the last
// stage with the MTP head, each rank on its own one-thread backend; `engines` as stage() takes it.
std::vector<TpRankParts> pipeline_parts(const Checkpoint& ck, int tp, int pp, int layers, int engines = 1) {
  std::vector<TpRankParts> parts;
  std::vector<std::unique_ptr<Communicator>> world;
  if (pp > 1) world = make_shm_communicators(pp * tp);
  for (int s = 0; s < pp; ++s) {
    std::vector<std::unique_ptr<Communicator>> comms;
    if (tp > 1) comms = make_shm_communicators(tp);
    for (int t = 0; t < tp; ++t) {
      TpRankParts p;
      p.backend = make_cpu_backend(1);
      p.weights = std::make_shared<const Qwen3Weights>(
          stage(ck, t, tp, s * layers / pp, (s + 1) * layers / pp, /*mtp=*/s == pp - 1, engines));
      if (tp > 1) p.comm = std::move(comms[size_t(t)]);
      if (pp > 1) p.world = std::move(world[size_t(s * tp + t)]);
      parts.push_back(std::move(p));
    }
  }
  return parts;
}

struct Outcome {
  std::map<std::string, Ids> tokens, drafts;
};

EngineConfig engine_config(int k, int64_t vocab_size, int32_t blocks) {
  EngineConfig c;
  c.scheduler.max_num_seqs = kMaxSeqs;
  c.scheduler.max_num_batched_tokens = 24;  // chunked prefill beside decodes and verifies
  c.scheduler.long_prefill_token_threshold = 16;
  c.scheduler.max_model_len = 256;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = blocks;
  c.cache.recurrent_state = true;
  c.vocab_size = vocab_size;
  if (k > 0) {
    c.scheduler.speculative.method = SpeculativeMethod::Mtp;
    c.scheduler.speculative.num_speculative_tokens = k;
    c.scheduler.speculative.cost_model = false;
  }
  return c;
}

// Three greedy requests; `seed` picks their prompts.
void add_requests(Engine& engine, uint64_t seed) {
  for (int i = 0; i < 3; ++i) {
    EngineRequest r;
    r.request_id = "r" + std::to_string(i);
    r.prompt_token_ids = test::random_prompt(9 + 13 * i, seed + uint64_t(i));
    r.params.temperature = 0.0f;
    r.params.max_tokens = 12;
    r.params.ignore_eos = true;
    engine.add_request(r);
  }
}

// One step of `engine` (if it has work) into `out`.
void step_into(Engine& engine, Outcome& out) {
  if (!engine.has_unfinished_requests()) return;
  for (const RequestOutput& o : engine.step()) {
    EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
    Ids& t = out.tokens[o.request_id];
    t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }
}

// tp × pp thread ranks (pp 0: the one-rank MtpExecutor; k 0: no speculation, one rank).
Outcome run_engine(int tp, int pp, int k, uint64_t seed = 40) {
  auto ck = Checkpoint::open(model_dir());
  const int layers = ck->config().num_hidden_layers;
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
    auto runner = std::make_unique<TpModelRunner>(pipeline_parts(*ck, tp, pp, layers), kBlocks, kBlockSize, DType::BF16, "", pp,
                                                  MicroBatchPolicy{4, 1});  // micro-batches of any size
    auto e = std::make_unique<MtpTpExecutor>(std::move(runner), kBlocks + 32, kBlockSize, DType::BF16);
    mtp = e->mtp_proposer();
    exec = std::move(e);
  }
  EngineConfig c = engine_config(k, ck->config().vocab_size, kBlocks);
  std::shared_ptr<RecordingDrafter> rec;
  if (k > 0) {
    rec = std::make_shared<RecordingDrafter>(mtp);
    c.drafter = rec;
  }
  Engine engine(c, std::move(exec));
  add_requests(engine, seed);
  Outcome out;
  for (int step = 0; step < 1000 && engine.has_unfinished_requests(); ++step) step_into(engine, out);
  if (rec) out.drafts = rec->drafts;
  return out;
}

// --pp-virtual-engines (parallel/replicas/mtp_virtual_engines.h): two engines over one threaded
// pipeline of 2 stages × tp, each with its own requests (prompts from seeds[g]) and drafter,
// stepped in turn so both engines' requests hold MTP KV blocks at once.
std::vector<Outcome> run_virtual_engines(int tp, const uint64_t seeds[2]) {
  constexpr int kPp = 2, kMtpBlocks = kBlocks + 32;
  auto ck = Checkpoint::open(model_dir());
  const int layers = ck->config().num_hidden_layers;
  std::vector<TpRankParts> parts = pipeline_parts(*ck, tp, kPp, layers, /*engines=*/kPp);
  auto pipeline = make_threaded_step_pipeline(std::move(parts), kPp, kPp * kBlocks, kBlockSize, DType::BF16, "",
                                              kPp * kMtpBlocks);
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::shared_ptr<RecordingDrafter>> recs;
  for (int g = 0; g < kPp; ++g) {
    VirtualEngineShare share;
    share.block_offset = g * kBlocks;
    share.state_slots = kMaxSeqs;
    share.state_slot_offset = g * kMaxSeqs;
    EngineConfig c = engine_config(kK, ck->config().vocab_size, kBlocks);
    std::shared_ptr<DraftProposer> drafter;
    auto exec = make_mtp_virtual_engine_executor(pipeline, share, kBlockSize, ck->config(), g, kMtpBlocks, &drafter);
    recs.push_back(std::make_shared<RecordingDrafter>(std::dynamic_pointer_cast<MtpProposer>(drafter)));
    c.drafter = recs.back();
    engines.push_back(std::make_unique<Engine>(c, std::move(exec)));
    add_requests(*engines.back(), seeds[g]);
  }
  std::vector<Outcome> out(kPp);
  for (int step = 0; step < 1000 && (engines[0]->has_unfinished_requests() || engines[1]->has_unfinished_requests());
       ++step)
    for (int g = 0; g < kPp; ++g) step_into(*engines[size_t(g)], out[size_t(g)]);
  for (int g = 0; g < kPp; ++g) out[size_t(g)].drafts = recs[size_t(g)]->drafts;
  engines.clear();  // before the pipeline (the drafters hold it too)
  return out;
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
