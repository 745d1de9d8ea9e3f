// `pypto-serving bench latency|throughput --tp 2` through the real binary on a tiny model: the
// in-process benchmarks start one replica of two tensor-parallel ranks (load_replicas) instead of
// dropping --tp, and say so in the log and in the saved config.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "model/test_model.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::kBinary;
using pypto::test::RunResult;
using pypto::test::run;

// The one JSON file bench wrote under `dir`.
nlohmann::json only_json(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".json") found.push_back(e.path());
  EXPECT_EQ(found.size(), 1u) << dir;
  if (found.empty()) return {};
  std::ifstream f(found[0]);
  return nlohmann::json::parse(f);
}

TEST(BenchCli, LatencyAndThroughputRunTensorParallel) {
  const fs::path dir = fs::temp_directory_path() / ("pypto_bench_tp_" + std::to_string(getpid()));
  pypto::TestModelOptions o;
  o.out_dir = (dir / "tiny").string();
  o.show_progress = false;
  pypto::make_test_model(o);
  const std::string common = " --model " + o.out_dir + " --kv-cache-memory 32MiB --tp 2 --input-len 8 --output-len 4";

  auto [rc, out] = run("bench latency" + common + " --batch-size 2 --num-iters 1 --num-iters-warmup 1 --result-dir " +
                       (dir / "lat").string());
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("tp 2,"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 device 1"), std::string::npos) << "placement of the second rank\n" << out;
  const nlohmann::json lat = only_json(dir / "lat");
  EXPECT_EQ(lat.dump().find("\"tp\":2") != std::string::npos, true) << lat.dump();

  const RunResult tput = run("bench throughput" + common + " --num-prompts 4 --result-dir " + (dir / "tput").string());
  ASSERT_EQ(tput.exit_code, 0) << tput.output;
  EXPECT_NE(tput.output.find("tp 2,"), std::string::npos) << tput.output;
  fs::remove_all(dir);
}

}  // namespace
