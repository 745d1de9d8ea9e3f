// --kv-cache-dtype int8 / fp8 through the real binary on the tiny random-weight model: the pool
// holds about twice bf16's tokens in the same memory (`KV cache: ... M tokens`), tensor and
// pipeline parallel ranks print the same greedy tokens as the single rank with the same 8-bit
// cache, and a dtype we do not have is refused naming the allowed values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "model/test_model.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::RunResult;
using pypto::test::printed_token_ids;
using pypto::test::run;

class Kv8Cli : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_kv8_cli_" + std::to_string(getpid()));
    pypto::TestModelOptions o;
    o.preset = "tiny";
    o.out_dir = (dir_ / "tiny").string();
    o.show_progress = false;
    pypto::make_test_model(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "tiny").string(); }
};
fs::path Kv8Cli::dir_;


long long pool_tokens(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(KV cache: [^,]*, \d+ blocks, (\d+) tokens)")) ? std::stoll(m[1].str())
                                                                                                : -1;
}

TEST_F(Kv8Cli, EightBitCachesThroughEveryLayout) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three four five six' --generate-config '{\"max_tokens\": 12, \"temperature\": 0}' "
                           "--matmul-precision highest";
  const RunResult bf16 = run(base);
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  for (const char* kv : {"int8", "fp8", "fp8_e4m3"}) {
    const RunResult one = run(base + " --kv-cache-dtype " + kv);
    ASSERT_EQ(one.exit_code, 0) << kv << "\n" << one.output;
    ASSERT_FALSE(printed_token_ids(one.output).empty()) << one.output;
    // The tiny model's rows are 32 wide: 32 + 4 bytes against bf16's 64, 1.78x the tokens in the
    // same memory (1.94x at head_dim 128).
    EXPECT_GE(pool_tokens(one.output) * 100, pool_tokens(bf16.output) * 177) << kv << "\n" << one.output;
    for (const char* layout : {"--tp 2 --devices 0,1", "--pp 2 --devices 0,1"}) {
      const RunResult r = run(base + " --kv-cache-dtype " + kv + " " + layout);
      ASSERT_EQ(r.exit_code, 0) << kv << " " << layout << "\n" << r.output;
      EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(one.output)) << kv << " " << layout << "\n" << r.output;
    }
  }
}

TEST_F(Kv8Cli, UnknownDtypeIsRefusedNamingTheChoices) {
  const RunResult r = run("--model " + model() + " --kv-cache-dtype fp8_e5m2 --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--kv-cache-dtype"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("int8"), std::string::npos) << r.output;
}

}  // namespace
