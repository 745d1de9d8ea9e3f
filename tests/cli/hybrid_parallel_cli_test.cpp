// A hybrid (Gated DeltaNet) checkpoint under the parallel layouts through the real binary: rank
// processes (--distributed-executor-backend mp) carry each rank's share of the recurrent state
// pool and print the single-rank tokens; under --pp-virtual-engines each engine of the pipeline
// owns its run of state slots and snapshot entries in every stage's pool, so several prompts
// spread over the engines, in chunks, and resumed from the prefix cache print the single-rank
// tokens on either backend. n-gram speculation under rank processes, and on the virtual engines,
// rolls each rank's share of each engine's states back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/test_model.h"
#include "cli_test_models.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::has;
using pypto::test::RunResult;
using pypto::test::printed_token_ids;
using pypto::test::run;
using pypto::test::speculative_line;

class HybridParallelCli : public pypto::test::CliTestModels<HybridParallelCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_hybrid_parallel_cli_");
    pypto::TestModelOptions o;
    o.preset = "tiny-hybrid";
    make_model("tiny-hybrid", o);
    o.preset = "tiny-hybrid-moe";
    make_model("tiny-hybrid-moe", o);
  }
  static std::string model() { return (dir_ / "tiny-hybrid").string(); }
  static std::string base() {
    return "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
           "--prompt 'one two three four five six' --generate-config '{\"max_tokens\": 12, \"temperature\": 0}'";
  }
};

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

// --use-compile-cache on the hybrids: the first start stages and stores each rank's slab, the
// second maps it back (logged as a hit, not staged again), and both print the tokens of a start
// without the cache; the int4 start and the rank processes find entries of their own.
TEST_F(HybridParallelCli, CompileCachePrintsTheTokensOfAStartWithoutIt) {
  const std::string cc = " --use-compile-cache --compile-cache-dir " + (dir_ / "compile-cache").string();
  for (const char* preset : {"tiny-hybrid", "tiny-hybrid-moe"}) {
    for (const char* extra : {"", " --quantization int4", " --tp 2 --devices 0,1 --distributed-executor-backend mp",
                              " --pp 2 --devices 0,1 --distributed-executor-backend mp"}) {
      const std::string args = "--model " + (dir_ / preset).string() +
                               " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
                               "--generate-config '{\"max_tokens\": 10, \"temperature\": 0}'" + extra;
      const std::string what = std::string(preset) + extra;
      const RunResult plain = run(args);
      ASSERT_EQ(plain.exit_code, 0) << what << "\n" << plain.output;
      const std::string want = printed_token_ids(plain.output);
      ASSERT_FALSE(want.empty()) << plain.output;
      const RunResult cold = run(args + cc);
      ASSERT_EQ(cold.exit_code, 0) << what << "\n" << cold.output;
      EXPECT_TRUE(has(cold.output, "compile cache: stored")) << what << "\n" << cold.output;
      EXPECT_FALSE(has(cold.output, "compile cache: hit")) << what << ": another option's entry was used\n" << cold.output;
      EXPECT_EQ(printed_token_ids(cold.output), want) << what;
      const RunResult warm = run(args + cc);
      ASSERT_EQ(warm.exit_code, 0) << what << "\n" << warm.output;
      EXPECT_TRUE(has(warm.output, "compile cache: hit")) << what << "\n" << warm.output;
      EXPECT_FALSE(has(warm.output, "compile cache: stored")) << what << "\n" << warm.output;
      EXPECT_EQ(printed_token_ids(warm.output), want) << what;
    }
  }
}

// Four prompts of different lengths, prefilled in 5-token chunks: the router spreads them over
// the pipeline's engines (--pp 2: two, --pp 4: four), whose steps are in flight together, each
// sequence in its engine's own state slots. Sharing a slot or a snapshot entry between engines
// would mix two sequences' recurrent states and change the tokens.
TEST_F(HybridParallelCli, VirtualPipelineEnginesPrintTheSingleRankTokens) {
  const std::string prompts =
      " --prompt 'the quick brown fox jumps over the lazy dog' --prompt 'one two three four five six' "
      "--prompt 'a b c d e f g h i j k l m n o p q r s t u v w x y z' --prompt 'hello' "
      "--long-prefill-token-threshold 5";
  for (const char* preset : {"tiny-hybrid", "tiny-hybrid-moe"}) {
    const std::string args = "--model " + (dir_ / preset).string() +
                             " --kv-cache-memory 16MiB --max-model-len 256 --generate-config "
                             "'{\"max_tokens\": 10, \"temperature\": 0}'" + prompts;
    const RunResult one = run(args);
    ASSERT_EQ(one.exit_code, 0) << preset << "\n" << one.output;
    const std::string want = printed_token_ids(one.output);
    ASSERT_FALSE(want.empty()) << one.output;
    std::vector<std::string> layouts = {"--pp 2 --devices 0,1 --distributed-executor-backend threads",
                                        "--pp 2 --devices 0,1 --distributed-executor-backend mp"};
    if (std::string(preset) == "tiny-hybrid") {  // every layer its own stage; TP ranks within the stages
      layouts.push_back("--pp 4 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend threads");
      layouts.push_back("--tp 2 --pp 2 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend threads");
    }
    for (const std::string& layout : layouts) {
      const RunResult r = run(args + " --pp-virtual-engines " + layout);
      ASSERT_EQ(r.exit_code, 0) << preset << " " << layout << "\n" << r.output;
      EXPECT_TRUE(has(r.output, "virtual engines")) << preset << " " << layout << "\n" << r.output;
      EXPECT_EQ(printed_token_ids(r.output), want) << preset << " " << layout << "\n" << r.output;
    }
  }
}

// Prefix caching on the engines: prompts P, Q, P, Q, one running sequence per engine, routed by
// prefix affinity (P's to one engine, Q's to the other), so each engine's second request resumes
// from a state snapshot its first one took, in its own snapshot entries, while the other engine's
// steps run beside it. The repeats hit the cache and print the single-rank tokens.
TEST_F(HybridParallelCli, VirtualPipelineEnginesResumeFromTheirOwnStateSnapshots) {
  const std::string p = "--prompt 'the quick brown fox jumps over the lazy dog while the cat sleeps on the warm "
                        "mat and the bird sings in the tall green tree by the river' ";
  const std::string q = "--prompt 'one two three four five six seven eight nine ten eleven twelve thirteen "
                        "fourteen fifteen sixteen seventeen eighteen nineteen twenty' ";
  const std::string json = (dir_ / "prefix.json").string();
  const std::string args = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --max-num-seqs 1 " +
                           "--long-prefill-token-threshold 8 --output-json " + json + " " + p + q + p + q +
                           "--generate-config '{\"max_tokens\": 8, \"temperature\": 0}'";
  auto results = [&](const std::string& extra) {
    const RunResult r = run(args + extra);
    EXPECT_EQ(r.exit_code, 0) << extra << "\n" << r.output;
    nlohmann::json out = nlohmann::json::parse(std::ifstream(json), nullptr, false);
    return out.is_discarded() ? nlohmann::json() : out["results"];
  };
  const nlohmann::json one = results("");
  ASSERT_EQ(one.size(), 4u);
  for (const char* backend : {"threads", "mp"}) {
    const nlohmann::json ve = results(std::string(" --pp 2 --devices 0,1 --pp-virtual-engines "
                                                  "--data-parallel-routing prefix_affinity "
                                                  "--distributed-executor-backend ") + backend);
    ASSERT_EQ(ve.size(), 4u) << backend;
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(ve[i]["token_ids"], one[i]["token_ids"]) << backend << " prompt " << i;
      if (i >= 2) EXPECT_GT(ve[i]["num_cached_tokens"].get<int>(), 0) << backend << " prompt " << i << ": a cache hit";
    }
  }
}

// n-gram speculation on the engines: repetitive prompts over both engines draft, the drafts are
// rejected, and each engine rolls back its sequences' states, kept with its own slots; the tokens
// are one rank's without speculation.
TEST_F(HybridParallelCli, VirtualPipelineEnginesRollTheirOwnStatesBack) {
  const std::string args = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 "
                           "--prompt 'one two three one two three one two three one two three' "
                           "--prompt 'one two three one two three one two three one two three four' "
                           "--prompt 'one two three one two three one two three one two' "
                           "--generate-config '{\"max_tokens\": 24, \"temperature\": 0}'";
  const RunResult one = run(args);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_FALSE(printed_token_ids(one.output).empty()) << one.output;
  const std::string spec = " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
                           "\"prompt_lookup_min\": 1, \"prompt_lookup_max\": 4, \"cost_model\": false}'";
  for (const char* backend : {"threads", "mp"}) {
    const RunResult r = run(args + spec + " --pp 2 --devices 0,1 --pp-virtual-engines --distributed-executor-backend " +
                            backend);
    ASSERT_EQ(r.exit_code, 0) << backend << "\n" << r.output;
    const auto sl = speculative_line(r.output);
    ASSERT_TRUE(sl) << backend << "\n" << r.output;
    EXPECT_GT(sl->draft_tokens, 0) << backend << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "x 2 virtual engines")) << backend << "\n" << r.output;  // the rollback states' log line
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(one.output)) << backend << "\n" << r.output;
  }
}

}  // namespace
