// --per-request-spec-decode-stats over real HTTP (in-process server, the real Qwen3 tokenizer and
// chat template) on the fake paged model (tests/engine/fake_model.h) with n-gram speculation: each
// choice of /v1/completions and /v1/chat/completions carries speculative_decoding_stats, whose
// sums over several concurrent requests (streamed and not, n > 1) equal the engine's /metrics
// counters; streamed, the stats ride on each choice's last chunk only; detailed adds the per-step
// arrays; a choice that never verified a draft has zeros; without the option no choice has the
// field.
#include <gtest/gtest.h>

#include <httplib.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../engine/fake_model.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "serve/server.h"
#include "serve/sse.h"
#include "support/script_engine.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;
using testing::FakeModel;

constexpr int32_t kK = 3;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 256;

// n-gram drafts partly accepted and partly rejected.
constexpr FakeModel::Predictor mostly_copy = FakeModel::mostly_copy;

class FakeExec : public ModelExecutor {
 public:
  explicit FakeExec(int32_t vocab) : vocab_(vocab), model_(kNumBlocks, kBlockSize, vocab, mostly_copy) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = vocab_;
    out.logits = model_.execute_logits(so);
    out.step_seconds = -1;
  }

 private:
  int32_t vocab_;
  FakeModel model_;
};

// Reads `name{...} value` from a /metrics text (the one engine's series).
double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  const size_t sp = text.find("} ", at);
  return std::stod(text.substr(sp + 2));
}

struct Sums {
  int64_t steps = 0, drafted = 0, accepted = 0;
  void add(const ojson& s) {
    steps += s["num_spec_steps"].get<int64_t>();
    drafted += s["num_draft_tokens"].get<int64_t>();
    accepted += s["num_accepted_draft_tokens"].get<int64_t>();
  }
};

class SpecRequestStatsE2E : public ::testing::Test {
 protected:
  void start(SpecStatsLevel level) {
    tok_ = Tokenizer::load(testing::qwen3_tokenizer_dir());
    EngineConfig c;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_num_batched_tokens = 512;
    c.scheduler.long_prefill_token_threshold = 256;
    c.scheduler.max_model_len = 256;
    c.scheduler.speculative.method = SpeculativeMethod::Ngram;
    c.scheduler.speculative.num_speculative_tokens = kK;
    c.scheduler.speculative.prompt_lookup_min = 1;
    c.scheduler.speculative.prompt_lookup_max = 3;
    c.scheduler.speculative.cost_model = false;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = kNumBlocks;
    c.vocab_size = tok_->vocab_size();
    c.eos_token_ids = {*tok_->token_to_id("<|im_end|>")};
    loop_ = std::make_unique<EngineLoop>(std::make_unique<Engine>(c, std::make_unique<FakeExec>(tok_->vocab_size())));
    ServeContext ctx;
    ctx.engines = std::make_shared<LoopEngineClient>(std::vector<EngineLoop*>{loop_.get()});
    ctx.tokenizer = tok_;
    ctx.chat_template = load_chat_template(*tok_);
    ctx.model_config.vocab_size = tok_->vocab_size();
    ctx.model_config.eos_token_ids = c.eos_token_ids;
    ctx.max_model_len = 256;
    ctx.max_num_seqs = 8;
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "fake";
    o.per_request_spec_decode_stats = level;
    o.num_speculative_tokens = kK;
    server_ = std::make_unique<Server>(o);
    server_->start();
    server_->set_context(ctx);
  }
  void TearDown() override {
    if (server_) server_->stop(0);
    if (loop_) loop_->shutdown();
  }
  httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }
  // A non-streamed response's JSON, or a streamed one's SSE payloads (without [DONE]).
  std::vector<ojson> post(const std::string& path, const ojson& body) {
    httplib::Client c = client();
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    if (!body.value("stream", false)) return {ojson::parse(res->body)};
    SseParser p;
    std::vector<ojson> chunks;
    for (const std::string& e : p.feed(res->body))
      if (e != "[DONE]") chunks.push_back(ojson::parse(e));
    return chunks;
  }
  std::string metrics() {
    httplib::Client c = client();
    auto res = c.Get("/metrics");
    EXPECT_TRUE(res);
    return res ? res->body : std::string();
  }

  std::shared_ptr<const Tokenizer> tok_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<Server> server_;
};

const char* kPrompt = "one two three one two three one two three";

ojson completion(int max_tokens, bool stream, int n = 1) {
  return {{"prompt", kPrompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
          {"stream", stream}, {"n", n}};
}
ojson chat(int max_tokens, bool stream) {
  return {{"messages", ojson::array({{{"role", "user"}, {"content", kPrompt}}})}, {"max_tokens", max_tokens},
          {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

// Checks a streamed response: each choice's last chunk (the one with its finish_reason) has the
// stats and no other chunk has; returns them by choice index.
std::map<int, ojson> stats_of_stream(const std::vector<ojson>& chunks) {
  std::map<int, ojson> by_choice;
  for (const ojson& c : chunks)
    for (const ojson& ch : c["choices"]) {
      const int i = ch["index"].get<int>();
      const bool last = !ch["finish_reason"].is_null();
      EXPECT_EQ(ch.contains("speculative_decoding_stats"), last) << ch.dump();
      if (last) {
        EXPECT_FALSE(by_choice.count(i)) << "choice " << i << " finished twice";
        by_choice[i] = ch["speculative_decoding_stats"];
      }
    }
  return by_choice;
}

TEST_F(SpecRequestStatsE2E, ChoicesCarryStatsThatAddUpToTheEngineCounters) {
  start(SpecStatsLevel::Summary);
  std::mutex mu;
  std::vector<ojson> all;  // every choice's stats
  auto collect = [&](std::vector<ojson> got) {
    std::lock_guard lock(mu);
    for (ojson& s : got) all.push_back(std::move(s));
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {  // non-streamed completions, the first with n = 2
      const int n = i == 0 ? 2 : 1;
      const std::vector<ojson> r = post("/v1/completions", completion(30 + 5 * i, false, n));
      ASSERT_EQ(r.size(), 1u);
      ASSERT_EQ(r[0]["choices"].size(), size_t(n));
      std::vector<ojson> got;
      for (const ojson& ch : r[0]["choices"]) {
        EXPECT_TRUE(ch.contains("speculative_decoding_stats")) << ch.dump();
        got.push_back(ch["speculative_decoding_stats"]);
      }
      collect(std::move(got));
    });
  threads.emplace_back([&] {  // streamed completions, n = 2: each choice's own last chunk
    const std::map<int, ojson> s = stats_of_stream(post("/v1/completions", completion(28, true, 2)));
    EXPECT_EQ(s.size(), 2u);
    std::vector<ojson> got;
    for (const auto& [i, v] : s) got.push_back(v);
    collect(std::move(got));
  });
  threads.emplace_back([&] {  // chat, not streamed
    const std::vector<ojson> r = post("/v1/chat/completions", chat(32, false));
    ASSERT_EQ(r.size(), 1u);
    collect({r[0]["choices"][0]["speculative_decoding_stats"]});
  });
  threads.emplace_back([&] {  // chat, streamed
    const std::map<int, ojson> s = stats_of_stream(post("/v1/chat/completions", chat(26, true)));
    EXPECT_EQ(s.size(), 1u);
    std::vector<ojson> got;
    for (const auto& [i, v] : s) got.push_back(v);
    collect(std::move(got));
  });
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(all.size(), 8u);  // 2 + 1 + 1 completions, 2 streamed, 1 + 1 chat

  Sums sum;
  for (const ojson& s : all) {
    ASSERT_TRUE(s.is_object()) << s.dump();
    sum.add(s);
    EXPECT_EQ(s["num_spec_tokens"], kK);
    ASSERT_EQ(s["acceptance_histogram"].size(), size_t(kK) + 1) << s.dump();
    int64_t steps = 0, accepted = 0;
    for (size_t a = 0; a <= size_t(kK); ++a) {
      steps += s["acceptance_histogram"][a].get<int64_t>();
      accepted += int64_t(a) * s["acceptance_histogram"][a].get<int64_t>();
    }
    EXPECT_EQ(steps, s["num_spec_steps"].get<int64_t>()) << s.dump();
    EXPECT_EQ(accepted, s["num_accepted_draft_tokens"].get<int64_t>()) << s.dump();
    const double drafted = s["num_draft_tokens"].get<double>(), acc = s["num_accepted_draft_tokens"].get<double>();
    const double n_steps = s["num_spec_steps"].get<double>();
    EXPECT_DOUBLE_EQ(s["draft_acceptance_rate"].get<double>(), drafted > 0 ? acc / drafted : 0.0);
    EXPECT_DOUBLE_EQ(s["mean_acceptance_length"].get<double>(), n_steps > 0 ? 1.0 + acc / n_steps : 0.0);
    EXPECT_FALSE(s.contains("draft_tokens_per_step"));  // summary
  }
  const std::string m = metrics();
  EXPECT_EQ(sum.steps, int64_t(metric(m, "vllm:spec_decode_num_drafts_total"))) << m;
  EXPECT_EQ(sum.drafted, int64_t(metric(m, "vllm:spec_decode_num_draft_tokens_total"))) << m;
  EXPECT_EQ(sum.accepted, int64_t(metric(m, "vllm:spec_decode_num_accepted_tokens_total"))) << m;
  // The test means something: drafts were verified, some accepted and some rejected.
  EXPECT_GT(sum.accepted, 0);
  EXPECT_LT(sum.accepted, sum.drafted);
}

TEST_F(SpecRequestStatsE2E, DetailedAddsThePerStepCounts) {
  start(SpecStatsLevel::Detailed);
  for (bool stream : {false, true}) {
    const std::vector<ojson> r = post("/v1/completions", completion(30, stream));
    ojson s = stream ? stats_of_stream(r)[0] : r.at(0)["choices"][0]["speculative_decoding_stats"];
    ASSERT_TRUE(s.is_object()) << s.dump();
    const ojson& d = s["draft_tokens_per_step"];
    const ojson& a = s["accepted_draft_tokens_per_step"];
    ASSERT_EQ(d.size(), s["num_spec_steps"].get<size_t>()) << s.dump();
    ASSERT_EQ(a.size(), d.size()) << s.dump();
    int64_t ds = 0, as = 0;
    for (size_t j = 0; j < d.size(); ++j) {
      EXPECT_LE(a[j].get<int64_t>(), d[j].get<int64_t>());
      ds += d[j].get<int64_t>();
      as += a[j].get<int64_t>();
    }
    EXPECT_EQ(ds, s["num_draft_tokens"].get<int64_t>());
    EXPECT_EQ(as, s["num_accepted_draft_tokens"].get<int64_t>());
    EXPECT_GT(ds, 0);
  }
}

// max_tokens 2: the prefill's token, then one decode step with no room for a draft (the scheduler
// drafts at most max_tokens - output - 1): the field is there, with zeros.
TEST_F(SpecRequestStatsE2E, AChoiceThatNeverSpeculatedHasZeros) {
  start(SpecStatsLevel::Summary);
  for (bool stream : {false, true}) {
    const std::vector<ojson> r = post("/v1/completions", completion(2, stream));
    const ojson s = stream ? stats_of_stream(r)[0] : r.at(0)["choices"][0]["speculative_decoding_stats"];
    EXPECT_EQ(s.dump(), R"({"mean_acceptance_length":0.0,"draft_acceptance_rate":0.0,"acceptance_histogram":[0,0,0,0],)"
                        R"("num_spec_steps":0,"num_accepted_draft_tokens":0,"num_draft_tokens":0,"num_spec_tokens":3})");
  }
}

TEST_F(SpecRequestStatsE2E, WithoutTheOptionNoChoiceHasTheField) {
  start(SpecStatsLevel::None);
  for (bool stream : {false, true}) {
    for (const ojson& c : post("/v1/completions", completion(20, stream, 2)))
      for (const ojson& ch : c["choices"]) EXPECT_FALSE(ch.contains("speculative_decoding_stats")) << ch.dump();
    for (const ojson& c : post("/v1/chat/completions", chat(20, stream)))
      for (const ojson& ch : c["choices"]) EXPECT_FALSE(ch.contains("speculative_decoding_stats")) << ch.dump();
  }
  EXPECT_GT(metric(metrics(), "vllm:spec_decode_num_draft_tokens_total"), 0);  // it did speculate
}

}  // namespace
}  // namespace pypto
