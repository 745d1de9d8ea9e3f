#pragma once
// The drafter-under---tp/--pp engine tests' shared run (eagle3_tp_engine_test, mtp_tp_engine_test):
// a drafter wrapper that records what the scheduler got, the ranks of a threaded pipeline, the
// engine config with chunked prefill beside decodes and verifies, three greedy requests, and the
// loops that step one engine, or the virtual engines of one pipeline in turn, to the end. What
// differs between the drafters (method, head dir, max_tokens, blocks, recurrent state, how a
// rank's weights are staged, the executors) is passed in.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/mtp_proposer.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "parallel/replicas/tp_model_runner.h"
#include "parallel/shm_communicator.h"

namespace pypto::test {

using Ids = std::vector<int32_t>;

// Records what the scheduler got from the drafter: per request, the drafts of every step.
class RecordingDrafter final : public DraftProposer {
 public:
  explicit RecordingDrafter(std::shared_ptr<MtpProposer> d) : d_(std::move(d)) {}
  void propose(std::span<const int32_t> t, int32_t k, std::vector<int32_t>& out) const override { d_->propose(t, k, out); }
  void prepare(std::span<const Query> q) override { d_->prepare(q); }
  void prefill(std::span<const Chunk> c) override { d_->prefill(c); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    d_->propose_for(req, k, out);
    Ids& r = drafts[req.request_id];
    r.insert(r.end(), out.begin(), out.end());
    r.push_back(-1);  // step separator
  }
  void forget(const std::string& id) override { d_->forget(id); }
  void set_context_needed(bool n) override { d_->set_context_needed(n); }
  const DraftDistribution* distribution(const std::string& id) const override { return d_->distribution(id); }
  std::map<std::string, Ids> drafts;

 private:
  std::shared_ptr<MtpProposer> d_;
};

// Staging options of tp rank `tp_rank` of `tp` holding layers [layer_begin, layer_end) (-1: to the
// last), without the progress bar.
inline StagingOptions rank_staging(int tp_rank, int tp, int layer_begin, int layer_end) {
  StagingOptions so;
  so.tp_rank = tp_rank;
  so.tp_size = tp;
  so.layer_begin = layer_begin;
  so.layer_end = layer_end;
  so.show_progress = false;
  return so;
}

// The weights of one rank: tp rank, layers [begin, end), whether it is on the last stage.
using StageWeights = std::function<Qwen3Weights(int tp_rank, int layer_begin, int layer_end, bool last_stage)>;

// pp stages of tp ranks over `layers` (an equal split), each rank on its own one-thread backend.
inline std::vector<TpRankParts> pipeline_parts(int tp, int pp, int layers, const StageWeights& stage) {
  std::vector<TpRankParts> parts;
  std::vector<std::unique_ptr<Communicator>> world;
  if (pp > 1) world = make_shm_communicators(pp * tp);
  for (int s = 0; s < pp; ++s) {
    std::vector<std::unique_ptr<Communicator>> comms;
    if (tp > 1) comms = make_shm_communicators(tp);
    for (int t = 0; t < tp; ++t) {
      TpRankParts p;
      p.backend = make_cpu_backend(1);
      p.weights = std::make_shared<const Qwen3Weights>(stage(t, s * layers / pp, (s + 1) * layers / pp, s == pp - 1));
      if (tp > 1) p.comm = std::move(comms[size_t(t)]);
      if (pp > 1) p.world = std::move(world[size_t(s * tp + t)]);
      parts.push_back(std::move(p));
    }
  }
  return parts;
}

// What an engine run gave: per request, the output tokens and the drafts of every step.
struct Outcome {
  std::map<std::string, Ids> tokens, drafts;
  SpecDecodeStats stats;
};

// What differs between the drafters' engine runs.
struct DrafterRun {
  SpeculativeMethod method = SpeculativeMethod::Mtp;
  std::string draft_model;  // the head's dir ("" where the target holds it)
  int32_t max_seqs = 4, block_size = 16, blocks = 128;
  bool recurrent_state = false;  // the target has GDN layers
  int32_t max_tokens = 12;       // of each request
};

// k 0: no speculation.
inline EngineConfig engine_config(const DrafterRun& run, int k, int64_t vocab_size) {
  EngineConfig c;
  c.scheduler.max_num_seqs = run.max_seqs;
  c.scheduler.max_num_batched_tokens = 24;  // chunked prefill beside decodes and verifies
  c.scheduler.long_prefill_token_threshold = 16;
  c.scheduler.max_model_len = 256;
  c.cache.block_size = run.block_size;
  c.cache.num_blocks = run.blocks;
  c.cache.recurrent_state = run.recurrent_state;
  c.vocab_size = vocab_size;
  if (k > 0) {
    c.scheduler.speculative.method = run.method;
    c.scheduler.speculative.draft_model = run.draft_model;
    c.scheduler.speculative.num_speculative_tokens = k;
    c.scheduler.speculative.cost_model = false;
  }
  return c;
}

// Three greedy requests of `max_tokens`; `seed` picks their prompts.
inline void add_requests(Engine& engine, uint64_t seed, int32_t max_tokens) {
  for (int i = 0; i < 3; ++i) {
    EngineRequest r;
    r.request_id = "r" + std::to_string(i);
    r.prompt_token_ids = random_prompt(9 + 13 * i, seed + uint64_t(i));
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    engine.add_request(r);
  }
}

// One step of `engine` (if it has work) into `out`.
inline void step_into(Engine& engine, Outcome& out) {
  if (!engine.has_unfinished_requests()) return;
  for (const RequestOutput& o : engine.step()) {
    EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
    Ids& t = out.tokens[o.request_id];
    t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }
}

// The three requests (prompts from `seed`) through one engine over `exec` to the end; `drafter`
// (null for k 0) is recorded.
inline Outcome run_requests(const DrafterRun& run, int k, int64_t vocab_size, std::unique_ptr<ModelExecutor> exec,
                            std::shared_ptr<MtpProposer> drafter, uint64_t seed) {
  EngineConfig c = engine_config(run, k, vocab_size);
  std::shared_ptr<RecordingDrafter> rec;
  if (k > 0) {
    rec = std::make_shared<RecordingDrafter>(std::move(drafter));
    c.drafter = rec;
  }
  Outcome out;
  {
    Engine engine(c, std::move(exec));
    add_requests(engine, seed, run.max_tokens);
    for (int step = 0; step < 1000 && engine.has_unfinished_requests(); ++step) step_into(engine, out);
    out.stats = engine.scheduler().spec_decode_stats();
  }
  if (rec) out.drafts = rec->drafts;
  return out;
}

// The executor of virtual engine g of a pipeline, and its drafter into *drafter.
using VirtualEngineExecutor = std::function<std::unique_ptr<ModelExecutor>(int g, std::shared_ptr<DraftProposer>* drafter)>;

// --pp-virtual-engines: `engines` engines over one pipeline (their executors from `make`), each
// with its own requests (prompts from seeds[g]) and drafter, stepped in turn so every engine has
// steps and drafter passes in the pipeline at once.
inline std::vector<Outcome> run_virtual_engines(const DrafterRun& run, int k, int64_t vocab_size, int engines_n,
                                                const uint64_t* seeds, const VirtualEngineExecutor& make) {
  std::vector<std::unique_ptr<Engine>> engines;
  std::vector<std::shared_ptr<RecordingDrafter>> recs;
  for (int g = 0; g < engines_n; ++g) {
    EngineConfig c = engine_config(run, k, vocab_size);
    std::shared_ptr<DraftProposer> drafter;
    auto exec = make(g, &drafter);
    recs.push_back(std::make_shared<RecordingDrafter>(std::dynamic_pointer_cast<MtpProposer>(drafter)));
    c.drafter = recs.back();
    engines.push_back(std::make_unique<Engine>(c, std::move(exec)));
    add_requests(*engines.back(), seeds[g], run.max_tokens);
  }
  auto any_unfinished = [&] {
    for (const auto& e : engines)
      if (e->has_unfinished_requests()) return true;
    return false;
  };
  std::vector<Outcome> out(static_cast<size_t>(engines_n));
  for (int step = 0; step < 1000 && any_unfinished(); ++step)
    for (int g = 0; g < engines_n; ++g) step_into(*engines[size_t(g)], out[size_t(g)]);
  for (int g = 0; g < engines_n; ++g) {
    out[size_t(g)].drafts = recs[size_t(g)]->drafts;
    out[size_t(g)].stats = engines[size_t(g)]->scheduler().spec_decode_stats();
  }
  return out;  // the engines go here, before the caller's pipeline (the drafters hold it too)
}

}  // namespace pypto::test
