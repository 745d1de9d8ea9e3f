// Offline mode end to end, through the real binary on a tiny random-weight model: flag errors,
// output format, and greedy ids that do not depend on batching, chunking or prefix caching.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "model/test_model.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::kBinary;
using pypto::test::RunResult;
using pypto::test::run;

class OfflineCli : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_cli_test_" + std::to_string(getpid()));
    pypto::TestModelOptions o;
    o.out_dir = (dir_ / "tiny").string();
    o.show_progress = false;
    pypto::make_test_model(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  std::string model() const { return (dir_ / "tiny").string(); }

  // Runs offline mode and returns the --output-json results.
  nlohmann::json generate(const std::string& args) {
    std::string json_path = (dir_ / "out.json").string();
    RunResult r = run("--model " + model() + " --kv-cache-memory 32MiB --output-json " + json_path + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream f(json_path);
    return nlohmann::json::parse(f);
  }
};
fs::path OfflineCli::dir_;

std::string prompts_args(int n) {
  // Mixed lengths: prompt i repeats a phrase i+1 times.
  std::string s;
  for (int i = 0; i < n; i++) {
    std::string p;
    for (int k = 0; k <= i; k++) p += "the quick brown fox " + std::to_string(k) + " ";
    s += " --prompt '" + p + "'";
  }
  return s;
}

}  // namespace

TEST_F(OfflineCli, RejectsBadGenerateConfig) {
  RunResult r = run("--model " + model() + " --prompt hi --generate-config '{\"max_new_token\": 3}'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--generate-config: unknown key 'max_new_token' (allowed: max_new_tokens,"), std::string::npos)
      << r.output;
  r = run("--model " + model() + " --prompt hi --generate-config '{\"max_new_tokens\": true}'");
  EXPECT_NE(r.output.find("--generate-config: 'max_new_tokens' must be an integer, got true"), std::string::npos)
      << r.output;
  r = run("--model " + model() + " --prompt hi --generate-config '{\"top_p\": 1.5}'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("top_p"), std::string::npos) << r.output;
}

TEST_F(OfflineCli, RejectsBadDeviceGroups) {
  RunResult r = run("--model " + model() + " --prompt hi --devices 0,1 --tp 2 --dp 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("lists 2 device(s) but --dp 2 x --tp 2 needs 4"), std::string::npos) << r.output;
  r = run("--model " + model() + " --prompt hi --devices 0,0 --tp 2");
  EXPECT_NE(r.output.find("device 0 is listed twice"), std::string::npos) << r.output;
  r = run("--model " + model() + " --prompt hi --devices 0,x --tp 2");
  EXPECT_NE(r.output.find("'x' is not a device id"), std::string::npos) << r.output;
}

TEST_F(OfflineCli, PrintsTheSeedsOutputFormat) {
  RunResult r = run("--model " + model() +
                    " --kv-cache-memory 16MiB --prompt 'Hello' --prompt 'World' --generate-config '{\"max_new_tokens\": 5, "
                    "\"temperature\": 0}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Generating 2 prompt(s): model="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-- prompt 1/2 --\ntext: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-- prompt 2/2 --\ntext: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("finish_reason: length"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[generate] 10 tokens in "), std::string::npos) << r.output;
}

TEST_F(OfflineCli, GreedyIdsDoNotDependOnBatchingChunkingOrPrefixCache) {
  const std::string cfg = " --generate-config '{\"max_new_tokens\": 12, \"temperature\": 0}'";
  const std::string target = prompts_args(6).substr(prompts_args(5).size());  // the 6th prompt alone
  nlohmann::json alone = generate(target + cfg);
  ASSERT_EQ(alone["results"].size(), 1u);
  const auto want = alone["results"][0]["token_ids"];
  ASSERT_EQ(want.size(), 12u);

  nlohmann::json batch = generate(prompts_args(16) + cfg);  // 16 mixed-length prompts
  ASSERT_EQ(batch["results"].size(), 16u);
  EXPECT_EQ(batch["results"][5]["token_ids"], want) << "batched with 15 others";

  nlohmann::json chunked = generate(prompts_args(16) + cfg + " --long-prefill-token-threshold 7");
  EXPECT_EQ(chunked["results"][5]["token_ids"], want) << "prompt split into 7-token chunks";

  nlohmann::json no_cache = generate(prompts_args(16) + cfg + " --no-enable-prefix-caching");
  EXPECT_EQ(no_cache["results"][5]["token_ids"], want) << "prefix caching off";

  // The same long prompt twice: the second copy hits the prefix cache once the first is done.
  nlohmann::json twice = generate(target + target + cfg + " --max-num-seqs 1");
  EXPECT_EQ(twice["results"][0]["token_ids"], want);
  EXPECT_EQ(twice["results"][1]["token_ids"], want) << "served from the prefix cache";
  EXPECT_GT(twice["results"][1]["num_cached_tokens"].get<int>(), 0) << "the second request must hit the cache";
}

// Every --matmul-precision level keeps a request's greedy ids independent of its batch and of
// how its prompt is chunked (each level uses one kernel order for every batch size); a level
// name outside the three is refused naming them.
// At every precision, on the per-CPU kernel and on each matrix kernel this CPU can run (so an AMX
// machine also shows the AVX-512 BF16 path a non-AMX machine takes, and the reverse is skipped
// there, saying why in the trace): a prompt's greedy ids are the same alone, in a batch of 16
// and in 5-token chunks.
TEST_F(OfflineCli, EveryMatmulPrecisionIsBatchInvariant) {
  const std::string target = prompts_args(6).substr(prompts_args(5).size());
  const pypto::CpuFeatures& f = pypto::cpu_features();
  std::vector<std::string> kernels = {"auto", "f32"};
  if (f.avx512f && f.avx512_bf16) kernels.push_back("bf16dot");
  if (pypto::amx_usable()) kernels.push_back("amx");
  std::vector<std::pair<std::string, std::string>> cases = {{"highest", "auto"}};
  for (const char* level : {"high", "medium"})
    for (const auto& k : kernels) cases.push_back({level, k});
  for (const auto& [level, kernel] : cases) {
    SCOPED_TRACE(level + " on " + kernel);
    const std::string cfg = " --matmul-precision " + level + " --cpu-linear-kernel " + kernel +
                            " --generate-config '{\"max_new_tokens\": 10, \"temperature\": 0}'";
    const auto want = generate(target + cfg)["results"][0]["token_ids"];
    ASSERT_EQ(want.size(), 10u);
    EXPECT_EQ(generate(prompts_args(16) + cfg)["results"][5]["token_ids"], want) << "batched with 15 others";
    EXPECT_EQ(generate(prompts_args(16) + cfg + " --long-prefill-token-threshold 5")["results"][5]["token_ids"], want)
        << "prompt split into 5-token chunks";
  }
  RunResult r = run("--model " + model() + " --prompt hi --matmul-precision low");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--matmul-precision"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("highest"), std::string::npos) << r.output;
}

// Quantized weights (--quantization int8 / int4: f32 activations at highest, bf16x2 at high, int8
// at medium): a
// prompt's greedy ids are the same alone, in a batch of 16 and in 7-token chunks; the start-up log
// names the format; a bad group size is refused naming the option.
TEST_F(OfflineCli, EveryQuantizationIsBatchInvariant) {
  const std::string target = prompts_args(6).substr(prompts_args(5).size());
  for (const char* quant : {"int8", "int4"})
    for (const char* level : {"highest", "high", "medium"}) {
      SCOPED_TRACE(std::string(quant) + " at " + level);
      const std::string cfg = std::string(" --quantization ") + quant + " --matmul-precision " + level +
                              " --generate-config '{\"max_new_tokens\": 10, \"temperature\": 0}'";
      RunResult alone = run("--model " + model() + " --kv-cache-memory 32MiB --output-json " + (dir_ / "q.json").string() +
                            target + cfg);
      ASSERT_EQ(alone.exit_code, 0) << alone.output;
      EXPECT_NE(alone.output.find(std::string("weights: ") + quant), std::string::npos) << alone.output;
      const auto want = nlohmann::json::parse(std::ifstream(dir_ / "q.json"))["results"][0]["token_ids"];
      ASSERT_EQ(want.size(), 10u);
      EXPECT_EQ(generate(prompts_args(16) + cfg)["results"][5]["token_ids"], want) << "batched with 15 others";
      EXPECT_EQ(generate(prompts_args(16) + cfg + " --long-prefill-token-threshold 7")["results"][5]["token_ids"], want)
          << "prompt split into 7-token chunks";
      // Tensor parallel: each rank's column slice holds the values of whole-row quantization, so
      // with f32 activations two ranks give one rank's ids (int8 activations are quantized per
      // rank slice, as each rank sees only its part of the row).
      if (std::string(level) == "highest")
        EXPECT_EQ(generate(target + cfg + " --devices 0,1 --tp 2")["results"][0]["token_ids"], want) << "--tp 2";
    }
  RunResult r = run("--model " + model() + " --prompt hi --quantization int4 --quantization-group 12");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--quantization-group"), std::string::npos) << r.output;
}

// Pre-quantized checkpoints (FP8 blocks, AWQ) from make-test-model: the same three ways give the
// same greedy ids at both activation modes; asking to quantize one again is refused naming the
// method found.
TEST_F(OfflineCli, PrequantizedCheckpointsAreBatchInvariant) {
  const std::string target = prompts_args(6).substr(prompts_args(5).size());
  for (const char* fmt : {"fp8", "awq"}) {
    const std::string dir = (dir_ / (std::string("tiny-") + fmt)).string();
    RunResult made = run(std::string("make-test-model --preset tiny --seed 2 --quant-format ") + fmt + " --out " + dir);
    ASSERT_EQ(made.exit_code, 0) << made.output;
    for (const char* level : {"highest", "high", "medium"}) {
      SCOPED_TRACE(std::string(fmt) + " at " + level);
      const std::string json = (dir_ / "pre.json").string();
      const std::string base = "--model " + dir + " --kv-cache-memory 32MiB --output-json " + json;
      const std::string cfg = std::string(" --matmul-precision ") + level +
                              " --generate-config '{\"max_new_tokens\": 10, \"temperature\": 0}'";
      auto ids = [&](const std::string& args, int i) {
        RunResult g = run(base + args + cfg);
        EXPECT_EQ(g.exit_code, 0) << g.output;
        EXPECT_NE(g.output.find(std::string("weights: ") + (fmt == std::string("fp8") ? "fp8" : "int4")), std::string::npos)
            << g.output;
        return nlohmann::json::parse(std::ifstream(json))["results"][i]["token_ids"];
      };
      const auto want = ids(target, 0);
      ASSERT_EQ(want.size(), 10u);
      EXPECT_EQ(ids(prompts_args(16), 5), want) << "batched with 15 others";
      EXPECT_EQ(ids(prompts_args(16) + " --long-prefill-token-threshold 7", 5), want) << "7-token chunks";
    }
    RunResult again = run("--model " + dir + " --prompt hi --quantization int8");
    EXPECT_NE(again.exit_code, 0);
    EXPECT_NE(again.output.find(std::string("already quantized (") + fmt), std::string::npos) << again.output;
  }
}

// Qwen3-MoE (tiny-moe: sparse layers 0 and 2, dense layer 1; 8 experts, top-2): a prompt's
// greedy ids are the same alone, in a batch of 16 (its tokens then share experts with other
// rows), in 7-token chunks, from the prefix cache, over two pipeline stages, from the compile
// cache and on two tensor-parallel ranks (every expert's columns split, or whole experts per rank
// with --enable-expert-parallel), with float and int8 experts. A TP split that would cut an int4
// group, and the flag on a model without experts, are refused naming what to do.
TEST_F(OfflineCli, MoeGreedyIdsDoNotDependOnBatchingChunkingOrPrefixCache) {
  const std::string dir = (dir_ / "tiny-moe").string();
  RunResult made = run("make-test-model --preset tiny-moe --seed 4 --out " + dir);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string target = prompts_args(6).substr(prompts_args(5).size());
  const std::string json = (dir_ / "moe.json").string();
  auto ids = [&](const std::string& args, size_t i) {
    RunResult g = run("--model " + dir + " --kv-cache-memory 32MiB --output-json " + json + args);
    EXPECT_EQ(g.exit_code, 0) << g.output;
    const auto results = nlohmann::json::parse(std::ifstream(json))["results"];
    return i < results.size() ? results[i]["token_ids"] : nlohmann::json();
  };
  for (const char* quant : {"none", "int8"}) {
    SCOPED_TRACE(std::string("--quantization ") + quant);
    const std::string cfg = std::string(" --quantization ") + quant +
                            " --generate-config '{\"max_new_tokens\": 12, \"temperature\": 0}'";
    const auto want = ids(target + cfg, 0);
    ASSERT_EQ(want.size(), 12u);
    EXPECT_EQ(ids(prompts_args(16) + cfg, 5), want) << "batched with 15 others";
    EXPECT_EQ(ids(prompts_args(16) + cfg + " --long-prefill-token-threshold 7", 5), want) << "7-token chunks";
    const auto twice = ids(target + target + cfg + " --max-num-seqs 1", 1);
    EXPECT_EQ(twice, want) << "served from the prefix cache";
    // Two pipeline stages (sparse layer 0 | dense 1, sparse 2), and the staged experts stored in
    // and then mapped back from the compile cache.
    EXPECT_EQ(ids(target + cfg + " --devices 0,1 --pp 2", 0), want) << "--pp 2";
    const std::string cc = " --use-compile-cache --compile-cache-dir " + (dir_ / "moe-cc").string();
    EXPECT_EQ(ids(target + cfg + cc, 0), want) << "compile cache: stored";
    EXPECT_EQ(ids(target + cfg + cc, 0), want) << "compile cache: mapped back";
    // Two ranks: each holds 64 of every expert's 128 columns, or experts 0-3 / 4-7 whole; the
    // partial sums meet in the all-reduce after the MLP (the 16-prompt batch routes to all 8).
    EXPECT_EQ(ids(target + cfg + " --devices 0,1 --tp 2", 0), want) << "--tp 2";
    EXPECT_EQ(ids(prompts_args(16) + cfg + " --devices 0,1 --tp 2 --enable-expert-parallel", 5), want)
        << "--tp 2 --enable-expert-parallel, batched with 15 others";
    EXPECT_EQ(ids(target + cfg + " --devices 0,1 --tp 2 --enable-expert-parallel" + cc, 0), want)
        << "--enable-expert-parallel through the compile cache (its own key)";
  }
  RunResult cut = run("--model " + dir + " --prompt hi --devices 0,1 --tp 2 --quantization int4 --quantization-group 128");
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.output.find("would hold 64 input columns (moe_intermediate_size 128 / 2), not a multiple of the int4 "
                            "group of 128 inputs; use --enable-expert-parallel"),
            std::string::npos)
      << cut.output;
  const std::string int4 = " --quantization int4 --quantization-group 32 --generate-config '{\"max_new_tokens\": 12, "
                           "\"temperature\": 0}'";
  EXPECT_EQ(ids(target + int4 + " --devices 0,1 --tp 2 --enable-expert-parallel", 0), ids(target + int4, 0))
      << "int4 experts, whole per rank";
  RunResult dense = run("--model " + model() + " --prompt hi --devices 0,1 --tp 2 --enable-expert-parallel");
  EXPECT_NE(dense.exit_code, 0);
  EXPECT_NE(dense.output.find("has no mixture-of-experts layers; leave the flag out"), std::string::npos) << dense.output;
}

TEST_F(OfflineCli, TinyKvPoolCompletesEveryRequestThroughPreemption) {
  // 16 blocks of 16 tokens: at most a couple of 60+-token sequences fit at once.
  const std::string cfg = " --generate-config '{\"max_new_tokens\": 24, \"temperature\": 0}'";
  nlohmann::json roomy = generate(prompts_args(16) + cfg);
  std::string json_path = (dir_ / "small.json").string();
  RunResult r = run("--model " + model() + " --kv-cache-memory 128KiB --max-model-len 200 --output-json " + json_path +
                    prompts_args(16) + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json small = nlohmann::json::parse(std::ifstream(json_path));
  ASSERT_EQ(small["results"].size(), 16u);
  for (int i = 0; i < 16; i++) {
    EXPECT_EQ(small["results"][i]["finish_reason"], "length") << i;
    EXPECT_EQ(small["results"][i]["token_ids"], roomy["results"][i]["token_ids"]) << "prompt " << i;
  }
}

TEST_F(OfflineCli, SeededSamplingReproduces) {
  const std::string cfg = " --generate-config '{\"max_new_tokens\": 16, \"temperature\": 1.0, \"seed\": 1234}'";
  nlohmann::json a = generate(" --prompt 'Once upon a time'" + cfg);
  nlohmann::json b = generate(prompts_args(4) + " --prompt 'Once upon a time'" + cfg);
  EXPECT_EQ(a["results"][0]["token_ids"], b["results"][4]["token_ids"]) << "same seed, different batch";
  nlohmann::json c = generate(" --prompt 'Once upon a time' --generate-config '{\"max_new_tokens\": 16, "
                              "\"temperature\": 1.0, \"seed\": 99}'");
  EXPECT_NE(a["results"][0]["token_ids"], c["results"][0]["token_ids"]) << "another seed differs";
}

// Data parallelism end to end: 8 prompts over --dp 2 give the single engine's greedy ids, and
// the router spreads them over both replicas (the offline summary reports the split).
TEST_F(OfflineCli, DataParallelTwoReplicasAnswerEveryPrompt) {
  const std::string cfg = " --generate-config '{\"max_new_tokens\": 10, \"temperature\": 0}'";
  nlohmann::json one = generate(prompts_args(8) + cfg);
  std::string json_path = (dir_ / "dp2.json").string();
  RunResult r = run("--model " + model() + " --kv-cache-memory 32MiB --devices 0,1 --dp 2 --output-json " + json_path +
                    prompts_args(8) + cfg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json two = nlohmann::json::parse(std::ifstream(json_path));
  ASSERT_EQ(two["results"].size(), 8u);
  for (int i = 0; i < 8; i++) EXPECT_EQ(two["results"][i]["token_ids"], one["results"][i]["token_ids"]) << i;
  // Equal-length-ish prompts under least_pending_tokens: both replicas get work.
  EXPECT_NE(r.output.find("[replica 1] "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[replica 0] 0 request"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[replica 1] 0 request"), std::string::npos) << r.output;
}
