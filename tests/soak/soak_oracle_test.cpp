// The soak's judges as units: a streamed answer assembles into the canonical form of the same
// answer unstreamed; the oracle flags an answer that differs from its solo run (shown with a
// deliberately altered expectation), an abusive body that was accepted, a 5xx and a dropped
// answer; the leak verdict names the figure that did not come back; latency windows.
#include <gtest/gtest.h>

#include <set>

#include "cli/bench_soak.h"
#include "cli/soak_abuse.h"
#include "cli/soak_catalogue.h"
#include "cli/soak_probe.h"

namespace pypto::bench {
namespace {

using nlohmann::json;

TEST(SoakCanonical, ChatStreamEqualsBody) {
  const json body = json::parse(R"({"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there",
    "reasoning_content":"hmm","tool_calls":[{"id":"call_9","type":"function","function":{"name":"get_time","arguments":"{\"zone\":\"UTC\"}"}}]},
    "logprobs":{"content":[{"token":"Hi","logprob":-0.123456789,"top_logprobs":[{"token":"Hi","logprob":-0.123456789}]}]},
    "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12,
    "prompt_tokens_details":{"cached_tokens":3}}})");
  StreamAssembler a;
  for (const char* c : {
           R"({"id":"chatcmpl-2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null})",
           R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"},"finish_reason":null}]})",
           R"({"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1234568,"top_logprobs":[{"token":"Hi","logprob":-0.1234568}]}]},"finish_reason":null}]})",
           R"({"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":null}]})",
           R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]}}]})",
           R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"zone\":"}}]}}]})",
           R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"UTC\"}"}}]}}]})",
           R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
           R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}})", "[DONE]"}) {
    std::string err;
    ASSERT_TRUE(a.add(c, &err)) << err;
  }
  EXPECT_TRUE(a.done());
  EXPECT_EQ(first_difference(canonical_response(body), canonical_response(a.body())), "");
}

TEST(SoakCanonical, CompletionsTwoChoicesAndLogprobs) {
  const json body = json::parse(R"({"choices":[{"index":1,"text":"b","logprobs":null,"finish_reason":"length"},
    {"index":0,"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-1.0,-2.0],"top_logprobs":[{"a":-1.0},{"b":-2.0}],"text_offset":[0,1]},
    "finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}})");
  StreamAssembler a;
  for (const char* c :
       {R"({"choices":[{"index":0,"text":"a","logprobs":{"tokens":["a"],"token_logprobs":[-1.0],"top_logprobs":[{"a":-1.0}],"text_offset":[0]},"finish_reason":null}]})",
        R"({"choices":[{"index":1,"text":"b","logprobs":null,"finish_reason":"length"}]})",
        R"({"choices":[{"index":0,"text":"b","logprobs":{"tokens":["b"],"token_logprobs":[-2.0],"top_logprobs":[{"b":-2.0}],"text_offset":[1]},"finish_reason":"stop"}]})",
        R"({"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}})", "[DONE]"})
    ASSERT_TRUE(a.add(c, nullptr));
  EXPECT_EQ(first_difference(canonical_response(body), canonical_response(a.body())), "");
}

TEST(SoakCanonical, StreamErrorAndGarbageAreRefused) {
  StreamAssembler a;
  std::string err;
  EXPECT_FALSE(a.add(R"({"error":{"message":"engine failed"}})", &err));
  EXPECT_NE(err.find("engine failed"), std::string::npos);
  EXPECT_FALSE(a.add("not json", &err));
  EXPECT_FALSE(a.done());
}

SoakRecord answered(const std::string& kind, const std::string& entry, const json& canonical) {
  SoakRecord r;
  r.kind = kind;
  r.entry = entry;
  r.x.result = ExchangeResult::Answered;
  r.x.status = 200;
  r.x.canonical = canonical;
  return r;
}

TEST(SoakOracle, CatchesAnAlteredAnswer) {
  const json solo = canonical_response(json::parse(R"({"choices":[{"index":0,"text":"the sea","finish_reason":"length"}],
                                                       "usage":{"prompt_tokens":4,"completion_tokens":2}})"));
  json expected = {{"cmpl", solo}};
  SoakRecord same = answered("request", "cmpl", solo);
  judge_record(same, expected);
  EXPECT_FALSE(same.bad) << same.why;

  // The expectation altered by one character: the oracle must name the entry and the field.
  json altered = expected;
  altered["cmpl"]["choices"][0]["text"] = "the see";
  SoakRecord r = answered("request", "cmpl", solo);
  judge_record(r, altered);
  EXPECT_TRUE(r.bad);
  EXPECT_EQ(r.why.rfind("mismatch", 0), 0u) << r.why;
  EXPECT_NE(r.why.find("/choices/0/text"), std::string::npos) << r.why;
  EXPECT_NE(r.why.find("the see"), std::string::npos) << r.why;

  // Another entry's answer (a mixed-up response) and a changed finish reason are caught too.
  json other = solo;
  other["choices"][0]["finish_reason"] = "stop";
  SoakRecord mixed = answered("slow-reader", "cmpl", other);
  judge_record(mixed, expected);
  EXPECT_TRUE(mixed.bad);
  SoakRecord unknown = answered("request", "nope", solo);
  judge_record(unknown, expected);
  EXPECT_TRUE(unknown.bad);
}

TEST(SoakOracle, AbuseAndFailuresAreJudged) {
  SoakRecord accepted = answered("deep-body", "", json());
  judge_record(accepted, json::object());
  EXPECT_TRUE(accepted.bad);
  EXPECT_EQ(accepted.why, "accepted an abusive body");

  SoakRecord refused;
  refused.kind = "malformed";
  refused.x.result = ExchangeResult::Rejected;
  refused.x.status = 400;
  judge_record(refused, json::object());
  EXPECT_FALSE(refused.bad);

  SoakRecord valid_refused;
  valid_refused.kind = "request";
  valid_refused.entry = "cmpl";
  valid_refused.x.result = ExchangeResult::Rejected;
  valid_refused.x.status = 400;
  judge_record(valid_refused, json::object());
  EXPECT_TRUE(valid_refused.bad);
  valid_refused.bad = false;
  valid_refused.x.status = 503;  // queue full: allowed
  judge_record(valid_refused, json::object());
  EXPECT_FALSE(valid_refused.bad);

  for (ExchangeResult e : {ExchangeResult::ServerError, ExchangeResult::Dropped}) {
    SoakRecord r;
    r.kind = "request";
    r.x.result = e;
    judge_record(r, json::object());
    EXPECT_TRUE(r.bad) << exchange_result_name(e);
  }
  SoakRecord gone;
  gone.kind = "disconnect";
  gone.x.result = ExchangeResult::Disconnected;
  judge_record(gone, json::object());
  EXPECT_FALSE(gone.bad);
}

TEST(SoakAbuse, BodiesAreWhatTheySay) {
  AbuseOptions o;
  o.deep_depth = 40;
  o.oversized_bytes = 100000;
  EXPECT_TRUE(json::parse(abuse_body(AbuseKind::Malformed, "m", o), nullptr, false).is_discarded());
  EXPECT_TRUE(json::parse(abuse_body(AbuseKind::UnknownField, "m", o)).contains("frobnicate"));
  const json deep = json::parse(abuse_body(AbuseKind::DeepBody, "m", o));
  int depth = 0;
  for (const json* p = &deep["prompt"]; p->is_array(); p = &(*p)[0]) ++depth;
  EXPECT_EQ(depth, 40);
  const std::string big = abuse_body(AbuseKind::Oversized, "m", o);
  EXPECT_GE(big.size(), 99990u);
  EXPECT_LE(big.size(), 100100u);
  EXPECT_NE(abuse_body(AbuseKind::DeepSchema, "m", o).find("\"not\""), std::string::npos);
}

TEST(SoakLeaks, VerdictNamesTheFigure) {
  Reading b;
  b.has_process = b.has_metrics = true;
  b.rss_kib = 500 * 1024;
  b.fds = 10;
  Reading a = b;
  LeakTolerance t;
  EXPECT_TRUE(judge_leaks(b, a, t).ok);
  a.rss_kib += 100 * 1024, a.fds += 8;  // within 256 MiB and 8 descriptors
  EXPECT_TRUE(judge_leaks(b, a, t).ok);
  a.kv_usage = 0.05;
  LeakVerdict v = judge_leaks(b, a, t);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.failures[0].find("kv_cache_usage"), std::string::npos);
  a = b;
  a.rss_kib += 300 * 1024;  // past 256 MiB
  a.fds += 9;
  v = judge_leaks(b, a, t);
  ASSERT_EQ(v.failures.size(), 2u);
  EXPECT_NE(v.failures[0].find("rss 500 MiB -> 800 MiB"), std::string::npos) << v.failures[0];
  EXPECT_NE(v.failures[1].find("open fds 10 -> 19"), std::string::npos) << v.failures[1];
  a = b;
  a.running = 1;
  EXPECT_FALSE(judge_leaks(b, a, t).ok);
}

TEST(SoakProbe, MetricSumOverReplicas) {
  const std::string text =
      "# HELP vllm:kv_cache_usage_perc x\nvllm:kv_cache_usage_perc{model_name=\"m\",engine=\"0\"} 0.25\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"1\"} 0.5\nvllm:kv_cache_usage_perc_other 9\n";
  EXPECT_DOUBLE_EQ(metric_sum(text, "vllm:kv_cache_usage_perc"), 0.75);
  EXPECT_EQ(metric_sum(text, "vllm:absent"), -1);
}

TEST(SoakWindows, PercentilesPerWindow) {
  std::vector<SoakRecord> rs;
  for (int i = 0; i < 10; ++i) {
    SoakRecord r = answered("request", "cmpl", json());
    r.end_s = i < 5 ? 0.5 : 1.5;
    r.x.latency_s = i < 5 ? 0.1 : 1.0;
    rs.push_back(r);
  }
  SoakRecord warm = answered("request", "cmpl", json());
  warm.warmup = true;
  warm.x.latency_s = 50;
  rs.push_back(warm);
  const auto w = latency_windows(rs, 2.0, 1.0);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].count, 5u);
  EXPECT_NEAR(w[0].p99_ms, 100, 1e-9);
  EXPECT_NEAR(w[1].p50_ms, 1000, 1e-9);
}

TEST(SoakCatalogue, EntriesAreDeterministicAndUnique) {
  const auto cat = make_catalogue("m");
  std::set<std::string> names;
  bool tools = false, schema = false, grammar = false, n = false, chat_stream = false;
  for (const auto& e : cat) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_EQ(e.body["model"], "m");
    const double temp = e.body["temperature"].get<double>();
    EXPECT_TRUE(temp == 0 || e.body.contains("seed")) << e.name << ": neither greedy nor seeded";
    tools |= e.body.contains("tools");
    schema |= e.body.contains("response_format");
    grammar |= e.body.contains("structured_outputs");
    n |= e.body.value("n", 1) > 1;
    chat_stream |= e.stream && e.path == "/v1/chat/completions";
  }
  EXPECT_TRUE(tools && schema && grammar && n && chat_stream);
}

}  // namespace
}  // namespace pypto::bench
