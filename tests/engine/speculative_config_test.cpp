// --speculative-config parsing (engine/speculative_config.h): vLLM's keys and defaults, and a
// clear refusal naming the key for anything else.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "engine/speculative_config.h"
#include "io/model_config.h"

namespace pypto {
namespace {

std::string error_of(const std::string& json) {
  try {
    parse_speculative_config(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(SpeculativeConfig, EmptyIsOff) { EXPECT_FALSE(parse_speculative_config("").enabled()); }

TEST(SpeculativeConfig, NgramWithVllmDefaults) {
  SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 5})");
  EXPECT_EQ(c.method, SpeculativeMethod::Ngram);
  EXPECT_EQ(c.num_speculative_tokens, 5);
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})");
  EXPECT_EQ(c.prompt_lookup_min, 4);  // one given: the other copies it
  EXPECT_EQ(c.prompt_lookup_max, 4);
  c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4})");
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 4);
}

TEST(SpeculativeConfig, DraftModelIsInferredFromModel) {
  const SpeculativeConfig c =
      parse_speculative_config(R"({"model": "/m/qwen3-0.6b", "num_speculative_tokens": 4, "quantization": "int8"})");
  EXPECT_EQ(c.method, SpeculativeMethod::DraftModel);
  EXPECT_EQ(c.draft_model, "/m/qwen3-0.6b");
  EXPECT_EQ(c.draft_quantization, "int8");
}

TEST(SpeculativeConfig, CostModelKeyTakesABooleanForEveryMethod) {
  EXPECT_TRUE(parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2})").cost_model);
  EXPECT_FALSE(
      parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "cost_model": false})").cost_model);
  EXPECT_FALSE(parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2, "cost_model": false})").cost_model);
  EXPECT_FALSE(parse_speculative_config(R"({"model": "/m", "num_speculative_tokens": 2, "cost_model": false})").cost_model);
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "cost_model": "off"})"), "cost_model"));
}

TEST(SpeculativeConfig, BadInputIsRefusedByName) {
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 4})"),
                  "unknown key 'disable_by_batch_size'"));
  EXPECT_TRUE(has(error_of(R"({"method": "eagle", "num_speculative_tokens": 2})"),
                  "allowed methods: ngram, draft_model, mtp, eagle3"));
  EXPECT_TRUE(has(error_of(R"({"method": "eagle3", "num_speculative_tokens": 2})"), "method eagle3 needs 'model'"));
  EXPECT_TRUE(has(error_of(R"({"num_speculative_tokens": 2})"), "'method' is required"));
  EXPECT_TRUE(has(error_of(R"({"method": "ngram"})"), "'num_speculative_tokens'"));
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": 0})"), "[1, 16]"));
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": "3"})"), "must be an integer"));
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
                              "prompt_lookup_max": 2})"),
                  "'prompt_lookup_max' (2) must be >= 'prompt_lookup_min' (4)"));
  EXPECT_TRUE(has(error_of(R"({"method": "ngram", "num_speculative_tokens": 3, "model": "/x"})"),
                  "'model' is for method draft_model"));
  EXPECT_TRUE(has(error_of(R"({"model": "/x", "num_speculative_tokens": 3, "prompt_lookup_max": 2})"),
                  "'prompt_lookup_max' is for method ngram"));
  EXPECT_TRUE(has(error_of(R"({"model": "/x", "num_speculative_tokens": 3, "quantization": "fp8"})"),
                  "'quantization' must be one of none, int8, int4"));
  EXPECT_TRUE(has(error_of("[1]"), "--speculative-config"));
  EXPECT_TRUE(has(error_of("{"), "invalid JSON"));
}

// Hybrid targets speculate (their Gated DeltaNet state rolls back: model/gdn_rollback.h).
TEST(SpeculativeConfig, HybridTargetsAreAccepted) {
  ModelConfig target;
  target.arch = ModelArch::Qwen35;
  target.architecture = "Qwen3_5ForConditionalGeneration";
  const SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2})");
  EXPECT_NO_THROW(check_speculative_target(c, target, "/nonexistent"));
  target.arch = ModelArch::Qwen3;
  EXPECT_NO_THROW(check_speculative_target(c, target, "/nonexistent"));
}

// Method mtp: its names, its keys, and what the target's config.json must declare.
TEST(SpeculativeConfig, MtpIsParsedAndCheckedAgainstTheTarget) {
  for (const char* name : {"mtp", "qwen3_5_mtp", "qwen3_next_mtp"}) {
    const SpeculativeConfig c =
        parse_speculative_config(std::string(R"({"method": ")") + name + R"(", "num_speculative_tokens": 3})");
    EXPECT_EQ(c.method, SpeculativeMethod::Mtp) << name;
    EXPECT_EQ(c.num_speculative_tokens, 3);
  }
  EXPECT_TRUE(has(error_of(R"({"method": "mtp", "num_speculative_tokens": 2, "model": "/x"})"),
                  "'model' does not apply to method mtp"));
  EXPECT_TRUE(has(error_of(R"({"method": "mtp", "num_speculative_tokens": 17})"), "[1, 16]"));

  const SpeculativeConfig c = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2})");
  ModelConfig target;
  target.arch = ModelArch::Qwen3;
  target.architecture = "Qwen3ForCausalLM";
  auto error = [&](const std::string& dir) {
    try {
      check_speculative_target(c, target, dir);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_TRUE(has(error("/nonexistent"), "Qwen3ForCausalLM has none")) << error("/nonexistent");
  target.arch = ModelArch::Qwen35;
  target.architecture = "Qwen3_5ForConditionalGeneration";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("pypto-mtp-cfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto with = [&](const std::string& text_config) {
    std::ofstream(dir / "config.json") << R"({"text_config": )" << text_config << "}";
    return error(dir.string());
  };
  EXPECT_TRUE(has(with("{}"), "mtp_num_hidden_layers is absent")) << with("{}");
  EXPECT_TRUE(has(with(R"({"mtp_num_hidden_layers": 0})"), "mtp_num_hidden_layers is 0"));
  EXPECT_TRUE(has(with(R"({"mtp_num_hidden_layers": 2})"), "only 1"));
  EXPECT_TRUE(has(with(R"({"mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": true})"),
                  "mtp_use_dedicated_embeddings"));
  EXPECT_EQ(with(R"({"mtp_num_hidden_layers": 1})"), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pypto
