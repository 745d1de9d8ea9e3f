// The one start-up path: load_engine is load_replicas at one rank and one replica, so the engine
// benchmarks and tests measure the engine the server runs (sampling on the kernel pool), and the
// memory check before staging says what is needed, what is available and what would fit.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/memory.h"
#include "engine/mtp_proposer.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "parallel/replicas/load_replicas.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {
namespace {

std::string tiny_dir() { return test::ensure_test_model("tiny", {.preset = "tiny"}); }

TEST(StartUp, LoadEngineIsLoadReplicasAtOneRank) {
  EngineLoadOptions o;
  o.model_dir = tiny_dir();
  o.kv_cache_memory = 8 << 20;
  o.threads = 2;
  o.show_progress = false;
  o.scheduler.max_model_len = 128;
  LoadedEngine le = load_engine(o);
  // What only load_replicas sets: the router over the replicas and the placement line.
  ASSERT_NE(le.replicas, nullptr);
  EXPECT_EQ(le.tp, 1);
  EXPECT_EQ(le.dp, 1);
  EXPECT_EQ(le.placement, "replica 0: rank 0 device 0 cores any");
  EXPECT_EQ(le.threads, 2);
  // And it serves: a greedy request runs to its length.
  EngineRequest req;
  req.request_id = "r";
  req.prompt_token_ids = {1, 2, 3, 4};
  req.params.max_tokens = 3;
  req.params.ignore_eos = true;
  auto stream = le.loop->add_request(req);
  int64_t tokens = 0;
  while (auto out = stream->next()) tokens += int64_t(out->new_token_ids.size());
  EXPECT_EQ(tokens, 3);
  le.loop->shutdown();
}

// The executor load_replicas builds for a rank (TpModelRunner) runs the sampler's rows on its
// backend's pool. Deterministic: every row waits until two different threads have entered, which
// only a pool of >= 2 threads can satisfy (one thread running the rows in turn times out).
TEST(StartUp, TheReplicaExecutorSamplesOnTheKernelPool) {
  auto ck = Checkpoint::open(tiny_dir());
  auto stager = make_cpu_backend(2);
  TpRankParts p;
  p.backend = make_cpu_backend(2);
  p.weights = std::make_shared<const Qwen3Weights>(stage_qwen3_weights(*ck, *stager, {.show_progress = false}));
  std::vector<TpRankParts> parts;
  parts.push_back(std::move(p));
  TpModelRunner runner(std::move(parts), 8, 16, DType::BF16);
  std::mutex mu;
  std::set<std::thread::id> seen;
  bool met = true;
  runner.parallel_rows(2, [&](int64_t) {
    {
      std::lock_guard<std::mutex> lk(mu);
      seen.insert(std::this_thread::get_id());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (seen.size() >= 2) return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::lock_guard<std::mutex> lk(mu);
        met = false;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_TRUE(met) << "the rows ran on one thread";
  EXPECT_EQ(seen.size(), 2u);
}

// Staging allocates the whole slab up front; a checkpoint that cannot fit fails before that,
// naming the bytes needed and available and how many layers would fit.
TEST(StartUp, WeightsThatCannotFitFailBeforeStaging) {
  auto ck = Checkpoint::open(tiny_dir());
  auto be = make_cpu_backend(1);
  const size_t need = staged_slab_bytes(*ck, *be, 0, 1);
  const size_t base = staged_slab_bytes(*ck, *be, 0, 1, 0);
  const size_t per_layer = (need - base) / 2;  // the tiny preset has 2 layers
  EXPECT_NO_THROW(check_weights_fit(*ck, *be, 1, need));
  try {
    check_weights_fit(*ck, *be, 1, base + per_layer + per_layer / 2);  // room for 1.5 layers
    FAIL() << "expected an error";
  } catch (const Error& e) {
    char n[32], a[32];
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string("the staged weights need ") + format_bytes(need, n, sizeof n)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(format_bytes(base + per_layer + per_layer / 2, a, sizeof a)) + " available"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("at most 1 of the 2 layers would fit"), std::string::npos) << msg;
  }
  EXPECT_THROW(check_weights_fit(*ck, *be, 1, base / 2), Error);
  // The plan is the staging's: a staged slab has exactly the planned size.
  Qwen3Weights w = stage_qwen3_weights(*ck, *be, {.show_progress = false});
  EXPECT_EQ(w.resident_bytes, need);
}

// With the cost model on, the MTP and EAGLE-3 drafters keep the target's hidden rows over
// stretches with speculation off, up to the proposer's cap: the start-up budget takes them out of
// the memory the KV pool is sized from, one cap per engine.
TEST(StartUp, TheDraftersKeptHiddenRowsShrinkTheKvPool) {
  EngineLoadOptions o;
  o.scheduler.max_model_len = 128;
  o.memory_utilization = 1.0;
  const int64_t block = int64_t(1) << 20, available = int64_t(8) << 30;  // 8192 blocks of 1 MiB
  auto blocks = [&](SpeculativeMethod m, bool cost_model, int32_t engines) {
    o.scheduler.speculative.method = m;
    o.scheduler.speculative.cost_model = cost_model;
    return plan_kv_capacity(kv_capacity_request(o, block, available, engines)).num_blocks;
  };
  const int64_t kept_blocks = MtpProposer::kKeptHiddenBytes / block;  // the proposer's cap: 128
  EXPECT_EQ(blocks(SpeculativeMethod::None, true, 1), 8192);
  EXPECT_EQ(blocks(SpeculativeMethod::Mtp, true, 1), 8192 - kept_blocks);
  EXPECT_EQ(blocks(SpeculativeMethod::Mtp, true, 2), 8192 - 2 * kept_blocks);  // --pp-virtual-engines 2
  EXPECT_EQ(blocks(SpeculativeMethod::Eagle3, true, 1), 8192 - kept_blocks);
  EXPECT_EQ(blocks(SpeculativeMethod::Mtp, false, 1), 8192);  // forced speculation keeps no stretch
  EXPECT_EQ(blocks(SpeculativeMethod::DraftModel, true, 1), 8192);
  o.scheduler.speculative.method = SpeculativeMethod::Mtp;
  o.scheduler.speculative.cost_model = true;
  const std::string line = plan_kv_capacity(kv_capacity_request(o, block, available)).summary();
  EXPECT_NE(line.find("beside it the drafter's kept hidden rows, up to 128.0 MiB"), std::string::npos) << line;
}

}  // namespace
}  // namespace pypto
