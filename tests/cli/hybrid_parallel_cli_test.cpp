// A hybrid (Gated DeltaNet) checkpoint under the parallel layouts through the real binary: rank
// processes (--distributed-executor-backend mp) carry each rank's share of the recurrent state
// pool and print the single-rank tokens, and --pp-virtual-engines, whose engines would share one
// state pool, is refused by name on either backend (it used to abort on the first step). n-gram
// speculation under rank processes rolls each rank's share of the state back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/test_model.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::RunResult;
using pypto::test::printed_token_ids;
using pypto::test::run;

class HybridParallelCli : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_hybrid_parallel_cli_" + std::to_string(getpid()));
    pypto::TestModelOptions o;
    o.preset = "tiny-hybrid";
    o.out_dir = (dir_ / "tiny-hybrid").string();
    o.show_progress = false;
    pypto::make_test_model(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "tiny-hybrid").string(); }
  static std::string base() {
    return "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
           "--prompt 'one two three four five six' --generate-config '{\"max_tokens\": 12, \"temperature\": 0}'";
  }
};
fs::path HybridParallelCli::dir_;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST_F(HybridParallelCli, RankProcessesPrintTheSingleRankTokens) {
  const RunResult one = run(base());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_FALSE(printed_token_ids(one.output).empty()) << one.output;
  for (const char* layout : {"--tp 2 --devices 0,1", "--pp 2 --devices 0,1"}) {
    const RunResult r = run(base() + " " + layout + " --distributed-executor-backend mp");
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "process group of 2 ranks")) << layout << "\n" << r.output;
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(one.output)) << layout << "\n" << r.output;
  }
  // n-gram speculation on the ranks: rejected drafts roll each rank's share of the state back.
  const std::string spec = " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
                           "\"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3, \"cost_model\": false}'";
  const RunResult s = run(base() + " --tp 2 --devices 0,1 --distributed-executor-backend mp" + spec);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_TRUE(has(s.output, "[speculative]")) << s.output;
  EXPECT_EQ(printed_token_ids(s.output), printed_token_ids(one.output)) << s.output;
}

TEST_F(HybridParallelCli, VirtualPipelineEnginesAreRefusedByName) {
  for (const char* backend : {"threads", "mp"}) {
    const RunResult r =
        run(base() + " --pp 2 --devices 0,1 --pp-virtual-engines --distributed-executor-backend " + backend);
    EXPECT_NE(r.exit_code, 0) << backend;
    EXPECT_TRUE(has(r.output, "cannot divide yet: use --pp without --pp-virtual-engines")) << backend << "\n" << r.output;
    EXPECT_FALSE(has(r.output, "invariant violated")) << backend << "\n" << r.output;
  }
}

}  // namespace
