// The inputs of issue 28 against a real server over HTTP: a response_format schema nested 3,000
// levels deep through properties, one nested 10,000 levels through items, a body nested 100,000
// levels, a schema past kMaxSchemaDepth that fits the body limit, and the same as JSON text. Each
// used to overflow a request thread's stack and take the process down with every other client's
// stream; now each is a 400 naming its limit, and the server then serves a normal request.
#include <gtest/gtest.h>

#include <httplib.h>

#include "serve/server.h"
#include "structured/json_schema.h"
#include "support/script_engine.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

// Schemas built as text: nlohmann would copy (recursively) while building them.
std::string nested_properties(int levels) {
  std::string s = R"({"type":"integer"})";
  for (int i = 1; i < levels; ++i) s = R"({"type":"object","required":["a"],"properties":{"a":)" + s + "}}";
  return s;
}

std::string nested_items(int levels) {
  std::string open, close;
  for (int i = 1; i < levels; ++i) {
    open += R"({"type":"array","maxItems":1,"items":)";
    close += "}";
  }
  return open + R"({"type":"integer"})" + close;
}

std::string chat_with_schema(const std::string& schema) {
  return R"({"messages":[{"role":"user","content":"x"}],"max_tokens":4,"temperature":0,)"
         R"("response_format":{"type":"json_schema","json_schema":{"name":"deep","schema":)" +
         schema + "}}}";
}

class LimitsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = testing::make_script_engine(256, 4);
    ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.served_model_name = "qwen3-script";
    server_ = std::make_unique<Server>(o);
    server_->start();
    server_->set_context(engine_->context);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(60, 0);
  }
  void TearDown() override {
    if (server_) server_->stop(0);
    if (engine_) engine_->loop->shutdown();
  }

  // Posts `body`; expects `status` and, for an error, a message containing `needle`.
  ojson post(const std::string& path, const std::string& body, int status, const std::string& needle = "") {
    auto res = client_->Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(res) << "no reply: the server is down";
    if (!res) return {};
    EXPECT_EQ(res->status, status) << res->body.substr(0, 2000);
    ojson j = ojson::parse(res->body);
    if (!needle.empty()) {
      EXPECT_EQ(j["error"]["type"], "invalid_request_error");
      EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << j["error"]["message"];
      EXPECT_LT(res->body.size(), 4096u) << "the message should stay short";
    }
    return j;
  }

  std::unique_ptr<testing::ScriptEngine> engine_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(LimitsE2E, DeepInputsAre400sAndTheServerKeepsServing) {
  const char* chat = "/v1/chat/completions";
  post(chat, chat_with_schema(nested_properties(3000)), 400,
       "request body: nesting depth 6002 exceeds the limit of 256 (kMaxJsonDepth)");
  post(chat, chat_with_schema(nested_items(10000)), 400,
       "request body: nesting depth 10003 exceeds the limit of 256 (kMaxJsonDepth)");
  post("/v1/completions", std::string(100000, '[') + std::string(100000, ']'), 400,
       "request body: nesting depth 100000 exceeds the limit of 256 (kMaxJsonDepth)");
  // Within the body limit but past the schema's own: 200 levels of items are ~200 of JSON.
  ojson e = post(chat, chat_with_schema(nested_items(200)), 400,
                 "nesting depth 65 exceeds the limit of 64 (kMaxSchemaDepth)");
  EXPECT_EQ(e["error"]["param"], "response_format");
  // The schema as JSON text inside a string is checked like a body.
  ojson so = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
              {"structured_outputs", {{"json", nested_properties(3000)}}}};
  e = post(chat, so.dump(), 400, "structured_outputs.json: nesting depth 5999 exceeds the limit of 256 (kMaxJsonDepth)");
  EXPECT_EQ(e["error"]["param"], "structured_outputs.json");
  // A regex of 30,000 nested groups.
  so["structured_outputs"] = {{"regex", std::string(30000, '(') + "a" + std::string(30000, ')')}};
  post(chat, so.dump(), 400, "(kMaxRegexNesting)");

  // Just under the limits: accepted and generated (the grammar decides what the script model
  // may write).
  ojson ok = post(chat, chat_with_schema(nested_properties(structured::kMaxSchemaDepth)), 200);
  EXPECT_EQ(ok["choices"][0]["finish_reason"], "length");
  // And a plain request after all of it.
  ok = post("/v1/completions", R"({"prompt": "x", "max_tokens": 2, "temperature": 0})", 200);
  EXPECT_EQ(ok["choices"][0]["text"].get<std::string>().empty(), false);
}

}  // namespace
}  // namespace pypto
