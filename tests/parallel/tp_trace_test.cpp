// Profiling under tensor parallelism: a TP=2 trace has one named track per rank ("tp rank 0
// (engine)" for the thread calling execute(), "tp rank 1" for the rank thread), each holding that
// rank's forward spans, and the Chrome/Perfetto JSON names both tracks.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/profiler.h"
#include "core/trace_json.h"
#include "model/model_harness.h"
#include "tp_harness.h"

namespace pypto::test {
namespace {

struct ProfilingOn {
  ProfilingOn() {
    prof::reset();
    prof::set_level(prof::Level::Kernel);
  }
  ~ProfilingOn() {
    prof::set_level(prof::Level::Off);
    prof::reset();
  }
};

TEST(TensorParallelTrace, OneNamedTrackPerRank) {
  TestModelOptions o;
  o.preset = "tiny";
  const auto slices = stage_slices(ensure_test_model("tiny", o), 2);
  auto runner = make_tp_runner(slices, 16);
  prof::Trace t;
  {
    ProfilingOn on;
    tp_greedy(*runner, random_prompt(9, 3), 2);  // a prefill step and a decode step
    t = prof::collect();
  }
  // Forward spans and lm_head ops per track name.
  std::map<std::string, int> forwards, lm_heads;
  for (const prof::Event& e : t.events) {
    const std::string& track = t.tracks[size_t(e.track)].name;
    if (std::string(e.name) == "forward") forwards[track]++;
    if (std::string(e.name) == "lm_head") lm_heads[track]++;
  }
  for (const std::string name : {"tp rank 0 (engine)", "tp rank 1"}) {
    EXPECT_EQ(forwards[name], 2) << name << ": one forward per step on its own track";
    EXPECT_EQ(lm_heads[name], 2) << name << ": every rank computes its vocabulary slice";
  }
  const std::string json = prof::chrome_trace_json(t);
  for (const char* name : {"\"name\":\"tp rank 0 (engine)\"", "\"name\":\"tp rank 1\""})
    EXPECT_NE(json.find(name), std::string::npos) << "no thread_name metadata " << name;
}

}  // namespace
}  // namespace pypto::test
