// --speculative-config method mtp on Qwen3-Next (Qwen3NextForCausalLM, make-test-model --preset
// tiny-next) through the real binary: its own MTP head (mtp.*, the same block as Qwen3.5-MoE's,
// per-expert tensors) drafts. On the always-accepting checkpoint (--mtp oracle) every greedy
// draft is accepted and the tokens printed are the plain run's, alone and batched, under "mtp" and
// the deprecated "qwen3_next_mtp" (with a warning); on the perturbed one (--mtp oracle-perturbed)
// only some drafts are accepted and the tokens are still the plain run's (also with chunked
// prefill). A config.json that asks
// for more than one MTP layer (num_nextn_predict_layers) is refused by name. (The head's logits
// against the PyTorch reference: tests/model/mtp_head_test.cpp, Qwen3NextHeadMatchesTheReference.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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

class Qwen3NextMtpCli : public pypto::test::CliTestModels<Qwen3NextMtpCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_next_mtp_cli_");
    for (const char* mtp : {"oracle", "oracle-perturbed"}) {
      pypto::TestModelOptions o;
      o.preset = "tiny-next";
      o.mtp = mtp;
      make_model(mtp, o);
    }
  }
  static std::string model(const char* mtp) { return (dir_ / mtp).string(); }
};

std::string spec(const char* method, int k) {
  return std::string(" --speculative-config '{\"method\": \"") + method + "\", \"num_speculative_tokens\": " +
         std::to_string(k) + ", \"cost_model\": false}'";
}

const std::string kOnePrompt = " --prompt 'the quick brown fox'";
const std::string kTwoPrompts = " --prompt 'the quick brown fox' --prompt 'one two three four five'";

std::string base(const std::string& model, const std::string& prompts, int max_tokens) {
  return "--model " + model + " --kv-cache-memory 16MiB --max-model-len 256" + prompts +
         " --generate-config '{\"max_tokens\": " + std::to_string(max_tokens) + ", \"temperature\": 0}'";
}

TEST_F(Qwen3NextMtpCli, OracleHeadHasEveryDraftAcceptedAloneAndBatched) {
  for (const std::string& prompts : {kOnePrompt, kTwoPrompts}) {
    SCOPED_TRACE(prompts);
    const std::string b = base(model("oracle"), prompts, 20);
    const RunResult plain = run(b);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
    for (const char* method : {"mtp", "qwen3_next_mtp"}) {
      const RunResult s = run(b + spec(method, 2));
      ASSERT_EQ(s.exit_code, 0) << s.output;
      EXPECT_EQ(printed_token_ids(s.output), printed_token_ids(plain.output)) << s.output;
      const auto sl = speculative_line(s.output);
      ASSERT_TRUE(sl) << s.output;
      EXPECT_GT(sl->draft_tokens, 0) << s.output;
      EXPECT_EQ(sl->accepted, sl->draft_tokens) << "an oracle draft was rejected\n" << s.output;
      EXPECT_EQ(has(s.output, "\"qwen3_next_mtp\" is deprecated"), std::string(method) != "mtp") << s.output;
    }
  }
}

// Also chunked: 5-token prefill chunks under an 8-token budget, prefix caching on.
TEST_F(Qwen3NextMtpCli, PerturbedHeadIsAcceptedInPartAndChangesNothing) {
  const std::string b = base(model("oracle-perturbed"),
                             " --prompt 'the quick brown fox jumps over the lazy dog and then some more words' "
                             "--prompt 'one two three four five six seven eight nine ten'",
                             24);
  const RunResult plain = run(b);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string chunked = " --max-num-seqs 2 --max-num-batched-tokens 8 --long-prefill-token-threshold 5 "
                              "--enable-chunked-prefill --enable-prefix-caching";
  for (const auto& [k, flags] : {std::pair<int, std::string>{1, ""}, {2, chunked}}) {
    SCOPED_TRACE("k = " + std::to_string(k) + flags);
    const RunResult s = run(b + flags + spec("mtp", k));
    ASSERT_EQ(s.exit_code, 0) << s.output;
    EXPECT_EQ(printed_token_ids(s.output), printed_token_ids(plain.output)) << s.output;
    const auto sl = speculative_line(s.output);
    ASSERT_TRUE(sl) << s.output;
    EXPECT_LT(sl->accepted, sl->draft_tokens) << "the perturbed head agreed everywhere\n" << s.output;
    if (k == 1) EXPECT_GT(sl->accepted, 0) << "no draft accepted: not a partial acceptance\n" << s.output;
  }
}

TEST_F(Qwen3NextMtpCli, MoreThanOneMtpLayerIsRefusedByName) {
  const fs::path copy = dir_ / "two-layers";
  fs::create_directories(copy);
  for (const auto& e : fs::directory_iterator(model("oracle"))) fs::copy(e.path(), copy / e.path().filename());
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(copy / "config.json"));
  cfg["num_nextn_predict_layers"] = 2;
  std::ofstream(copy / "config.json") << cfg.dump(2);
  const RunResult r = run(base(copy.string(), kOnePrompt, 4) + spec("mtp", 1));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "declares num_nextn_predict_layers 2; only 1")) << r.output;
}

// A target cut to one GDN layer (no KV layer of its own; the head's layer has one) runs MTP with
// a given --kv-cache-memory (it used to trip an assertion sizing a zero-byte block).
TEST_F(Qwen3NextMtpCli, AGdnOnlyCutRunsWithAGivenKvPool) {
  pypto::TestModelOptions o;
  o.preset = "tiny-next";
  o.layers = 1;
  o.mtp = "oracle";
  make_model("one-layer", o);
  const std::string b = base(model_path("one-layer"), kOnePrompt, 8);
  const RunResult plain = run(b);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const RunResult s = run(b + spec("mtp", 1));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(printed_token_ids(s.output), printed_token_ids(plain.output)) << s.output;
  const auto sl = speculative_line(s.output);
  ASSERT_TRUE(sl) << s.output;
  EXPECT_EQ(sl->accepted, sl->draft_tokens) << s.output;
}

// The MTP head's tensors are checked against config.json before staging, as the main stack's are:
// mtp.fc.weight stored [2H, H] instead of [H, 2H] (same bytes; the safetensors header rewritten)
// is refused naming the tensor and both shapes.
TEST_F(Qwen3NextMtpCli, AMisshapenMtpTensorIsRefusedByName) {
  const fs::path copy = dir_ / "misshapen";
  fs::create_directories(copy);
  for (const auto& e : fs::directory_iterator(model("oracle"))) fs::copy(e.path(), copy / e.path().filename());
  std::fstream f(copy / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  std::string header(n, '\0');
  f.read(header.data(), std::streamsize(n));
  const std::string from = "\"mtp.fc.weight\":{\"dtype\":\"BF16\",\"shape\":[64,128]";
  const size_t at = header.find(from);
  ASSERT_NE(at, std::string::npos) << header.substr(0, 400);
  header.replace(at, from.size(), "\"mtp.fc.weight\":{\"dtype\":\"BF16\",\"shape\":[128,64]");
  f.seekp(sizeof n);
  f.write(header.data(), std::streamsize(n));
  f.close();
  const std::string b = base(copy.string(), kOnePrompt, 4);
  const RunResult plain = run(b);  // the head is not staged without method mtp
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  const RunResult r = run(b + spec("mtp", 1));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "the MTP head (mtp.*) does not match config.json")) << r.output;
  EXPECT_TRUE(has(r.output, "mtp.fc.weight: shape [128, 64], expected [64, 128]")) << r.output;
}

}  // namespace
