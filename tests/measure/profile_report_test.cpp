// The report's arithmetic on a hand-built trace with exact durations: the five layers and the
// residual add up to the end-to-end step time, decode steps are told from prefill steps, and op
// families and layers get their shares.
#include <gtest/gtest.h>

#include "core/profile_report.h"
#include "engine/spec_cost_report.h"

namespace pypto::prof {
namespace {

constexpr int64_t kMs = 1000000;

struct Builder {
  Trace t;
  Builder() { t.tracks.push_back({1, 1, "engine"}); }
  void ev(const char* name, const char* cat, double ts_ms, double dur_ms, int64_t a0 = -1, int64_t a1 = -1, int64_t a2 = -1) {
    Event e;
    e.name = name;
    e.cat = cat;
    e.ts_ns = int64_t(ts_ms * kMs);
    e.dur_ns = int64_t(dur_ms * kMs);
    e.args[0] = a0;
    e.args[1] = a1;
    e.args[2] = a2;
    t.events.push_back(e);
  }
  // One iteration at t0 lasting 10 ms: step 1..9.5, schedule 0.5, execute 6 (forward 5: kernels
  // 3 + host 2), sample 1, update 0.5 (+0.5 of the step outside its phases).
  void iteration(double t0, int64_t prefill, int64_t decode) {
    ev("iteration", "span", t0, 10);
    ev("step", "span", t0 + 1, 8.5, -1, prefill, decode);
    ev("schedule", "phase", t0 + 1, 0.5);
    ev("execute", "phase", t0 + 1.5, 6);
    ev("forward", "span", t0 + 2, 5);
    ev("attention.core", "op", t0 + 2, 1, 0);
    ev("mlp.down", "op", t0 + 3, 1.5, 0);
    ev("host.split", "op", t0 + 4.5, 0.5, 0);
    ev("lm_head", "op", t0 + 5, 0.5);
    ev("sample", "phase", t0 + 7.5, 1);
    ev("update", "phase", t0 + 8.5, 0.5);
  }
};

TEST(ProfileReport, LayersAddUpToTheStepTime) {
  Builder b;
  b.iteration(0, 16, 0);    // prefill
  b.iteration(12, 0, 1);    // decode, next one starts 12 ms later -> e2e 12 ms, residual 2 ms
  b.iteration(24, 0, 1);
  b.iteration(36, 0, 1);    // the last: e2e = its own 10 ms
  ProfileReport r = analyze_trace(b.t, Level::Kernel);
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.prefill_steps, 1u);
  EXPECT_EQ(r.decode_steps, 3u);
  EXPECT_EQ(r.prefill_tokens, 16);
  EXPECT_EQ(r.decode_tokens, 3);
  EXPECT_TRUE(r.has_kernel_detail);
  const StepLayers& d = r.steps[1].layers;
  EXPECT_NEAR(d.e2e, 12.0, 1e-9);
  EXPECT_NEAR(d.kernel, 3.0, 1e-9);            // attention 1 + mlp 1.5 + lm_head 0.5
  EXPECT_NEAR(d.model_host, 2.0, 1e-9);        // forward 5 - 3
  EXPECT_NEAR(d.sched_prep, 0.5 + 1.0, 1e-9);  // schedule + (execute 6 - forward 5)
  EXPECT_NEAR(d.sampling, 1.5, 1e-9);          // sample 1 + update 0.5
  EXPECT_NEAR(d.wrap, 1.5 + 0.5, 1e-9);        // iteration - step, step - its phases
  EXPECT_NEAR(d.residual(), 2.0, 1e-9);        // the 2 ms between iterations
  EXPECT_NEAR(r.steps[3].layers.residual(), 0.0, 1e-9);
  // TPOT stats over decode steps only: 12, 12, 10.
  EXPECT_EQ(r.decode_step_ms.n, 3u);
  EXPECT_NEAR(r.decode_step_ms.mean, 34.0 / 3, 1e-9);
  EXPECT_NEAR(r.decode_step_ms.p50, 12.0, 1e-9);
  // Families per decode step, shares of the mean decode step.
  std::map<std::string, NamedTime> fam;
  for (const NamedTime& f : r.families) fam[f.name] = f;
  EXPECT_NEAR(fam["mlp"].ms_per_step, 1.5, 1e-9);
  EXPECT_NEAR(fam["sampling"].ms_per_step, 1.0, 1e-9);
  EXPECT_NEAR(fam["mlp"].share, 1.5 / (34.0 / 3), 1e-9);
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_NEAR(r.layers[0].ms_per_step, 3.0, 1e-9);  // attention + mlp + host of layer 0
  const std::string text = format_report(r, RunInfo{1.5, 0.2, {0.01, 0.02}, 3, 0.1});
  for (const char* s : {"(1) kernel time", "(2) model, outside kernels", "(3) scheduling", "(4) sampling", "(5) engine",
                        "residual", "TPOT", "time to first token", "model load", "warm-up", "by op family", "by layer"})
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
}

TEST(ProfileReport, DraftingIsItsOwnLayerAndItsForwardIsNotTheModels) {
  // One decode iteration of 12 ms with speculative decoding: in "schedule" the drafter's pass (a
  // draft model's forward with its ops), in "execute" the target's forward, then the MTP head's
  // rows (an op outside any forward span).
  Builder b;
  b.ev("iteration", "span", 0, 12);
  b.ev("step", "span", 0.5, 11, -1, 0, 1);
  b.ev("schedule", "phase", 0.5, 2.5);
  b.ev("draft", "span", 1, 1.6);
  b.ev("forward", "span", 1.1, 1.4);
  b.ev("mlp.down", "op", 1.1, 1, 0);
  b.ev("execute", "phase", 3, 6.5);
  b.ev("forward", "span", 3, 5);
  b.ev("attention.core", "op", 3, 1, 0);
  b.ev("lm_head", "op", 4, 0.5);
  b.ev("draft", "span", 8.2, 0.8);
  b.ev("attention.core", "op", 8.2, 0.4, 0);
  b.ev("sample", "phase", 9.5, 1);
  b.ev("update", "phase", 10.5, 0.5);
  ProfileReport r = analyze_trace(b.t, Level::Kernel);
  ASSERT_EQ(r.decode_steps, 1u);
  EXPECT_TRUE(r.has_drafting);
  const StepLayers& d = r.steps[0].layers;
  EXPECT_NEAR(d.drafting, 1.6 + 0.8, 1e-9);
  EXPECT_NEAR(d.kernel, 1.0 + 0.5, 1e-9);             // the target's ops only
  EXPECT_NEAR(d.model_host, 5.0 - 1.5, 1e-9);         // the target's forward only
  EXPECT_NEAR(d.sched_prep, 2.5 + (6.5 - 5.0) - 2.4, 1e-9);
  EXPECT_NEAR(d.sampling, 1.5, 1e-9);
  EXPECT_NEAR(d.wrap, 1.0 + 0.5, 1e-9);
  EXPECT_NEAR(d.residual(), 0.0, 1e-9);
  std::map<std::string, NamedTime> fam;
  for (const NamedTime& f : r.families) fam[f.name] = f;
  EXPECT_NEAR(fam["attention"].ms_per_step, 1.0, 1e-9);
  EXPECT_EQ(fam.count("mlp"), 0u);
  EXPECT_NEAR(fam["drafting"].ms_per_step, 2.4, 1e-9);
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_NEAR(r.layers[0].ms_per_step, 1.0, 1e-9);
  EXPECT_NE(format_report(r, {}).find("(3') drafting"), std::string::npos);
  // Without drafting spans the report has no drafting line.
  Builder plain;
  plain.iteration(0, 0, 1);
  ProfileReport p = analyze_trace(plain.t, Level::Kernel);
  EXPECT_FALSE(p.has_drafting);
  EXPECT_EQ(format_report(p, {}).find("(3')"), std::string::npos);
}

TEST(ProfileReport, StepOfAnUnclosedIterationStillCounts) {
  Builder b;
  b.iteration(0, 0, 1);
  b.iteration(12, 0, 1);
  // The second iteration had not closed when the trace was collected.
  std::erase_if(b.t.events, [](const Event& e) { return std::string(e.name) == "iteration" && e.ts_ns > 0; });
  ProfileReport r = analyze_trace(b.t, Level::Kernel);
  ASSERT_EQ(r.decode_steps, 2u);
  EXPECT_NEAR(r.steps[1].layers.e2e, 8.5, 1e-9);      // its step span
  EXPECT_NEAR(r.steps[1].layers.kernel, 3.0, 1e-9);
  EXPECT_NEAR(r.steps[1].layers.wrap, 0.5, 1e-9);     // only the step's own bookkeeping
  EXPECT_NEAR(r.steps[0].layers.e2e, 13.0, 1e-9);     // up to the next step's start
}

TEST(ProfileReport, E2eLevelMergesKernelAndHost) {
  Builder b;
  b.iteration(0, 0, 1);
  // Drop the op events: an e2e-level trace has none.
  std::erase_if(b.t.events, [](const Event& e) { return std::string(e.cat) == "op"; });
  ProfileReport r = analyze_trace(b.t, Level::E2E);
  EXPECT_FALSE(r.has_kernel_detail);
  EXPECT_NEAR(r.steps[0].layers.kernel + r.steps[0].layers.model_host, 5.0, 1e-9);
  EXPECT_NE(format_report(r, {}).find("(1)+(2) model forward"), std::string::npos);
}

TEST(ProfileReport, IdleIterationsAreNotSteps) {
  Builder b;
  b.ev("iteration", "span", 0, 1);
  b.ev("step", "span", 0.1, 0.5);  // nothing scheduled: not annotated
  ProfileReport r = analyze_trace(b.t, Level::E2E);
  EXPECT_TRUE(r.steps.empty());
}

TEST(ProfileReport, TtftEndsWithTheLastPrefillChunk) {
  Builder b;
  b.t.tracks.push_back({2, 1, "request a"});
  b.t.tracks.push_back({2, 2, "request b"});  // never scheduled: no TTFT
  auto on = [&](int32_t track, const char* name, double ts, double dur) {
    b.ev(name, "request", ts, dur);
    b.t.events.back().track = track;
  };
  on(1, "queued", 0, 2);
  on(1, "prefill", 2, 3);
  on(1, "prefill", 5, 4);  // second chunk: its step published the first token at 9 ms
  on(1, "decode", 9, 3);
  on(2, "queued", 0, 1);
  const std::vector<double> t = request_ttfts_s(b.t);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_NEAR(t[0], 0.009, 1e-12);
}

TEST(ProfileReport, SpeculationSectionStatesAcceptanceAndTheCostModel) {
  SpecDecodeStats a;
  a.observe(3, 3);
  a.observe(3, 0);
  SpecCostStats c;
  c.chosen_k = {6, 0, 0, 2};
  c.steps_speculating = 2;
  c.steps_plain = 6;
  c.probes = 1;
  c.plain_step_s = 0.010;
  c.plain_tokens_per_s = 100;
  c.spec_step_s = 0.012;
  c.spec_tokens_per_s = 150;
  c.speculating = true;
  c.last_k = 3;
  RunInfo info;
  info.speculation = format_spec_decode_section(a, c);
  const std::string text = format_report(ProfileReport{}, info);
  EXPECT_NE(text.find("-- speculative decoding --"), std::string::npos) << text;
  EXPECT_NE(text.find("3 of 6 draft tokens (50.0 %), 2 verifies, mean acceptance length 2.50"), std::string::npos) << text;
  EXPECT_NE(text.find("2 with k > 0, 6 plain (25.0 % with k > 0), 1 probes"), std::string::npos) << text;
  EXPECT_NE(text.find("k=0: 6, k=1: 0, k=2: 0, k=3: 2"), std::string::npos) << text;
  EXPECT_NE(text.find("estimated plain step      10.000 ms, 100.0 tokens/s"), std::string::npos) << text;
  EXPECT_NE(text.find("12.000 ms, 150.0 tokens/s (1.500x plain)"), std::string::npos) << text;
  // Speculation off: no section.
  EXPECT_EQ(format_report(ProfileReport{}, RunInfo{}).find("speculative"), std::string::npos);
}

}  // namespace
}  // namespace pypto::prof
