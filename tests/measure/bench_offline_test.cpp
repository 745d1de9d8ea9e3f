// bench latency / throughput in-process on a tiny random-weight model (seconds), and the
// profile of such a run: decode steps excluding warm-up, layers adding up, trace tracks.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "cli/bench_offline.h"
#include "core/error.h"
#include "core/profile_report.h"
#include "core/profiler.h"
#include "core/trace_json.h"
#include "engine/model_runner.h"
#include "tiny_engine.h"

namespace pypto::bench {

LoadedEngine* g_engine = nullptr;

LoadedEngine& tiny_engine() {
  static LoadedEngine* le = g_engine = new LoadedEngine(load_tiny_engine("pypto-measure-tiny"));
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

namespace {

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

namespace pypto::prof {
namespace {

// A recorded bench latency run on the real engine and model (hooks in engine_loop.cpp,
// engine.cpp, qwen3_model.cpp): warm-up excluded, steps classified, layers disjoint and
// non-negative, kernel detail per layer, one track per request.
TEST(ProfileE2E, KernelLevelLatencyRun) {
  bench::LatencyOptions o;
  o.input_len = 8;
  o.output_len = 5;
  o.num_iters = 2;
  o.num_iters_warmup = 1;
  o.progress = false;
  o.profile_level = Level::Kernel;
  bench::run_latency_benchmark(*bench::tiny_engine().loop, bench::vocab(), o);
  EXPECT_FALSE(active(Level::E2E));  // recording stops with the run
  const Trace t = collect();
  const ProfileReport r = analyze_trace(t, Level::Kernel);
  EXPECT_EQ(r.prefill_steps, 2u);
  EXPECT_EQ(r.prefill_tokens, 16);
  EXPECT_EQ(r.decode_steps, 8u);  // 4 per iteration; the warm-up iteration is not recorded
  EXPECT_EQ(r.decode_tokens, 8);
  EXPECT_EQ(r.decode_step_ms.n, 8u);
  ASSERT_TRUE(r.has_kernel_detail);
  for (const StepRecord& s : r.steps) {
    const StepLayers& L = s.layers;
    EXPECT_GT(L.kernel, 0);
    EXPECT_GE(L.model_host, 0);
    EXPECT_GE(L.sched_prep, 0);
    EXPECT_GT(L.sampling, 0);
    EXPECT_GE(L.wrap, 0);
    // The layers are disjoint parts of [iteration start, next iteration start).
    EXPECT_GE(L.residual(), -1e-3) << "layers overlap: they sum past the step time";
  }
  const int layers = int(bench::tiny_engine().config.num_hidden_layers);
  EXPECT_EQ(r.layers.size(), size_t(layers));
  std::set<std::string> families;
  for (const NamedTime& f : r.families) families.insert(f.name);
  for (const char* f : {"attention", "mlp", "norm", "lm_head", "sampling", "embedding", "residual", "host"})
    EXPECT_TRUE(families.count(f)) << f;
  size_t layer_spans = 0, requests = 0;
  for (const Event& e : t.events) layer_spans += std::string_view(e.name) == "layer";
  for (const Track& tr : t.tracks) requests += tr.pid == 2 && tr.name.find("bench-latency") != std::string::npos;
  EXPECT_EQ(layer_spans, size_t(layers) * 10);  // 2 prefill + 8 decode forwards
  EXPECT_EQ(requests, 2u);
  EXPECT_EQ(request_ttfts_s(t).size(), 2u);
}

// A bench latency run at kernel level with speculation forced (k 2) on `lo`: the drafter's work is
// recorded as "draft" spans and the report puts it in the drafting layer; verify steps are decode
// steps counted by the tokens they emitted (8 after the first, several per step); every step's
// layers stay disjoint and non-negative (time counted twice would push their sum past the step).
Trace run_forced_speculation(EngineLoadOptions lo) {
  lo.kv_cache_memory = 16 << 20;
  lo.threads = 2;
  lo.show_progress = false;
  lo.scheduler.max_model_len = 256;
  lo.scheduler.speculative.num_speculative_tokens = 2;
  lo.scheduler.speculative.cost_model = false;
  LoadedEngine le = load_engine(lo);
  bench::LatencyOptions o;
  o.input_len = 8;
  o.output_len = 9;
  o.num_iters = 1;
  o.num_iters_warmup = 1;
  o.progress = false;
  o.profile_level = Level::Kernel;
  bench::run_latency_benchmark(*le.loop, int32_t(le.config.vocab_size), o);
  le.loop->shutdown();
  const Trace t = collect();
  const ProfileReport r = analyze_trace(t, Level::Kernel);
  EXPECT_TRUE(r.has_drafting);
  EXPECT_EQ(r.decode_tokens, 8);
  EXPECT_GT(r.decode_steps, 0u);
  EXPECT_LT(r.decode_steps, 8u);
  EXPECT_EQ(r.prefill_steps, 1u);
  EXPECT_GT(r.decode_mean.drafting, 0);
  for (const StepRecord& st : r.steps) {
    const StepLayers& L = st.layers;
    EXPECT_GT(L.kernel, 0);
    EXPECT_GE(L.model_host, 0);
    EXPECT_GE(L.sched_prep, 0);
    EXPECT_GE(L.drafting, 0);
    EXPECT_GE(L.residual(), -1e-3) << "layers overlap: they sum past the step time";
  }
  // The op families split the target's forward: together (less sampling and drafting, which
  // lie outside it) no more than its time (an op left open over later spans counts twice).
  double ops = 0;
  for (const NamedTime& f : r.families)
    if (f.name != "sampling" && f.name != "drafting") ops += f.ms_per_step;
  EXPECT_LE(ops, r.decode_mean.kernel + r.decode_mean.model_host + 1e-3) << format_report(r, {});
  EXPECT_NE(format_report(r, {}).find("(3') drafting"), std::string::npos);
  return t;
}

// A draft model (the tiny model drafting for itself, every draft accepted): its forwards lie inside
// draft spans.
TEST(ProfileE2E, DraftModelPassesAreTheirOwnLayer) {
  EngineLoadOptions lo;
  lo.model_dir = bench::tiny_model_dir("pypto-measure-tiny");
  lo.scheduler.speculative.method = SpeculativeMethod::DraftModel;
  lo.scheduler.speculative.draft_model = lo.model_dir;
  const Trace t = run_forced_speculation(lo);
  size_t nested = 0;
  for (const Event& d : t.events)
    if (std::string_view(d.name) == "draft")
      for (const Event& f : t.events)
        nested += std::string_view(f.name) == "forward" && f.track == d.track && f.ts_ns >= d.ts_ns &&
                  f.ts_ns + f.dur_ns <= d.ts_ns + d.dur_ns;
  EXPECT_GT(nested, 0u);
}

// An EAGLE-3 head on a 4-layer tiny target: the target captures its aux layers' states inside its
// forward (the capture must not leave an op open over the layers that follow it) and the head's
// rows run in draft spans.
TEST(ProfileE2E, Eagle3HeadRowsAreDraftingAndTheAuxCaptureIsNotCountedTwice) {
  TestModelOptions m;
  m.preset = "tiny";
  m.layers = 4;
  m.eagle3 = "oracle";  // every greedy draft accepted: fewer decode steps than tokens
  m.show_progress = false;
  EngineLoadOptions lo;
  lo.model_dir = cached_test_model(::testing::TempDir(), "pypto-measure-tiny-eagle3", m);
  lo.scheduler.speculative.method = SpeculativeMethod::Eagle3;
  lo.scheduler.speculative.draft_model = lo.model_dir + "/eagle3";
  run_forced_speculation(lo);
}

}  // namespace
}  // namespace pypto::prof
