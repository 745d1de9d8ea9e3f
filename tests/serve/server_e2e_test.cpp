// End-to-end over real HTTP on 127.0.0.1: the server in-process, the scripted stand-in model
// behind a real EngineLoop, the real Qwen3 tokenizer and chat template. Raw sockets for
// streaming and disconnects, httplib's client for the rest.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <thread>

#include <httplib.h>

#include "serve/server.h"
#include "serve/server_state.h"
#include "serve/sse.h"
#include "support/script_engine.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;
using testing::make_script_engine;
using testing::ScriptEngine;

struct HttpReply {
  int status = 0;
  std::string headers;
  std::string body;  // de-chunked
  std::vector<std::string> events;  // SSE data payloads
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string request_text(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n" +
         extra + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    off += size_t(n);
  }
}

HttpReply parse_reply(const std::string& raw) {
  HttpReply r;
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  r.headers = raw.substr(0, end);
  r.status = std::atoi(raw.c_str() + 9);
  std::string rest = raw.substr(end + 4);
  if (r.headers.find("Transfer-Encoding: chunked") != std::string::npos) {
    size_t pos = 0;
    for (;;) {
      const size_t nl = rest.find("\r\n", pos);
      if (nl == std::string::npos) break;
      const size_t len = std::stoul(rest.substr(pos, nl - pos), nullptr, 16);
      if (len == 0) break;
      r.body += rest.substr(nl + 2, len);
      pos = nl + 2 + len + 2;
    }
  } else {
    r.body = rest;
  }
  SseParser p;
  r.events = p.feed(r.body);
  return r;
}

// A whole request over a fresh connection, read to EOF.
HttpReply raw_post(int port, const std::string& path, const std::string& body, const std::string& extra = "") {
  const int fd = connect_to(port);
  send_all(fd, request_text(path, body, extra));
  std::string raw;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, size_t(n));
  }
  ::close(fd);
  return parse_reply(raw);
}

class ServeE2E : public ::testing::Test {
 protected:
  void start(ServerOptions o = {}, int64_t max_model_len = 256, int32_t max_num_seqs = 4) {
    engine_ = make_script_engine(max_model_len, max_num_seqs);
    o.host = "127.0.0.1";
    o.port = 0;
    if (o.served_model_name.empty()) o.served_model_name = "qwen3-script";
    server_ = std::make_unique<Server>(o);
    server_->start();
    server_->set_context(engine_->context);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(30, 0);
  }
  void TearDown() override {
    if (server_) server_->stop(0);
    if (engine_) engine_->loop->shutdown();
  }

  ojson post_json(const std::string& path, const ojson& body, int expect_status = 200) {
    auto res = client_->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expect_status) << res->body;
    return ojson::parse(res->body);
  }
  void expect_error(const std::string& path, const std::string& body, int status, const std::string& message,
                    const ojson& param = nullptr, const ojson& code = nullptr) {
    auto res = client_->Post(path.c_str(), body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    ojson j = ojson::parse(res->body);
    ASSERT_TRUE(j.contains("error")) << res->body;
    EXPECT_EQ(j["error"]["message"], message);
    EXPECT_EQ(j["error"]["param"], param);
    EXPECT_EQ(j["error"]["code"], code);
    EXPECT_TRUE(j["error"]["type"].is_string());
  }
  std::string script_text(size_t n = SIZE_MAX) {
    std::vector<int32_t> ids = engine_->script;
    if (n < ids.size()) ids.resize(n);
    return engine_->context.tokenizer->decode(ids, true);
  }
  int64_t count_tokens(const std::string& text) { return int64_t(engine_->context.tokenizer->encode(text).size()); }
  // Waits (bounded) until the engine holds no request.
  bool engine_idle() {
    for (int i = 0; i < 500; ++i) {
      if (engine_->loop->num_active_requests() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::unique_ptr<ScriptEngine> engine_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServeE2E, HealthModelsVersionMetrics) {
  Server loading(ServerOptions{.host = "127.0.0.1", .port = 0});
  loading.start();
  httplib::Client c("127.0.0.1", loading.port());
  c.set_read_timeout(30, 0);  // httplib's 5 s default runs out on a loaded CI machine
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);  // no model yet
  auto gen = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
  ASSERT_TRUE(gen);
  EXPECT_EQ(gen->status, 503);
  loading.stop();

  start();
  h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(ojson::parse(h->body)["status"], "ok");
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m);
  ojson models = ojson::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "qwen3-script");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);
  auto v = client_->Get("/version");
  ASSERT_TRUE(v);
  EXPECT_TRUE(ojson::parse(v->body)["version"].is_string());
  auto mt = client_->Get("/metrics");
  ASSERT_TRUE(mt);
  EXPECT_EQ(mt->status, 200);
  for (const char* name : {"vllm:num_requests_running{model_name=\"qwen3-script\",engine=\"0\"} 0",
                           "vllm:num_requests_waiting{", "vllm:prompt_tokens_total{", "vllm:generation_tokens_total{",
                           "vllm:request_success_total{model_name=\"qwen3-script\",engine=\"0\",finished_reason=\"stop\"} 0",
                           "vllm:time_to_first_token_seconds_bucket{", "vllm:inter_token_latency_seconds_bucket{",
                           "vllm:e2e_request_latency_seconds_count{", "vllm:kv_cache_usage_perc{",
                           "vllm:num_preemptions_total{", "vllm:prefix_cache_queries_total{",
                           "vllm:prefix_cache_hits_total{", "pypto:state_snapshot_restores_total{",
                           "vllm:request_queue_time_seconds_count{model_name=\"qwen3-script\",engine=\"0\"} 0",
                           "vllm:request_prefill_time_seconds_bucket{", "vllm:request_decode_time_seconds_sum{",
                           "vllm:request_inference_time_seconds_count{",
                           "vllm:request_time_per_output_token_seconds_bucket{"})
    EXPECT_NE(mt->body.find(name), std::string::npos) << name;
  for (const char* name : {"time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                           "request_queue_time_seconds", "request_prefill_time_seconds", "request_decode_time_seconds",
                           "request_inference_time_seconds", "request_time_per_output_token_seconds"})
    EXPECT_NE(mt->body.find(std::string("# TYPE vllm:") + name + " histogram\n"), std::string::npos) << name;
  auto nf = client_->Get("/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(ojson::parse(nf->body)["error"]["message"], "no endpoint GET /nope");
}

// One kept-alive connection serves 1000 requests (nginx's keepalive_requests default) before the
// server closes it, not a handful.
TEST_F(ServeE2E, KeepsAConnectionForAThousandRequests) {
  start();
  const int fd = connect_to(server_->port());
  std::string buf;
  char chunk[4096];
  for (int i = 1; i <= 1000; ++i) {
    send_all(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    size_t end;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      ASSERT_GT(n, 0) << "connection closed after " << i - 1 << " requests";
      buf.append(chunk, size_t(n));
    }
    const std::string headers = buf.substr(0, end);
    ASSERT_EQ(headers.rfind("HTTP/1.1 200", 0), 0u) << headers;
    const size_t cl = headers.find("Content-Length: ");
    ASSERT_NE(cl, std::string::npos) << headers;
    const size_t body = size_t(std::stoul(headers.substr(cl + 16)));
    while (buf.size() < end + 4 + body) {
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      ASSERT_GT(n, 0);
      buf.append(chunk, size_t(n));
    }
    buf.erase(0, end + 4 + body);
    ASSERT_EQ(headers.find("Connection: close") != std::string::npos, i == 1000) << "request " << i << "\n" << headers;
  }
  ::close(fd);
}

TEST_F(ServeE2E, CompletionGreedyFollowsTheScript) {
  start();
  ojson r = post_json("/v1/completions", {{"model", "qwen3-script"}, {"prompt", "Say hi"}, {"max_tokens", 100},
                                          {"temperature", 0}});
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["model"], "qwen3-script");
  EXPECT_TRUE(r["id"].get<std::string>().starts_with("cmpl-"));
  EXPECT_TRUE(r["created"].is_number_integer());
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["index"], 0);
  EXPECT_EQ(r["choices"][0]["text"], script_text());
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");  // eos
  EXPECT_EQ(r["choices"][0]["logprobs"], nullptr);
  EXPECT_EQ(r["usage"]["prompt_tokens"], count_tokens("Say hi"));
  EXPECT_EQ(r["usage"]["completion_tokens"], int64_t(engine_->script.size()) + 1);  // + eos
  EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int64_t>() + int64_t(engine_->script.size()) + 1);

  ojson cut = post_json("/v1/completions", {{"prompt", "Say hi"}, {"max_tokens", 5}, {"temperature", 0}});
  EXPECT_EQ(cut["choices"][0]["text"], script_text(5));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(cut["usage"]["completion_tokens"], 5);

  // Token-id prompts, several prompts, echo.
  ojson multi = post_json("/v1/completions", {{"prompt", {{1, 2, 3}, {4, 5}}}, {"max_tokens", 3}, {"temperature", 0},
                                              {"n", 2}});
  ASSERT_EQ(multi["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(multi["choices"][i]["index"], i);
    EXPECT_EQ(multi["choices"][i]["text"], script_text(3));
  }
  EXPECT_EQ(multi["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(multi["usage"]["completion_tokens"], 12);
  ojson echo = post_json("/v1/completions", {{"prompt", "Echo me"}, {"max_tokens", 2}, {"echo", true}, {"temperature", 0}});
  EXPECT_EQ(echo["choices"][0]["text"], "Echo me" + script_text(2));
}

TEST_F(ServeE2E, StopStringsAndStopTokens) {
  start();
  ojson r = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100}, {"temperature", 0}, {"stop", {"tiny"}}});
  const std::string full = script_text();
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find("tiny")));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  // n = 2 (one engine request, two sequences): each sequence stops on its own.
  ojson two = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100}, {"temperature", 0}, {"n", 2},
                                            {"stop", {"tiny"}}});
  ASSERT_EQ(two["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(two["choices"][i]["text"], full.substr(0, full.find("tiny")));
    EXPECT_EQ(two["choices"][i]["finish_reason"], "stop");
  }
  EXPECT_TRUE(engine_idle());
  // A stop token ends the text before it (and is counted).
  const int32_t third = engine_->script[2];
  ojson t = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 100}, {"temperature", 0},
                                          {"stop_token_ids", {third}}});
  EXPECT_EQ(t["choices"][0]["text"], script_text(2));
  EXPECT_EQ(t["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(t["usage"]["completion_tokens"], 3);
}

// vLLM's request_id names the response (non-streaming and every streamed chunk); the engine keeps
// its own ids, so two requests in flight with the same request_id both complete, each with its
// own text.
TEST_F(ServeE2E, RequestIdNamesTheResponse) {
  start();
  ojson r = post_json("/v1/completions", {{"prompt", "Say hi"}, {"max_tokens", 4}, {"temperature", 0},
                                          {"request_id", "job-7"}});
  EXPECT_EQ(r["id"], "cmpl-job-7");
  EXPECT_EQ(r["choices"][0]["text"], script_text(4));
  const ojson msgs = ojson::array({{{"role", "user"}, {"content", "hi"}}});
  std::vector<HttpReply> reps(2);
  std::vector<std::thread> th;
  for (int i = 0; i < 2; ++i)
    th.emplace_back([&, i] {
      reps[size_t(i)] = raw_post(server_->port(), "/v1/chat/completions",
                                 ojson{{"messages", msgs}, {"max_tokens", 3 + i}, {"temperature", 0}, {"stream", true},
                                       {"request_id", "same"}}
                                     .dump());
    });
  for (auto& t : th) t.join();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(reps[size_t(i)].status, 200);
    ASSERT_GE(reps[size_t(i)].events.size(), 3u);
    std::string text;
    for (size_t e = 0; e + 1 < reps[size_t(i)].events.size(); ++e) {
      const ojson c = ojson::parse(reps[size_t(i)].events[e]);
      EXPECT_EQ(c["id"], "chatcmpl-same");
      for (const char* k : {"reasoning_content", "content"})
        if (c["choices"][0]["delta"].contains(k) && c["choices"][0]["delta"][k].is_string())
          text += c["choices"][0]["delta"][k].get<std::string>();
    }
    // What the same request gives alone (no request_id): each stream carried its own tokens.
    const ojson alone = post_json("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 3 + i}, {"temperature", 0}});
    const ojson& m = alone["choices"][0]["message"];
    EXPECT_EQ(text, (m["reasoning_content"].is_string() ? m["reasoning_content"].get<std::string>() : "") +
                        (m["content"].is_string() ? m["content"].get<std::string>() : ""))
        << "request " << i;
  }
  expect_error("/v1/completions", R"({"prompt": "x", "request_id": ""})", 400,
               "'request_id' must be a string of 1 to 256 characters, got \"\"", "request_id");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "request_id": 5})", 400,
               "'request_id' must be a string of 1 to 256 characters, got 5", "request_id");
}

TEST_F(ServeE2E, CompletionStreamMatchesNonStreaming) {
  start();
  HttpReply rep = raw_post(server_->port(), "/v1/completions",
                           R"({"prompt": "x", "max_tokens": 100, "temperature": 0, "stream": true,
                               "stream_options": {"include_usage": true}, "stop": ["Goodbye"]})");
  ASSERT_EQ(rep.status, 200);
  EXPECT_NE(rep.headers.find("Content-Type: text/event-stream"), std::string::npos);
  ASSERT_GE(rep.events.size(), 4u);
  EXPECT_EQ(rep.events.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < rep.events.size(); ++i) {
    ojson c = ojson::parse(rep.events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());
    ASSERT_EQ(c["choices"].size(), 1u);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) {
      EXPECT_EQ(i + 3, rep.events.size()) << "finish_reason must be on the last choice chunk";
      finish = c["choices"][0]["finish_reason"];
    }
  }
  const std::string full = script_text();
  EXPECT_EQ(text, full.substr(0, full.find("Goodbye")));
  EXPECT_EQ(finish, "stop");
  ojson usage = ojson::parse(rep.events[rep.events.size() - 2]);
  EXPECT_EQ(usage["choices"], ojson::array());
  EXPECT_GT(usage["usage"]["completion_tokens"].get<int64_t>(), 0);

  // Without include_usage: no usage chunk and no usage key.
  HttpReply plain = raw_post(server_->port(), "/v1/completions",
                             R"({"prompt": "x", "max_tokens": 3, "temperature": 0, "stream": true})");
  ASSERT_EQ(plain.status, 200);
  for (size_t i = 0; i + 1 < plain.events.size(); ++i) {
    ojson c = ojson::parse(plain.events[i]);
    EXPECT_FALSE(c.contains("usage"));
    EXPECT_EQ(c["choices"].size(), 1u);
  }
}

TEST_F(ServeE2E, ChatReasoningSplit) {
  start();
  const ojson msgs = ojson::array({{{"role", "user"}, {"content", "hi"}}});
  ojson r = post_json("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 100}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_TRUE(r["id"].get<std::string>().starts_with("chatcmpl-"));
  ojson msg = r["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], "The user greets me.\n");
  EXPECT_EQ(msg["content"], "Hello! I am a tiny test model. 你好，世界。 Goodbye.");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");

  // enable_thinking=false: the template closes the block, so the output is all content.
  ojson off = post_json("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 100}, {"temperature", 0},
                                                 {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(off["choices"][0]["message"]["content"], script_text());
  EXPECT_EQ(off["choices"][0]["message"]["reasoning_content"], nullptr);

  // Streaming: role chunk first, reasoning and content deltas add up to the same split.
  HttpReply rep = raw_post(server_->port(), "/v1/chat/completions",
                           ojson{{"messages", msgs}, {"max_tokens", 100}, {"temperature", 0}, {"stream", true},
                                 {"stream_options", {{"include_usage", true}}}}
                               .dump());
  ASSERT_EQ(rep.status, 200);
  ASSERT_GE(rep.events.size(), 5u);
  ojson first = ojson::parse(rep.events[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, content, finish;
  for (size_t i = 1; i + 2 < rep.events.size(); ++i) {
    ojson d = ojson::parse(rep.events[i])["choices"][0];
    EXPECT_FALSE(d["delta"].contains("reasoning_content") && d["delta"].contains("content")) << rep.events[i];
    reasoning += d["delta"].value("reasoning_content", "");
    content += d["delta"].value("content", "");
    if (!d["finish_reason"].is_null()) finish = d["finish_reason"];
  }
  EXPECT_EQ(reasoning, "The user greets me.\n");
  EXPECT_EQ(content, "Hello! I am a tiny test model. 你好，世界。 Goodbye.");
  EXPECT_EQ(finish, "stop");
  ojson usage = ojson::parse(rep.events[rep.events.size() - 2]);
  EXPECT_EQ(usage["usage"]["completion_tokens"], int64_t(engine_->script.size()) + 1);
  EXPECT_EQ(rep.events.back(), "[DONE]");
}

TEST_F(ServeE2E, SeededSamplingIsReproducibleAndNGivesIndexedChoices) {
  start();
  ojson body = {{"prompt", "x"}, {"max_tokens", 20}, {"temperature", 1.5}, {"seed", 7}, {"n", 3}};
  ojson a = post_json("/v1/completions", body);
  ojson b = post_json("/v1/completions", body);
  ASSERT_EQ(a["choices"].size(), 3u);
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a["choices"][i]["index"], i);
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]);
    distinct.insert(a["choices"][i]["text"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u) << "sequences of one request draw from seed + k";
}

TEST_F(ServeE2E, Logprobs) {
  start();
  ojson c = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 2}});
  ojson lp = c["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["token_logprobs"].size(), 4u);
  EXPECT_EQ(lp["top_logprobs"].size(), 4u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
  EXPECT_LE(lp["top_logprobs"][0].size(), 2u);
  std::string joined;
  for (auto& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, c["choices"][0]["text"]);

  ojson chat = post_json("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                                  {"max_tokens", 3}, {"temperature", 0}, {"logprobs", true},
                                                  {"top_logprobs", 2}});
  ojson content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 3u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
}

TEST_F(ServeE2E, ErrorsAreOpenAIObjectsAndTheServerGoesOn) {
  ServerOptions o;
  o.max_body_bytes = 4096;
  start(o, 64);
  expect_error("/v1/completions", "{not json", 400,
               "the request body is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 3: "
               "syntax error while parsing object key - invalid literal; last read: '{no'; expected string literal");
  expect_error("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})", 404,
               "The model `gpt-4` does not exist. This server serves `qwen3-script`.", "model", "model_not_found");
  expect_error("/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400,
               "'temperature' must be a number, got string", "temperature");
  expect_error("/v1/completions", R"({"prompt": ""})", 400, "'prompt' is empty", "prompt");
  std::string long_prompt;
  for (int i = 0; i < 70; ++i) long_prompt += " hello";
  const int64_t n = count_tokens(long_prompt);
  expect_error("/v1/completions", ojson{{"prompt", long_prompt}, {"max_tokens", 5}}.dump(), 400,
               "This model's maximum context length is 64 tokens. However, your prompt has " + std::to_string(n) +
                   " tokens, which leaves no room for the completion (max_tokens 5). Please shorten the prompt.",
               "prompt", "context_length_exceeded");
  expect_error("/v1/completions", R"({"prompt": "hello", "max_tokens": 100})", 400,
               "This model's maximum context length is 64 tokens. However, you requested 101 tokens (1 in the prompt, "
               "100 for the completion). Please reduce the prompt or max_tokens.",
               "prompt", "context_length_exceeded");
  // Streaming requests are validated before the stream opens: a real 400, not an SSE error.
  HttpReply s = raw_post(server_->port(), "/v1/completions",
                         ojson{{"prompt", long_prompt}, {"stream", true}}.dump());
  EXPECT_EQ(s.status, 400);
  EXPECT_EQ(ojson::parse(s.body)["error"]["code"], "context_length_exceeded");
  expect_error("/v1/completions", R"({"prompt": [1, 999999]})", 400,
               "'prompt' has token id 999999: allowed 0 <= id < vocab size 151669", "prompt");
  expect_error("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "stop_token_ids": [999999]})",
               400, "sampling parameter 'stop_token_ids' has token id 999999: allowed 0 <= id < vocab size 151669",
               "stop_token_ids");
  // Body over the limit.
  auto big = client_->Post("/v1/completions", std::string(5000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(ojson::parse(big->body)["error"]["code"], "request_too_large");
  // Still serving.
  ojson ok = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(ok["choices"][0]["text"], script_text(2));
}

TEST_F(ServeE2E, ApiKeyProtectsAllButHealth) {
  ServerOptions o;
  o.api_key = "sekrit";
  start(o);
  auto h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 401);
  EXPECT_EQ(ojson::parse(m->body)["error"]["code"], "invalid_api_key");
  auto bad = client_->Get("/metrics", httplib::Headers{{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  auto good = client_->Get("/v1/models", httplib::Headers{{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 200);
}

TEST_F(ServeE2E, TokenizeAndDetokenize) {
  start();
  ojson t = post_json("/tokenize", {{"prompt", "Hello world"}, {"return_token_strs", true}});
  const std::vector<int32_t> ids = engine_->context.tokenizer->encode("Hello world", true);
  EXPECT_EQ(t["tokens"], ids);
  EXPECT_EQ(t["count"], ids.size());
  EXPECT_EQ(t["max_model_len"], 256);
  EXPECT_EQ(t["token_strs"].size(), ids.size());
  ojson d = post_json("/detokenize", {{"tokens", ids}});
  EXPECT_EQ(d["prompt"], "Hello world");
  ojson chat = post_json("/tokenize", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                       {"chat_template_kwargs", {{"enable_thinking", false}}}});
  ojson back = post_json("/detokenize", {{"tokens", chat["tokens"]}});
  EXPECT_EQ(back["prompt"], "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  expect_error("/detokenize", R"({"tokens": [5, 9999999]})", 400,
               "'tokens[1]' = 9999999 is not a token id: allowed 0 <= id < 151669", "tokens");
}

TEST_F(ServeE2E, GenerateConfigDefaults) {
  ServerOptions o;
  o.generate_config = {{"max_new_tokens", 3}, {"temperature", 0}};
  start(o);
  ojson r = post_json("/v1/completions", {{"prompt", "x"}});
  EXPECT_EQ(r["choices"][0]["text"], script_text(3));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  ojson explicit_budget = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 4}});
  EXPECT_EQ(explicit_budget["usage"]["completion_tokens"], 4);
}

TEST_F(ServeE2E, StreamingDisconnectAbortsAndFreesTheRequest) {
  start();
  engine_->delay_ms->store(20);
  const int fd = connect_to(server_->port());
  send_all(fd, request_text("/v1/completions",
                            R"({"prompt": "x", "max_tokens": 200, "ignore_eos": true, "stream": true})"));
  char buf[512];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // headers / first chunk: generating
  EXPECT_EQ(engine_->loop->num_active_requests(), 1u);
  ::close(fd);
  EXPECT_TRUE(engine_idle()) << "the engine still holds the request of a client that left";
  const ServerState& st = server_->state();
  for (int i = 0; i < 200 && st.metrics->num_finished("abort") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(st.metrics->num_finished("abort"), 1u);
  auto mt = client_->Get("/metrics");
  ASSERT_TRUE(mt);
  EXPECT_NE(mt->body.find("vllm:request_success_total{model_name=\"qwen3-script\",engine=\"0\",finished_reason=\"abort\"} 1"),
            std::string::npos);
  EXPECT_NE(mt->body.find("vllm:num_requests_running{model_name=\"qwen3-script\",engine=\"0\"} 0"), std::string::npos);
}

TEST_F(ServeE2E, NonStreamingDisconnectAbortsToo) {
  start();
  engine_->delay_ms->store(20);
  const int fd = connect_to(server_->port());
  send_all(fd, request_text("/v1/chat/completions",
                            R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 200, "ignore_eos": true})"));
  for (int i = 0; i < 200 && engine_->loop->num_active_requests() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::close(fd);
  EXPECT_TRUE(engine_idle());
  for (int i = 0; i < 200 && server_->state().metrics->num_finished("abort") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->state().metrics->num_finished("abort"), 1u);
}

TEST_F(ServeE2E, FullQueueAnswers503WithRetryAfter) {
  ServerOptions o;
  o.max_queued_requests = 1;
  start(o, 256, 1);
  engine_->delay_ms->store(20);
  // One running, one queued: both slow streams.
  std::vector<std::thread> clients;
  std::vector<int> fds;
  for (int i = 0; i < 2; ++i) {
    const int fd = connect_to(server_->port());
    send_all(fd, request_text("/v1/completions", R"({"prompt": "x", "max_tokens": 200, "ignore_eos": true, "stream": true})"));
    fds.push_back(fd);
  }
  for (int i = 0; i < 2000 && server_->state().total_in_flight < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto res = client_->Post("/v1/completions", R"({"prompt": "x", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_EQ(ojson::parse(res->body)["error"]["code"], "queue_full");
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE(engine_idle());
  engine_->delay_ms->store(0);
  ojson ok = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(ok["choices"][0]["finish_reason"], "length");
}

TEST_F(ServeE2E, RequestTimeoutAborts) {
  ServerOptions o;
  o.request_timeout_s = 0.3;
  start(o);
  engine_->delay_ms->store(20);
  ojson r = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 200}, {"ignore_eos", true}});
  EXPECT_EQ(r["choices"][0]["finish_reason"], "abort");
  EXPECT_LT(r["usage"]["completion_tokens"].get<int64_t>(), 200);
  EXPECT_TRUE(engine_idle());
}

TEST_F(ServeE2E, ConcurrentStreamsGetTheirOwnOutputs) {
  start(ServerOptions{}, 256, 4);
  constexpr int kClients = 32;
  std::vector<std::thread> threads;
  std::vector<std::string> texts(kClients);
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] {
      HttpReply r = raw_post(server_->port(), "/v1/completions",
                             ojson{{"prompt", "x"}, {"max_tokens", 3 + i % 8}, {"temperature", 0}, {"stream", true}}.dump());
      for (const std::string& e : r.events)
        if (e != "[DONE]") texts[size_t(i)] += ojson::parse(e)["choices"][0]["text"].get<std::string>();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(texts[size_t(i)], script_text(size_t(3 + i % 8))) << i;
  EXPECT_TRUE(engine_idle());
}

TEST_F(ServeE2E, EngineFailureIs500OrFinishReasonError) {
  start();
  const std::string body = ojson{{"prompt", {1, 2, testing::kFailToken}}, {"max_tokens", 5}}.dump();
  expect_error("/v1/completions", body, 500, "the engine failed while generating: script model: device lost", nullptr,
               "engine_error");
  ojson stream_body = ojson::parse(body);
  stream_body["stream"] = true;
  HttpReply r = raw_post(server_->port(), "/v1/completions", stream_body.dump());
  ASSERT_EQ(r.status, 200);
  ASSERT_GE(r.events.size(), 2u);
  EXPECT_EQ(ojson::parse(r.events[r.events.size() - 2])["choices"][0]["finish_reason"], "error");
  EXPECT_EQ(server_->state().metrics->num_finished("error"), 2u);
  ojson ok = post_json("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(ok["choices"][0]["text"], script_text(2));
}

TEST_F(ServeE2E, StopAbortsInFlightRequestsAfterTheGrace) {
  start();
  engine_->delay_ms->store(20);
  HttpReply reply;
  std::thread client([&] {
    reply = raw_post(server_->port(), "/v1/completions",
                     R"({"prompt": "x", "max_tokens": 200, "ignore_eos": true, "stream": true})");
  });
  // Up to 10 s for the request to reach the engine (a loaded CI machine took over 1.5 s once).
  for (int i = 0; i < 2000 && server_->state().total_in_flight == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool in_flight = server_->state().total_in_flight > 0;
  const auto t0 = std::chrono::steady_clock::now();
  server_->stop(0.2);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  client.join();
  ASSERT_TRUE(in_flight) << "the request never reached the engine, so the stop had nothing to abort";
  ASSERT_EQ(reply.status, 200);
  ASSERT_GE(reply.events.size(), 2u);
  EXPECT_EQ(reply.events.back(), "[DONE]");
  EXPECT_EQ(ojson::parse(reply.events[reply.events.size() - 2])["choices"][0]["finish_reason"], "abort");
  EXPECT_TRUE(engine_idle());
}

TEST_F(ServeE2E, CorsOnlyForAllowedOrigins) {
  ServerOptions o;
  o.allowed_origins = {"http://ok.example"};
  start(o);
  auto yes = client_->Get("/v1/models", httplib::Headers{{"Origin", "http://ok.example"}});
  ASSERT_TRUE(yes);
  EXPECT_EQ(yes->get_header_value("Access-Control-Allow-Origin"), "http://ok.example");
  auto no = client_->Get("/v1/models", httplib::Headers{{"Origin", "http://evil.example"}});
  ASSERT_TRUE(no);
  EXPECT_FALSE(no->has_header("Access-Control-Allow-Origin"));
}

// The per-request phase histograms over HTTP: every finished request adds exactly one observation
// to queue / prefill / decode / inference time, and one to time per output token when it has two
// tokens or more; inference = prefill + decode; the engine's phases fit inside the HTTP e2e.
TEST_F(ServeE2E, PhaseHistogramsObserveEachFinishedRequestOnce) {
  start(ServerOptions{}, 256, /*max_num_seqs=*/1);  // one running request: a second one queues
  engine_->delay_ms->store(10);                     // every step >= 10 ms
  struct Hist {
    double count = -1, sum = -1;
  };
  const char* names[] = {"e2e_request_latency_seconds", "request_queue_time_seconds",
                         "request_prefill_time_seconds", "request_decode_time_seconds",
                         "request_inference_time_seconds", "request_time_per_output_token_seconds"};
  auto scrape = [&] {
    auto mt = client_->Get("/metrics");
    EXPECT_TRUE(mt);
    std::map<std::string, Hist> h;
    for (const char* name : names) {
      auto value = [&](const char* suffix) {
        const std::string key = std::string("\nvllm:") + name + suffix + "{model_name=\"qwen3-script\",engine=\"0\"} ";
        const size_t at = mt ? mt->body.find(key) : std::string::npos;
        return at == std::string::npos ? -1.0 : std::stod(mt->body.substr(at + key.size()));
      };
      h[name] = {value("_count"), value("_sum")};
    }
    return h;
  };
  // Deltas of count and sum between two scrapes.
  auto delta = [](std::map<std::string, Hist>& a, std::map<std::string, Hist>& b, const char* name) {
    return Hist{b[name].count - a[name].count, b[name].sum - a[name].sum};
  };
  auto complete = [&](int max_tokens) {
    post_json("/v1/completions", {{"prompt", "Say hi"}, {"max_tokens", max_tokens}, {"ignore_eos", true},
                                  {"temperature", 0}});
  };

  auto h0 = scrape();
  complete(5);
  auto h1 = scrape();
  for (const char* name : names) EXPECT_EQ(delta(h0, h1, name).count, 1) << name;
  const double e2e = delta(h0, h1, "e2e_request_latency_seconds").sum;
  const double queue = delta(h0, h1, "request_queue_time_seconds").sum;
  const double prefill = delta(h0, h1, "request_prefill_time_seconds").sum;
  const double decode = delta(h0, h1, "request_decode_time_seconds").sum;
  const double inference = delta(h0, h1, "request_inference_time_seconds").sum;
  const double tpot = delta(h0, h1, "request_time_per_output_token_seconds").sum;
  EXPECT_NEAR(inference, prefill + decode, 1e-9);
  EXPECT_LE(queue + inference, e2e);  // e2e adds tokenization and the hand-offs on either side
  EXPECT_GE(prefill, 0.010);          // the prefill step
  EXPECT_GE(decode, 4 * 0.010);       // four decode steps after the first token
  EXPECT_NEAR(tpot, decode / 4, 1e-9);

  // One token: no time per output token, and no decode time to speak of.
  complete(1);
  auto h2 = scrape();
  for (const char* name : names)
    EXPECT_EQ(delta(h1, h2, name).count, std::string(name) == "request_time_per_output_token_seconds" ? 0 : 1) << name;
  EXPECT_EQ(delta(h1, h2, "request_decode_time_seconds").sum, 0);

  // Two at once with one running slot: the second waits in the queue for the first's 20 steps
  // (>= 200 ms, less the 30 ms head start).
  std::thread first([&] {
    httplib::Client c("127.0.0.1", server_->port());  // its own connection: this one is busy
    c.set_read_timeout(30, 0);
    auto res = c.Post("/v1/completions", R"({"prompt": "Say hi", "max_tokens": 20, "ignore_eos": true})",
                      "application/json");
    EXPECT_TRUE(res && res->status == 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  complete(5);
  first.join();
  auto h3 = scrape();
  for (const char* name : names) EXPECT_EQ(delta(h2, h3, name).count, 2) << name;
  EXPECT_GE(delta(h2, h3, "request_queue_time_seconds").sum, 0.1);
  EXPECT_NEAR(delta(h2, h3, "request_inference_time_seconds").sum,
              delta(h2, h3, "request_prefill_time_seconds").sum + delta(h2, h3, "request_decode_time_seconds").sum,
              1e-9);
}

}  // namespace
}  // namespace pypto
