// --tp and --pp with pooling models through the real binary (`embed` on the tiny embedding and
// reranker presets): the vectors and scores of --tp 2, --pp 2 and --pp 2 x --tp 2 against one
// rank's. A pipeline computes each layer exactly as one rank does, so --pp 2 is bit for bit; under
// --tp the all-reduce sums the ranks' partial products in another order, so the values agree
// within the project's TP tolerance (tests/parallel/tp_test.cpp: 1e-3 x max(1, |logit|); measured
// here: 3e-6 on the unit vectors, 1.1e-4 on logits near 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/test_model.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::RunResult;
using pypto::test::run;

class PoolingParallelCli : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_pool_par_cli_" + std::to_string(getpid()));
    for (const char* preset : {"tiny-embedding", "tiny-reranker"}) {
      pypto::TestModelOptions o;
      o.preset = preset;
      o.out_dir = (dir_ / preset).string();
      o.show_progress = false;
      pypto::make_test_model(o);
    }
    std::ofstream(dir_ / "texts.jsonl") << R"({"text": "Hello, world!"})" << '\n'
                                        << R"({"text": "What is the capital of China? Beijing is, and has been for centuries."})"
                                        << '\n'
                                        << R"({"token_ids": [9707, 11, 1879, 0, 42, 7]})" << '\n';
    std::ofstream(dir_ / "pairs.jsonl") << R"({"query": "what is panda?", "document": "The giant panda is a bear."})" << '\n'
                                        << R"({"query": "what is panda?", "document": "Paris is in France."})" << '\n';
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // `embed` with `flags`; each output line's "embedding" or [score, logit no, logit yes].
  static std::vector<std::vector<double>> embed(const char* preset, const std::string& flags) {
    static int n = 0;
    const bool rr = std::string(preset) == "tiny-reranker";
    const fs::path out = dir_ / ("out" + std::to_string(n++) + ".jsonl");
    const RunResult r = run("embed --model " + (dir_ / preset).string() + (rr && flags.find("--hf-overrides") == std::string::npos ? " --runner rerank --input " : " --input ") +
                            (dir_ / (rr ? "pairs.jsonl" : "texts.jsonl")).string() + " --out " + out.string() +
                            " --kv-cache-memory 32MiB --max-model-len 256 --threads 1 " + flags);
    EXPECT_EQ(r.exit_code, 0) << flags << "\n" << r.output;
    std::vector<std::vector<double>> rows;
    std::ifstream in(out);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (rr) rows.push_back({j["score"].get<double>(), j["logits"][0].get<double>(), j["logits"][1].get<double>()});
      else rows.push_back(j["embedding"].get<std::vector<double>>());
    }
    return rows;
  }
};
fs::path PoolingParallelCli::dir_;

// Same shape, every value within `tol` of one rank's (0: the same floats), and not all equal to
// each other (a constant output would pass any comparison).
void expect_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(want.empty()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << " row " << i;
    for (size_t k = 0; k < want[i].size(); ++k)
      if (tol == 0) EXPECT_EQ(got[i][k], want[i][k]) << what << " row " << i << " value " << k;
      else EXPECT_NEAR(got[i][k], want[i][k], tol) << what << " row " << i << " value " << k;
  }
  EXPECT_NE(want[0], want[1]) << what;
}

TEST_F(PoolingParallelCli, EmbeddingVectorsOfTpAndPpEqualOneRanks) {
  const auto one = embed("tiny-embedding", "");
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(one[0].size(), 64u);
  const auto tp = embed("tiny-embedding", "--tp 2 --devices 0,1");
  expect_close(tp, one, 1e-4, "--tp 2");
  for (size_t i = 0; i < one.size() && i < tp.size(); ++i) {  // the same direction: cosine of unit vectors
    double dot = 0;
    for (size_t k = 0; k < one[i].size(); ++k) dot += one[i][k] * tp[i][k];
    EXPECT_GT(dot, 1 - 1e-6) << "--tp 2 row " << i;
  }
  expect_close(embed("tiny-embedding", "--pp 2 --devices 0,1"), one, 0, "--pp 2");
  expect_close(embed("tiny-embedding", "--pp 2 --tp 2 --devices 0,1,2,3 --cpu-oversubscribe"), one, 1e-4, "--pp 2 --tp 2");
}

TEST_F(PoolingParallelCli, RerankerScoresOfTpAndPpEqualOneRanks) {
  const auto one = embed("tiny-reranker", "");
  ASSERT_EQ(one.size(), 2u);
  expect_close(embed("tiny-reranker", "--tp 2 --devices 0,1"), one, 1e-3, "--tp 2");
  expect_close(embed("tiny-reranker", "--pp 2 --devices 0,1"), one, 0, "--pp 2");
  // A head row in the second rank's vocabulary half (<|endoftext|> = 151643; yes and no are both
  // in the first): it is read from the rank that stages it.
  const std::string other =
      R"( --hf-overrides '{"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "<|endoftext|>"], "is_original_qwen3_reranker": true}')";
  const auto one_other = embed("tiny-reranker", other);
  ASSERT_EQ(one_other.size(), 2u);
  EXPECT_NE(one_other[0][2], one[0][2]) << "the override picked another head row";
  expect_close(embed("tiny-reranker", "--tp 2 --devices 0,1" + other), one_other, 1e-3, "--tp 2, row 151643");
}

// The rank-process backends do not carry pooling heads: a server asked for them refuses to start,
// naming the flag that works.
TEST_F(PoolingParallelCli, ProcessRanksAreRefusedNamingThreads) {
  const RunResult r = pypto::test::run_shell("timeout 120 " + pypto::test::kBinary + " --model " +
                                             (dir_ / "tiny-embedding").string() +
                                             " --port 0 --kv-cache-memory 32MiB --tp 2 --devices 0,1 "
                                             "--distributed-executor-backend mp");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--distributed-executor-backend threads"), std::string::npos) << r.output;
}

}  // namespace
