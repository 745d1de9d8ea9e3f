// The server over a real (tiny, random-weight) Qwen3 checkpoint loaded by load_engine: greedy
// text over HTTP equals the engine's own greedy output for the same prompt, streaming equals
// non-streaming, and a chat request renders, runs and answers in the right shape.
#include <gtest/gtest.h>

#include <filesystem>

#include <httplib.h>

#include "engine/model_runner.h"
#include "parallel/replicas/load_replicas.h"
#include "model/test_model.h"
#include "serve/server.h"
#include "serve/sse.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

class RealModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() / ("pypto_serve_real_" + std::to_string(::getpid()))).string();
    TestModelOptions t;
    t.preset = "tiny";
    t.out_dir = dir_;
    t.show_progress = false;
    make_test_model(t);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  void SetUp() override {
    EngineLoadOptions o;
    o.model_dir = dir_;
    o.scheduler.max_num_seqs = 4;
    o.scheduler.max_model_len = 128;
    o.scheduler.max_num_batched_tokens = 256;
    o.scheduler.long_prefill_token_threshold = 64;
    o.kv_cache_memory = int64_t(64) << 20;
    o.threads = 2;
    o.show_progress = false;
    loaded_ = load_engine(o);
    ServeContext ctx;
    ctx.engines = std::make_shared<LoopEngineClient>(std::vector<EngineLoop*>{loaded_.loop.get()});
    ctx.tokenizer = Tokenizer::load(dir_);
    ctx.chat_template = load_chat_template(*ctx.tokenizer);
    ctx.model_config = loaded_.config;
    ctx.max_model_len = 128;
    ctx.max_num_seqs = 4;
    tokenizer_ = ctx.tokenizer;
    ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.model_dir = dir_;
    server_ = std::make_unique<Server>(so);
    server_->start();
    server_->set_context(ctx);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(120, 0);
  }
  void TearDown() override {
    server_->stop();
    loaded_.loop->shutdown();
  }

  // Greedy tokens straight from the engine loop.
  std::vector<int32_t> engine_greedy(const std::vector<int32_t>& prompt, int32_t max_tokens) {
    EngineRequest r;
    r.request_id = "direct";
    r.prompt_token_ids = prompt;
    r.params.temperature = 0;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    auto stream = loaded_.loop->add_request(r);
    std::vector<int32_t> out;
    while (auto o = stream->next()) out.insert(out.end(), o->new_token_ids.begin(), o->new_token_ids.end());
    return out;
  }

  static std::string dir_;
  LoadedEngine loaded_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

std::string RealModel::dir_;

TEST_F(RealModel, GreedyOverHttpEqualsTheEngine) {
  const std::string prompt = "The capital of France is";
  const std::vector<int32_t> ids = tokenizer_->encode(prompt, true);
  const std::vector<int32_t> direct = engine_greedy(ids, 12);
  ASSERT_EQ(direct.size(), 12u);
  const std::string expected = tokenizer_->decode(direct, true);

  const std::string model = std::filesystem::path(dir_).filename().string();
  ojson body = {{"model", model}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  auto res = client_->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  ojson j = ojson::parse(res->body);
  EXPECT_EQ(j["choices"][0]["text"], expected);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["usage"]["prompt_tokens"], ids.size());

  body["stream"] = true;
  std::string streamed;
  SseParser parser;
  auto sres = client_->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(sres);
  ASSERT_EQ(sres->status, 200);
  for (const std::string& e : parser.feed(sres->body))
    if (e != "[DONE]") streamed += ojson::parse(e)["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed, expected);
}

TEST_F(RealModel, ChatAnswersInShape) {
  ojson body = {{"messages", {{{"role", "user"}, {"content", "Hi there"}}}}, {"max_tokens", 8}, {"temperature", 0}};
  auto res = client_->Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  ojson j = ojson::parse(res->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["finish_reason"] == "length" || j["choices"][0]["finish_reason"] == "stop");
  EXPECT_GT(j["usage"]["prompt_tokens"].get<int64_t>(), 5);
}

}  // namespace
}  // namespace pypto
