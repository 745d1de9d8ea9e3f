// Speculative decoding over the real Qwen3 forward pass (tiny random-weight checkpoint, CPU
// kernels): a request verifying k n-gram drafts computes k + 1 rows in the same batch as plain
// decodes and prefill chunks, and greedy output must equal the output without speculation token
// for token (the kernels are batch-invariant, so a row's logits do not depend on the rows beside
// it). Random weights rarely repeat themselves, so acceptance is forced where the test needs it:
// the prompt holds a copy of the model's own continuation (see PromptHoldingTheContinuation).
// Also: a draft model is checked against the target's vocabulary and tokenizer (the drafting
// itself: draft_model_runner_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "io/json_fields.h"
#include "io/model_config.h"
#include "model_harness.h"
#include "spec_engine_run.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;

test::LoadedModel& tiny_model() {
  static std::unique_ptr<test::LoadedModel> m =
      test::load_model(test::ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/false);
  return *m;
}

struct Setup {
  int32_t k = 0;  // 0: no speculation
  int64_t threshold = 2048;
  int64_t budget = 4096;
  int32_t num_blocks = 128;
};

struct Result {
  std::map<std::string, Ids> tokens;
  SpecDecodeStats stats;
  int64_t preemptions = 0;
};

Result run(const Setup& s, const std::vector<Ids>& prompts, int32_t max_tokens, const std::string& tag = "p") {
  Qwen3Model& model = *tiny_model().model;
  KvCache cache(model.kv_cache_spec(s.num_blocks, kBlockSize, DType::BF16));
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = s.budget;
  c.scheduler.long_prefill_token_threshold = s.threshold;
  c.scheduler.max_model_len = 512;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = s.num_blocks;
  c.vocab_size = model.vocab_size();
  if (s.k > 0) {
    c.scheduler.speculative.method = SpeculativeMethod::Ngram;
    c.scheduler.speculative.num_speculative_tokens = s.k;
    c.scheduler.speculative.cost_model = false;  // the mechanics, with every step drafting
    c.scheduler.speculative.prompt_lookup_min = 2;
    c.scheduler.speculative.prompt_lookup_max = 5;
  }
  Engine engine(c, std::make_unique<ModelRunner>(model, cache));
  Result out;
  out.tokens = test::run_spec_requests(engine, prompts, max_tokens, 0.0f, 0, tag).tokens;  // greedy
  out.stats = engine.scheduler().spec_decode_stats();
  out.preemptions = engine.scheduler().num_preemptions();
  return out;
}

// A prompt followed by the model's own greedy continuation and then the prompt again: after
// re-reading the prompt the model tends to continue as it did the first time, so n-gram drafts
// taken from the earlier copy are accepted (whether they are is up to the model; the test
// asserts that some are, which fixed random weights make deterministic).
std::vector<Ids> repeating_prompts(int n) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) {
    const Ids p = test::random_prompt(12 + 5 * i, uint64_t(300 + i));
    const Ids cont = run({}, {p}, 24).tokens.at("p0");
    Ids q = p;
    q.insert(q.end(), cont.begin(), cont.end());
    q.insert(q.end(), p.begin(), p.end());
    out.push_back(q);
  }
  return out;
}

TEST(SpecDecodeRunner, GreedyOutputIsUnchangedAndDraftsAreAccepted) {
  const std::vector<Ids> prompts = repeating_prompts(3);
  const Result plain = run({}, prompts, 24);
  const Result spec = run({.k = 4}, prompts, 24);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
  EXPECT_GT(spec.stats.num_accepted_tokens, 0) << "the accept path did not run";
}

TEST(SpecDecodeRunner, BatchedWithPlainRequestsAndChunkedPrefillIsUnchanged) {
  std::vector<Ids> prompts = repeating_prompts(2);
  for (int i = 0; i < 4; ++i) prompts.push_back(test::random_prompt(5 + 17 * i, uint64_t(400 + i)));
  const Result plain = run({}, prompts, 20);
  // Chunks of 7 tokens and a 40-token budget: verifies share steps with prompt chunks.
  const Result spec = run({.k = 3, .threshold = 7, .budget = 40}, prompts, 20);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
}

TEST(SpecDecodeRunner, PreemptionInASmallPoolIsUnchanged) {
  std::vector<Ids> prompts = repeating_prompts(2);
  prompts.push_back(test::random_prompt(30, 500));
  const Result plain = run({}, prompts, 24);
  const Result spec = run({.k = 4, .num_blocks = 10}, prompts, 24);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.preemptions, 0);  // 10 blocks of 16 tokens for three requests of 54-82 tokens
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
}

// A copy of the tiny test model's directory with `edit` applied to a file.
std::string edited_copy(const std::string& name, const std::string& file,
                        const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const std::string src = test::ensure_test_model("tiny", TestModelOptions{});
  const std::string dst = (fs::temp_directory_path() / ("pypto-spec-draft-" + name + "-" + std::to_string(::getpid()))).string();
  fs::remove_all(dst);
  fs::create_directories(dst);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(src + "/" + f, dst + "/" + f);
  nlohmann::json j = parse_json_object(read_text_file(dst + "/" + file), file);
  edit(j);
  std::ofstream(dst + "/" + file) << j.dump();
  return dst;
}

std::string draft_error(const std::string& draft_dir) {
  const std::string target = test::ensure_test_model("tiny", TestModelOptions{});
  const ModelConfig cfg = parse_model_config(read_text_file(target + "/config.json"), "config.json");
  SpeculativeConfig spec;
  spec.method = SpeculativeMethod::DraftModel;
  spec.num_speculative_tokens = 3;
  spec.cost_model = false;
  spec.draft_model = draft_dir;
  try {
    check_speculative_target(spec, cfg, target);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SpecDecodeRunner, ADraftWithAnotherVocabularyOrTokenizerIsRefusedNamingTheDifference) {
  const std::string vocab = edited_copy("vocab", "config.json", [](nlohmann::json& j) { j["vocab_size"] = 152064; });
  EXPECT_NE(draft_error(vocab).find("has vocab_size 152064, the target has 151936"), std::string::npos)
      << draft_error(vocab);
  const std::string tok = edited_copy("tok", "tokenizer.json", [](nlohmann::json& j) {
    auto& v = j["model"]["vocab"];
    std::swap(v["hello"], v["world"]);
  });
  EXPECT_NE(draft_error(tok).find("\"hello\" has id"), std::string::npos) << draft_error(tok);
  // The same vocabulary and tokenizer: accepted.
  const std::string same = edited_copy("same", "config.json", [](nlohmann::json&) {});
  EXPECT_EQ(draft_error(same), "");
  for (const std::string& d : {vocab, tok, same}) std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace pypto
