// bench latency / throughput in-process on a tiny random-weight model (seconds), and the
// profile of such a run: decode steps excluding warm-up, layers adding up, trace tracks.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/bench_offline.h"
#include "core/error.h"
#include "core/profile_report.h"
#include "core/profiler.h"
#include "core/trace_json.h"
#include "engine/model_runner.h"
#include "model/test_model.h"

namespace pypto::bench {
namespace {

LoadedEngine* g_engine = nullptr;

LoadedEngine& tiny_engine() {
  static LoadedEngine* le = g_engine = [] {
    const std::string dir = ::testing::TempDir() + "/pypto-measure-tiny";
    if (!std::filesystem::exists(dir + "/config.json")) {
      TestModelOptions o;
      o.preset = "tiny";
      o.out_dir = dir;
      o.show_progress = false;
      make_test_model(o);
    }
    EngineLoadOptions lo;
    lo.model_dir = dir;
    lo.kv_cache_memory = 16 << 20;
    lo.threads = 2;
    lo.show_progress = false;
    lo.scheduler.max_model_len = 256;
    return new LoadedEngine(load_engine(lo));
  }();
  return *le;
}

// Stops the engine thread before the process exits.
struct ShutdownEngine : ::testing::Environment {
  void TearDown() override {
    if (g_engine) g_engine->loop->shutdown();
  }
};
[[maybe_unused]] ::testing::Environment* const kShutdown = ::testing::AddGlobalTestEnvironment(new ShutdownEngine);

int32_t vocab() { return int32_t(tiny_engine().config.vocab_size); }

TEST(BenchLatency, MeasuresPrefillAndTpotExcludingWarmup) {
  LatencyOptions o;
  o.input_len = 8;
  o.output_len = 4;
  o.num_iters = 3;
  o.num_iters_warmup = 1;
  o.progress = false;
  LatencyResult r = run_latency_benchmark(*tiny_engine().loop, vocab(), o);
  ASSERT_EQ(r.iterations.size(), 3u);
  for (const LatencyIteration& it : r.iterations) {
    EXPECT_EQ(it.output_tokens, 4);
    EXPECT_GT(it.prefill_s, 0);
    EXPECT_GT(it.tpot_s, 0);
    EXPECT_GE(it.e2e_s, it.prefill_s);
  }
  EXPECT_EQ(r.tpot_ms.count, 3u);
  EXPECT_GT(r.decode_tokens_per_s, 0);
  EXPECT_NEAR(r.prefill_tokens_per_s, 8 / (r.prefill_ms.mean / 1e3), 1e-6 * r.prefill_tokens_per_s);
  auto j = latency_json(r);
  EXPECT_EQ(j["iterations"].size(), 3u);
}

TEST(BenchLatency, BatchOfRequests) {
  LatencyOptions o;
  o.input_len = 5;
  o.output_len = 3;
  o.batch_size = 3;
  o.num_iters = 1;
  o.num_iters_warmup = 0;
  o.progress = false;
  LatencyResult r = run_latency_benchmark(*tiny_engine().loop, vocab(), o);
  ASSERT_EQ(r.iterations.size(), 1u);
  EXPECT_EQ(r.iterations[0].output_tokens, 9);
}

TEST(BenchThroughput, EveryRequestGetsItsOutputLength) {
  ThroughputOptions o;
  o.num_prompts = 6;
  o.input_len = 8;
  o.output_len = 3;
  o.progress = false;
  ThroughputResult r = run_throughput_benchmark(*tiny_engine().loop, vocab(), o);
  EXPECT_EQ(r.requests, 6);
  EXPECT_EQ(r.input_tokens, 48);
  EXPECT_EQ(r.output_tokens, 18);
  EXPECT_NEAR(r.output_tokens_per_s, 18 / r.elapsed_s, 1e-9 * r.output_tokens_per_s);
  EXPECT_EQ(r.e2e_ms.size(), 6u);
}

TEST(BenchOffline, RejectsBadOptions) {
  LatencyOptions o;
  o.num_iters = 0;
  EXPECT_THROW(run_latency_benchmark(*tiny_engine().loop, vocab(), o), Error);
  ThroughputOptions t;
  t.range_ratio = 2;
  EXPECT_THROW(run_throughput_benchmark(*tiny_engine().loop, vocab(), t), Error);
}

}  // namespace
}  // namespace pypto::bench
