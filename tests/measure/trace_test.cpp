// The span recorder and its Chrome trace JSON: events parse back with the fields Perfetto needs,
// phases abut, children nest inside parents, request tracks are named; nothing is recorded when
// profiling is off.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <set>
#include <thread>

#include <fstream>
#include <sstream>

#include "core/profile_control.h"
#include "core/profiler.h"
#include "core/trace_json.h"

namespace pypto::prof {
namespace {

struct LevelGuard {
  explicit LevelGuard(Level l) {
    reset();
    set_level(l);
  }
  ~LevelGuard() {
    set_level(Level::Off);
    reset();
  }
};

// One fake engine iteration: a step with phases, a forward with two layers of ops.
void fake_iteration(const std::string& req) {
  PYPTO_PROF_SPAN(Level::E2E, "iteration");
  PYPTO_PROF_SPAN(Level::E2E, "step", "schedule");
  annotate(0, 1);
  request_step(req, "decode", 1, 5);
  PYPTO_PROF_PHASE(Level::E2E, "execute");
  {
    PYPTO_PROF_SPAN(Level::E2E, "forward");
    PYPTO_PROF_OP("embedding");
    PYPTO_PROF_PHASE(Level::Kernel, "layers");
    for (int li = 0; li < 2; ++li) {
      PYPTO_PROF_LAYER(li, "norm.input");
      PYPTO_PROF_OP("attention.core");
      PYPTO_PROF_OP("host.split");
      PYPTO_PROF_OP("mlp.down");
    }
    PYPTO_PROF_OP("lm_head");
  }
  PYPTO_PROF_PHASE(Level::E2E, "sample");
}

TEST(Profiler, OffRecordsNothing) {
  LevelGuard g(Level::Off);
  request_arrived("r0");
  fake_iteration("r0");
  EXPECT_TRUE(collect().events.empty());
}

TEST(Profiler, E2eLevelSkipsKernelSpans) {
  LevelGuard g(Level::E2E);
  fake_iteration("r0");
  Trace t = collect();
  for (const Event& e : t.events) {
    EXPECT_NE(std::string(e.cat), "op") << e.name;
    EXPECT_NE(std::string(e.name), "layer");
  }
  EXPECT_FALSE(t.events.empty());
}

TEST(Profiler, ChromeTraceParsesWithNestedTracks) {
  LevelGuard g(Level::Kernel);
  request_arrived("r0");
  std::thread([] {
    name_this_thread("engine replica 0");
    request_scheduled_first("r0", "r0");
    fake_iteration("r0");
  }).join();
  const Trace t = collect();
  auto j = nlohmann::json::parse(chrome_trace_json(t));
  ASSERT_TRUE(j.contains("traceEvents"));
  // Only this test's tracks: an engine of another test in this process may also run.
  std::set<std::pair<int, int>> mine;
  bool engine_named = false, request_named = false;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      const bool eng = e["args"]["name"] == "engine replica 0", req = e["args"]["name"] == "request r0";
      engine_named |= eng;
      request_named |= req;
      if (eng || req) mine.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    }
  }
  std::vector<nlohmann::json> x;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && mine.count({e["pid"].get<int>(), e["tid"].get<int>()})) {
      ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      x.push_back(e);
    }
  }
  EXPECT_TRUE(engine_named);
  EXPECT_TRUE(request_named);
  auto find = [&](const std::string& name) {
    std::vector<nlohmann::json> out;
    for (const auto& e : x)
      if (e["name"] == name) out.push_back(e);
    return out;
  };
  auto inside = [](const nlohmann::json& c, const nlohmann::json& p) {
    const double eps = 1e-3;
    return c["pid"] == p["pid"] && c["tid"] == p["tid"] && c["ts"].get<double>() >= p["ts"].get<double>() - eps &&
           c["ts"].get<double>() + c["dur"].get<double>() <= p["ts"].get<double>() + p["dur"].get<double>() + eps;
  };
  ASSERT_EQ(find("iteration").size(), 1u);
  ASSERT_EQ(find("step").size(), 1u);
  ASSERT_EQ(find("forward").size(), 1u);
  ASSERT_EQ(find("layer").size(), 2u);
  ASSERT_EQ(find("attention.core").size(), 2u);
  EXPECT_TRUE(inside(find("step")[0], find("iteration")[0]));
  EXPECT_TRUE(inside(find("forward")[0], find("execute")[0]));
  EXPECT_TRUE(inside(find("execute")[0], find("step")[0]));
  for (const auto& layer : find("layer")) EXPECT_TRUE(inside(layer, find("layers")[0]));
  for (int li = 0; li < 2; ++li) {
    const nlohmann::json layer = find("layer")[li];
    EXPECT_EQ(layer["args"]["layer"], li);
    const auto ops = find("mlp.down");
    EXPECT_EQ(ops[li]["args"]["layer"], li);
    EXPECT_TRUE(inside(ops[li], layer));
  }
  // Phases of one span abut: schedule ends where execute starts.
  EXPECT_NEAR(find("schedule")[0]["ts"].get<double>() + find("schedule")[0]["dur"].get<double>(),
              find("execute")[0]["ts"].get<double>(), 1e-3);
  // The step carries its token counts; the request track has queued and decode events, the
  // decode one ending with the iteration (when the token is published).
  EXPECT_EQ(find("step")[0]["args"]["decode_tokens"], 1);
  ASSERT_EQ(find("queued").size(), 1u);
  ASSERT_EQ(find("decode").size(), 1u);
  const auto dec = find("decode")[0], it = find("iteration")[0];
  EXPECT_EQ(dec["args"]["tokens"], 1);
  EXPECT_NEAR(dec["ts"].get<double>() + dec["dur"].get<double>(), it["ts"].get<double>() + it["dur"].get<double>(), 1e-3);
  EXPECT_EQ(dec["pid"], 2);  // the requests process, not the engine thread's
  EXPECT_EQ(it["pid"], 1);
}

TEST(Profiler, ParseLevelNamesTheBadValue) {
  EXPECT_EQ(parse_level("kernel"), Level::Kernel);
  try {
    parse_level("loud");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("loud"), std::string::npos);
  }
}

TEST(TraceOutput, FileOrDirectory) {
  const std::string dir = ::testing::TempDir() + "/pypto-trace-test-" + std::to_string(getpid());
  const std::string f = trace_output_path(dir);
  EXPECT_EQ(f.rfind(dir, 0), 0u);
  EXPECT_NE(f.find(".json"), std::string::npos);
  EXPECT_EQ(trace_output_path(dir + "/x.json"), dir + "/x.json");
}

TEST(ProfileControl, StartStopTwiceIsIdempotentAndWritesValidFiles) {
  const std::string dir = ::testing::TempDir() + "/pypto-profile-control-" + std::to_string(getpid());
  std::vector<std::string> paths;
  for (int round = 0; round < 2; ++round) {
    EXPECT_TRUE(start_recording(Level::Kernel));
    EXPECT_FALSE(start_recording(Level::Kernel));  // already recording: no change
    EXPECT_TRUE(recording());
    fake_iteration("r" + std::to_string(round));
    StopResult r = stop_recording(dir);
    EXPECT_FALSE(recording());
    ASSERT_FALSE(r.path.empty());
    EXPECT_GT(r.events, 5u);
    std::ifstream f(r.path);
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = nlohmann::json::parse(ss.str());
    size_t x = 0;
    for (const auto& e : j["traceEvents"]) x += e["ph"] == "X";
    EXPECT_EQ(x, r.events);
    EXPECT_TRUE(stop_recording(dir).path.empty());  // not recording: nothing written
    paths.push_back(r.path);
  }
  EXPECT_NE(paths[0], paths[1]);
  EXPECT_FALSE(active(Level::E2E));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pypto::prof
