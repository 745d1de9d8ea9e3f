#include "cli/soak_catalogue.h"

#include <algorithm>
#include <cstdio>

namespace pypto::bench {

using nlohmann::json;

namespace {

json tool_weather() {
  return {{"type", "function"},
          {"function",
           {{"name", "get_weather"},
            {"description", "Current weather of a city"},
            {"parameters",
             {{"type", "object"},
              {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}, {"days", {{"type", "integer"}, {"minimum", 1}, {"maximum", 7}}}}},
              {"required", json::array({"city", "days"})}}}}}};
}

json tool_clock() {
  return {{"type", "function"},
          {"function",
           {{"name", "get_time"},
            {"parameters", {{"type", "object"}, {"properties", {{"zone", {{"type", "string"}, {"enum", {"UTC", "CET", "JST"}}}}}}, {"required", json::array({"zone"})}}}}}};
}

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

CatalogueEntry entry(std::string name, bool chat, json body) {
  CatalogueEntry e;
  e.name = std::move(name);
  e.path = chat ? "/v1/chat/completions" : "/v1/completions";
  if (!body.contains("temperature")) body["temperature"] = 0.0;
  e.stream = body.value("stream", false);
  if (e.stream) body["stream_options"] = {{"include_usage", true}};
  e.body = std::move(body);
  return e;
}

std::string lp5(const json& v) {
  if (!v.is_number()) return v.dump();
  char b[32];
  std::snprintf(b, sizeof b, "%.5f", v.get<double>());
  return b;
}

// Completions' legacy logprobs {tokens, token_logprobs, top_logprobs}, appended to `out`.
void completion_logprobs(const json& lp, json& out) {
  if (!lp.is_object() || !lp.contains("tokens")) return;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    json top = json::array();
    if (lp.contains("top_logprobs") && lp["top_logprobs"].is_array() && i < lp["top_logprobs"].size() &&
        lp["top_logprobs"][i].is_object())
      for (const auto& [tok, v] : lp["top_logprobs"][i].items()) top.push_back({tok, lp5(v)});  // keys sorted by nlohmann
    out.push_back({lp["tokens"][i], lp5(lp["token_logprobs"][i]), top});
  }
}

// Chat's logprobs {content: [{token, logprob, top_logprobs: [{token, logprob}]}]}, appended.
void chat_logprobs(const json& lp, json& out) {
  if (!lp.is_object() || !lp.contains("content") || !lp["content"].is_array()) return;
  for (const json& t : lp["content"]) {
    json top = json::array();
    if (t.contains("top_logprobs") && t["top_logprobs"].is_array())
      for (const json& a : t["top_logprobs"]) top.push_back({a.value("token", ""), lp5(a.value("logprob", json()))});
    out.push_back({t.value("token", ""), lp5(t.value("logprob", json())), top});
  }
}

std::string text_or_empty(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::vector<CatalogueEntry> make_catalogue(const std::string& model) {
  std::vector<CatalogueEntry> c;
  const std::string p1 = "The history of the city begins", p2 = "List three colours:", p3 = "def fibonacci(n):";
  c.push_back(entry("cmpl", false, {{"prompt", p1}, {"max_tokens", 16}}));
  c.push_back(entry("cmpl-stream", false, {{"prompt", p1}, {"max_tokens", 16}, {"stream", true}}));
  c.push_back(entry("cmpl-long-stream", false, {{"prompt", p3}, {"max_tokens", 64}, {"ignore_eos", true}, {"stream", true}}));
  c.push_back(entry("cmpl-logprobs", false, {{"prompt", p2}, {"max_tokens", 12}, {"logprobs", 3}}));
  c.push_back(entry("cmpl-logprobs-stream", false, {{"prompt", p2}, {"max_tokens", 12}, {"logprobs", 2}, {"stream", true}}));
  c.push_back(entry("cmpl-n3-greedy", false, {{"prompt", p3}, {"max_tokens", 10}, {"n", 3}}));
  c.push_back(entry("cmpl-n4-seeded-stream", false,
                    {{"prompt", p1}, {"max_tokens", 12}, {"n", 4}, {"temperature", 0.9}, {"top_p", 0.95}, {"seed", 1234}, {"stream", true}}));
  c.push_back(entry("cmpl-stop", false, {{"prompt", p2}, {"max_tokens", 32}, {"stop", json::array({"e", "\n"})}}));
  c.push_back(entry("cmpl-stop-stream", false, {{"prompt", p1}, {"max_tokens", 32}, {"stop", json::array({"a", "o"})}, {"stream", true}}));
  c.push_back(entry("cmpl-two-prompts", false, {{"prompt", json::array({p1, p3})}, {"max_tokens", 8}, {"n", 2}}));
  c.push_back(entry("cmpl-regex", false, {{"prompt", "Code:"}, {"max_tokens", 16}, {"structured_outputs", {{"regex", "[A-Z]{2}-[0-9]{3}( OK| FAIL)?"}}}}));
  c.push_back(entry("cmpl-grammar-stream", false,
                    {{"prompt", "Pairs:"}, {"max_tokens", 40}, {"stream", true},
                     {"structured_outputs",
                      {{"grammar", "root ::= \"{\" pair (\",\" pair)* \"}\"\npair ::= key \":\" [0-9]{1,3}\nkey ::= \"\\\"\" [a-z]{1,6} \"\\\"\"\n"}}}}));
  c.push_back(entry("cmpl-choice", false, {{"prompt", "Answer:"}, {"max_tokens", 8}, {"structured_outputs", {{"choice", json::array({"yes", "no", "maybe"})}}}}));
  c.push_back(entry("chat", true, {{"messages", user("Tell me about the sea.")}, {"max_tokens", 16}}));
  c.push_back(entry("chat-stream-nothink", true,
                    {{"messages", user("Name a planet.")}, {"max_tokens", 24}, {"stream", true}, {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  c.push_back(entry("chat-logprobs-stream", true,
                    {{"messages", user("Count to five.")}, {"max_tokens", 12}, {"logprobs", true}, {"top_logprobs", 2}, {"stream", true}}));
  c.push_back(entry("chat-json-schema", true,
                    {{"messages", user("A person as JSON.")}, {"max_tokens", 48}, {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"response_format",
                      {{"type", "json_schema"},
                       {"json_schema",
                        {{"name", "person"},
                         {"schema",
                          {{"type", "object"},
                           {"properties", {{"name", {{"type", "string"}, {"maxLength", 10}}}, {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}}}},
                           {"required", json::array({"name", "age"})}}}}}}}}));
  c.push_back(entry("chat-json-object-stream", true,
                    {{"messages", user("Any JSON object.")}, {"max_tokens", 24}, {"stream", true},
                     {"chat_template_kwargs", {{"enable_thinking", false}}}, {"response_format", {{"type", "json_object"}}}}));
  c.push_back(entry("chat-tools-auto", true,
                    {{"messages", user("Weather in Paris?")}, {"max_tokens", 24}, {"tools", json::array({tool_weather(), tool_clock()})}, {"tool_choice", "auto"}}));
  c.push_back(entry("chat-tools-required-stream", true,
                    {{"messages", user("Weather in Oslo for 3 days?")}, {"max_tokens", 48}, {"stream", true},
                     {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"tools", json::array({tool_weather(), tool_clock()})}, {"tool_choice", "required"}}));
  c.push_back(entry("chat-tools-named", true,
                    {{"messages", user("What time is it?")}, {"max_tokens", 32}, {"chat_template_kwargs", {{"enable_thinking", false}}},
                     {"tools", json::array({tool_weather(), tool_clock()})},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}}}));
  c.push_back(entry("chat-n2-seeded", true,
                    {{"messages", user("Say something.")}, {"max_tokens", 12}, {"n", 2}, {"temperature", 0.8}, {"seed", 99}}));
  for (CatalogueEntry& e : c) e.body["model"] = model;
  return c;
}

json canonical_response(const json& body) {
  json choices = json::array();
  if (body.contains("choices") && body["choices"].is_array())
    for (const json& ch : body["choices"]) {
      json o;
      o["index"] = ch.value("index", -1);
      json lps = json::array();
      if (ch.contains("message")) {
        const json& m = ch["message"];
        o["content"] = text_or_empty(m, "content");
        o["reasoning"] = text_or_empty(m, "reasoning_content");
        json calls = json::array();
        if (m.contains("tool_calls") && m["tool_calls"].is_array())
          for (const json& t : m["tool_calls"])
            calls.push_back({t["function"].value("name", ""), t["function"].value("arguments", "")});
        o["tool_calls"] = calls;
        if (ch.contains("logprobs")) chat_logprobs(ch["logprobs"], lps);
      } else {
        o["text"] = text_or_empty(ch, "text");
        if (ch.contains("logprobs")) completion_logprobs(ch["logprobs"], lps);
      }
      o["logprobs"] = lps;
      o["finish_reason"] = ch.value("finish_reason", json());
      choices.push_back(o);
    }
  std::sort(choices.begin(), choices.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  json usage;
  if (body.contains("usage") && body["usage"].is_object())
    usage = {{"prompt_tokens", body["usage"].value("prompt_tokens", -1)}, {"completion_tokens", body["usage"].value("completion_tokens", -1)}};
  return {{"choices", choices}, {"usage", usage}};
}

bool StreamAssembler::add(const std::string& data, std::string* error) {
  if (data == "[DONE]") {
    done_ = true;
    return true;
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error) *error = "a stream chunk is not JSON: " + data.substr(0, 120);
    return false;
  }
  if (j.contains("error")) {
    if (error) *error = "an error in the stream: " + j["error"].dump().substr(0, 200);
    return false;
  }
  ++chunks_;
  if (j.contains("usage") && j["usage"].is_object()) usage_ = j["usage"];
  if (!j.contains("choices") || !j["choices"].is_array()) return true;
  for (const json& ch : j["choices"]) {
    const std::string key = std::to_string(ch.value("index", -1));
    json& acc = choices_[key];
    if (acc.is_null()) acc = {{"index", ch.value("index", -1)}};
    if (ch.contains("delta")) {  // chat
      const json& d = ch["delta"];
      if (!acc.contains("message")) acc["message"] = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", json::array()}};
      json& m = acc["message"];
      m["content"] = m["content"].get<std::string>() + text_or_empty(d, "content");
      m["reasoning_content"] = m["reasoning_content"].get<std::string>() + text_or_empty(d, "reasoning_content");
      if (d.contains("tool_calls") && d["tool_calls"].is_array())
        for (const json& t : d["tool_calls"]) {
          const size_t i = t.value("index", 0);
          while (m["tool_calls"].size() <= i) m["tool_calls"].push_back({{"function", {{"name", ""}, {"arguments", ""}}}});
          json& f = m["tool_calls"][i]["function"];
          if (t.contains("function")) {
            f["name"] = f["name"].get<std::string>() + text_or_empty(t["function"], "name");
            f["arguments"] = f["arguments"].get<std::string>() + text_or_empty(t["function"], "arguments");
          }
        }
      if (ch.contains("logprobs") && ch["logprobs"].is_object() && ch["logprobs"].contains("content")) {
        if (!acc.contains("logprobs")) acc["logprobs"] = {{"content", json::array()}};
        for (const json& t : ch["logprobs"]["content"]) acc["logprobs"]["content"].push_back(t);
      }
    } else {  // completions
      acc["text"] = text_or_empty(acc, "text") + text_or_empty(ch, "text");
      if (ch.contains("logprobs") && ch["logprobs"].is_object()) {
        if (!acc.contains("logprobs")) acc["logprobs"] = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
        json& lp = acc["logprobs"];
        const json& in = ch["logprobs"];
        for (const char* k : {"tokens", "token_logprobs", "top_logprobs"})
          if (in.contains(k) && in[k].is_array())
            for (const json& v : in[k]) lp[k].push_back(v);
      }
    }
    if (ch.contains("finish_reason") && !ch["finish_reason"].is_null()) acc["finish_reason"] = ch["finish_reason"];
  }
  return true;
}

json StreamAssembler::body() const {
  json b;
  b["choices"] = json::array();
  for (const auto& [k, v] : choices_.items()) b["choices"].push_back(v);
  if (!usage_.is_null()) b["usage"] = usage_;
  return b;
}

std::string first_difference(const json& want, const json& got) {
  if (want == got) return "";
  const json patch = json::diff(want, got);
  if (patch.empty()) return "";
  const json& op = patch[0];
  const std::string path = op.value("path", "");
  std::string w = "(absent)", g = "(absent)";
  try {
    const json::json_pointer ptr(path);
    if (want.contains(ptr)) w = want.at(ptr).dump();
    if (got.contains(ptr)) g = got.at(ptr).dump();
  } catch (const std::exception&) {
  }
  auto cut = [](std::string s) { return s.size() > 160 ? s.substr(0, 160) + "…" : s; };
  return (path.empty() ? std::string("/") : path) + ": expected " + cut(w) + ", got " + cut(g);
}

}  // namespace pypto::bench
