// The soak through the binary on the tiny model, as CI runs it: `bench soak` starts the server
// itself (plain, --dp 2, --tp 2), drives the mixed and abusive traffic at a concurrency above
// --max-num-seqs for 25 s, and must exit 0: no answer different from its solo run, no 5xx, no
// dropped connection, /health up throughout, KV / RSS / descriptors back at their baseline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/run_binary.h"

namespace pypto::test {
namespace {

namespace fs = std::filesystem;

std::string tiny_model() {
  const fs::path dir = fs::path(::testing::TempDir()) / "pypto-soak-tiny";
  if (!fs::exists(dir / "config.json")) {
    const RunResult r = run("make-test-model --preset tiny --out " + dir.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  return dir.string();
}

void soak(const std::string& name, const std::string& server_args, const std::string& extra = "") {
  const std::string model = tiny_model();
  const fs::path out = fs::path(::testing::TempDir()) / ("pypto-soak-" + name);
  fs::remove_all(out);
  const RunResult r = run("bench soak --model " + model + " --server-args '" + server_args +
                          "' --duration 25 --concurrency 10 --seed 1 --out " + out.string() + " " + extra);
  std::ifstream f(out / "soak.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "no soak.json\n" << r.output;
  const auto& t = j["totals"];
  std::printf("[soak %s] %s answered, %s mismatches, %s 5xx, %s dropped, %s/%s abusive refused, %s disconnects; "
              "latency p50 %.0f ms p99 %.0f ms; baseline %s, after %s\n",
              name.c_str(), t["answered"].dump().c_str(), t["mismatches"].dump().c_str(), t["server_errors"].dump().c_str(),
              t["dropped"].dump().c_str(), t["abusive_refused"].dump().c_str(), t["abusive"].dump().c_str(),
              t["disconnects"].dump().c_str(), j["latency_ms"]["p50"].get<double>(), j["latency_ms"]["p99"].get<double>(),
              j["baseline"].dump().c_str(), j["after_drain"].dump().c_str());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(j["passed"].get<bool>()) << j["failures"].dump(2);
  EXPECT_GT(t["answered"].get<int>(), extra.empty() ? 20 : 0);
  EXPECT_GT(t["abusive"].get<int>(), 0);
  EXPECT_TRUE(fs::exists(out / "soak-latency.svg"));
}

TEST(SoakE2E, Plain) { soak("plain", "--max-num-seqs 4 --threads 2"); }
TEST(SoakE2E, DataParallel2) { soak("dp2", "--dp 2 --devices 0,1 --max-num-seqs 2"); }
TEST(SoakE2E, TensorParallel2) { soak("tp2", "--tp 2 --devices 0,1 --max-num-seqs 4"); }

}  // namespace
}  // namespace pypto::test

namespace pypto::test {
namespace {

// Issue #28: a json_schema nested 3,000 objects deep kills the server on main (SIGSEGV in the
// schema compiler, found by this soak). Enabled once the request limits (points 1-2) are merged:
// run with --gtest_also_run_disabled_tests, then drop the DISABLED_ prefix.
TEST(SoakE2E, DISABLED_DeepBodies3000) {
  soak("deep3000", "--max-num-seqs 4 --threads 2", "--deep-depth 3000 --abuse-fraction 0.5 --abuse-kinds deep-body,deep-schema");
}

}  // namespace
}  // namespace pypto::test
