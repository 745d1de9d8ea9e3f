// Pooling checkpoints (issue 32): Qwen3-Embedding's flat, headless layout and its
// sentence-transformers files (io/pooling_config.h, Checkpoint::headless), and Qwen3-Reranker
// through vLLM's --hf-overrides or --runner rerank.
#include <gtest/gtest.h>

#include "checkpoint_test_util.h"
#include "model/test_model_pooling.h"

namespace pypto::test {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PoolingCheckpoint, EmbeddingLayoutIsRecognised) {
  TestModelOptions opt;
  opt.preset = "tiny-embedding-untied";  // tie false and still no lm_head, as Qwen3-Embedding-8B
  const fs::path d = make_model_in_temp("embedding", opt);
  auto ck = Checkpoint::open(d.string());
  EXPECT_TRUE(ck->headless());
  EXPECT_NE(ck->find("model.layers.0.self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(ck->find("lm_head.weight"), nullptr);
  EXPECT_TRUE(ck->config().tie_word_embeddings);  // the table is the only copy
  EXPECT_EQ(ck->config().vocab_size, 151669);
  validate_qwen3_checkpoint(*ck);
  const PoolingConfig p = resolve_pooling(d.string(), ck->config(), ck->headless(), Runner::Auto);
  EXPECT_EQ(p.task, PoolingTask::Embed);
  EXPECT_TRUE(p.normalize);
  EXPECT_EQ(p.prompts.at("query"), kQwen3EmbeddingQueryPrompt);
  EXPECT_EQ(p.prompts.at("document"), "");
  EXPECT_NE(error_of([&] { resolve_pooling(d.string(), ck->config(), true, Runner::Generate); }).find("--runner pooling"),
            std::string::npos);

  // An unsupported pooling mode and an unknown module are refused naming the file.
  std::ofstream(d / "1_Pooling" / "config.json") << R"({"pooling_mode_mean_tokens": true, "pooling_mode_lasttoken": false})";
  std::string e = error_of([&] { resolve_pooling(d.string(), ck->config(), true, Runner::Auto); });
  EXPECT_NE(e.find("1_Pooling/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("pooling_mode_mean_tokens"), std::string::npos) << e;
  fs::remove(d / "1_Pooling" / "config.json");
  std::ofstream(d / "modules.json") << R"([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Dense"}])";
  e = error_of([&] { resolve_pooling(d.string(), ck->config(), true, Runner::Auto); });
  EXPECT_NE(e.find("sentence_transformers.models.Dense"), std::string::npos) << e;
  std::ofstream(d / "modules.json") << R"([{"type": "sentence_transformers.models.Transformer"}])";
  EXPECT_FALSE(resolve_pooling(d.string(), ck->config(), true, Runner::Auto).normalize);  // no Normalize module
  fs::remove_all(d);
}

TEST(PoolingCheckpoint, RerankerThroughOverridesOrRunnerRerank) {
  TestModelOptions opt;
  opt.preset = "tiny-reranker";
  const fs::path d = make_model_in_temp("reranker", opt);
  auto plain = Checkpoint::open(d.string());
  EXPECT_FALSE(plain->headless());
  EXPECT_EQ(resolve_pooling(d.string(), plain->config(), false, Runner::Auto).task, PoolingTask::None);  // a causal LM
  auto ck = Checkpoint::open(d.string(), hf_overrides_for_runner(Runner::Rerank, ""));
  const PoolingConfig p = resolve_pooling(d.string(), ck->config(), false, Runner::Rerank);
  EXPECT_EQ(p.task, PoolingTask::Score);
  EXPECT_EQ(p.classifier_from_token, (std::vector<std::string>{"no", "yes"}));
  auto vllm_form = Checkpoint::open(d.string(), kQwen3RerankerOverrides);
  EXPECT_EQ(resolve_pooling(d.string(), vllm_form->config(), false, Runner::Auto).task, PoolingTask::Score);
  EXPECT_EQ(resolve_pooling(d.string(), vllm_form->config(), false, Runner::Pooling).task, PoolingTask::Score);
  // A seq-cls config without the original-reranker flag is refused by name, as are conflicting
  // overrides.
  std::string e = error_of([&] {
    Checkpoint::open(d.string(), R"({"architectures": ["Qwen3ForSequenceClassification"]})");
  });
  EXPECT_NE(e.find("is_original_qwen3_reranker"), std::string::npos) << e;
  e = error_of([&] { hf_overrides_for_runner(Runner::Rerank, R"({"classifier_from_token": ["yes", "no"]})"); });
  EXPECT_NE(e.find("classifier_from_token"), std::string::npos) << e;
  EXPECT_EQ(parse_runner("pooling"), Runner::Pooling);
  EXPECT_NE(error_of([] { parse_runner("embed"); }).find("auto, generate, pooling, rerank"), std::string::npos);
  fs::remove_all(d);
}

}  // namespace
}  // namespace pypto::test
