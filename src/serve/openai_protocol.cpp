#include "serve/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/error.h"
#include "serve/json_limits.h"
#include "serve/request_limits.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

const std::set<std::string> kIgnoredFields = {
    "user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"};

namespace {

// Fields that would change the output and that we do not implement: rejected when present with
// a value other than the neutral one (null, or the value in the second column).
struct Unsupported {
  const char* name;
  const char* why;
};
const Unsupported kUnsupported[] = {
    {"suffix", "insertion (suffix) is not supported"},
    {"best_of", "best_of is not supported (it was removed from vLLM too); use n"},
    {"guided_json", "guided_* fields were removed from vLLM; use structured_outputs.json or response_format"},
    {"guided_regex", "guided_* fields were removed from vLLM; use structured_outputs.regex"},
    {"guided_choice", "guided_* fields were removed from vLLM; use structured_outputs.choice"},
    {"guided_grammar", "guided_* fields were removed from vLLM; use structured_outputs.grammar"},
    {"prompt_logprobs", "prompt_logprobs is not supported"},
    {"truncate_prompt_tokens", "prompt truncation is not supported"},
    {"bad_words", "bad_words is not supported"},
    {"allowed_token_ids", "allowed_token_ids is not supported"},
    {"logits_processors", "custom logits processors are not supported"},
    {"functions", "the legacy functions field is not supported; use tools"},
    {"function_call", "the legacy function_call field is not supported; use tools"},
    {"chat_template", "a per-request chat_template is not supported; the model's template is used"},
    {"continue_final_message", "continue_final_message is not supported"},
    {"reasoning_effort", "reasoning_effort is not supported; use chat_template_kwargs.enable_thinking"},
    {"audio", "audio output is not supported"},
    {"modalities", "only text output is supported"},
    {"prediction", "predicted outputs are not supported"},
    {"web_search_options", "web search is not supported"},
    {"length_penalty", "length_penalty (beam search) is not supported"},
    {"use_beam_search", "beam search is not supported"},
    {"priority", "the scheduler serves requests first come, first served: only priority 0 is accepted"},
    {"cache_salt",
     "the prefix cache is shared by all requests; start the server with --no-enable-prefix-caching to keep "
     "requests' prompts apart"},
};

const std::set<std::string> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "n", "seed", "stop",
    "stop_token_ids", "stream", "stream_options", "logprobs", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "logit_bias", "ignore_eos", "min_tokens", "skip_special_tokens", "response_format",
    "structured_outputs", "request_id"};
const std::set<std::string> kCompletionFields = {"prompt", "echo"};
const std::set<std::string> kChatFields = {"messages", "max_completion_tokens", "chat_template_kwargs", "tools",
                                           "tool_choice", "top_logprobs", "add_generation_prompt",
                                           "include_reasoning", "parallel_tool_calls"};

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null: return "null";
    case ojson::value_t::boolean: return "boolean";
    case ojson::value_t::string: return "string";
    case ojson::value_t::array: return "array";
    case ojson::value_t::object: return "object";
    case ojson::value_t::number_float: return "number";
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return "integer";
    default: return "value";
  }
}

[[noreturn]] void wrong_type(const std::string& field, const char* expected, const ojson& v) {
  throw invalid_request(str_cat("'", field, "' must be ", expected, ", got ", type_name(v)), field);
}

// Present and not null.
const ojson* find_value(const ojson& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const ojson& body, const char* field, bool fallback) {
  const ojson* v = find_value(body, field);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(field, "a boolean", *v);
  return v->get<bool>();
}

int64_t as_int(const std::string& field, const ojson& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) wrong_type(field, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw invalid_request(str_cat("'", field, "' = ", v.dump(), " is out of range: allowed ", lo, " <= ", field,
                                  " <= ", hi),
                          field);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw invalid_request(str_cat("'", field, "' = ", x, " is out of range: allowed ", lo, " <= ", field, " <= ", hi),
                          field);
  return x;
}

std::optional<int64_t> get_int(const ojson& body, const char* field, int64_t lo, int64_t hi) {
  const ojson* v = find_value(body, field);
  if (!v) return std::nullopt;
  return as_int(field, *v, lo, hi);
}

std::optional<float> get_number(const ojson& body, const char* field) {
  const ojson* v = find_value(body, field);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(field, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw invalid_request(str_cat("'", field, "' must be finite"), field);
  return float(x);
}

std::vector<int32_t> get_token_list(const std::string& field, const ojson& v) {
  if (!v.is_array()) wrong_type(field, "an array of token ids", v);
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string name = str_cat(field, "[", i, "]");
    ids.push_back(int32_t(as_int(name, v[i], 0, std::numeric_limits<int32_t>::max())));
  }
  return ids;
}

void check_fields(const ojson& body, bool chat) {
  for (const Unsupported& u : kUnsupported) {
    auto it = body.find(u.name);
    if (it == body.end() || it->is_null()) continue;
    const std::string name = u.name;
    if (name == "best_of" && it->is_number_integer() && it->get<int64_t>() == 1) continue;
    if ((name == "continue_final_message" || name == "use_beam_search") && it->is_boolean() && !it->get<bool>())
      continue;
    if (name == "truncate_prompt_tokens" && it->is_number_integer() && it->get<int64_t>() < 0) continue;
    if (name == "prompt_logprobs" && it->is_number_integer() && it->get<int64_t>() == 0) continue;
    if (name == "priority" && it->is_number_integer() && it->get<int64_t>() == 0) continue;
    throw invalid_request(str_cat("unsupported field '", name, "': ", u.why), name);
  }
  std::vector<std::string> unknown;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (kCommonFields.count(k) || kIgnoredFields.count(k)) continue;
    if (chat ? kChatFields.count(k) : kCompletionFields.count(k)) continue;
    bool listed = false;
    for (const Unsupported& u : kUnsupported) listed |= k == u.name;
    if (listed) continue;  // neutral value
    unknown.push_back(k);
  }
  if (!unknown.empty()) {
    std::string names;
    for (const std::string& k : unknown) names += (names.empty() ? "'" : ", '") + k + "'";
    throw invalid_request(str_cat("unknown field", unknown.size() > 1 ? "s " : " ", names,
                                  ": not supported by this server (it could change the output)"),
                          unknown.front());
  }
}

void parse_structured(const ojson& body, GenerationFields& g);

// Fields common to completions and chat. `max_tokens_field` is the name the budget came from.
void parse_common(const ojson& body, const std::set<std::string>& defaulted, bool chat, GenerationFields& g) {
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) wrong_type("model", "a string", *it);
    g.model = it->get<std::string>();
  }
  if (auto it = body.find("request_id"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().size() > 256)
      throw invalid_request(str_cat("'request_id' must be a string of 1 to 256 characters, got ", it->dump().substr(0, 64)),
                            "request_id");
    g.request_id = it->get<std::string>();
  }

  SamplingParams& p = g.params;

  // Token budget: chat prefers max_completion_tokens over the deprecated max_tokens.
  const char* budget = "max_tokens";
  if (chat && body.contains("max_completion_tokens")) budget = "max_completion_tokens";
  if (body.contains(budget)) {
    g.max_tokens = get_int(body, budget, 1, std::numeric_limits<int32_t>::max());
    g.max_tokens_is_default = defaulted.count(budget) > 0;
  } else {
    g.max_tokens = kDefaultMaxTokens;
    g.max_tokens_is_default = true;
  }
  if (auto v = get_int(body, "min_tokens", 0, std::numeric_limits<int32_t>::max())) p.min_tokens = int32_t(*v);
  if (auto v = get_int(body, "n", 1, kMaxN)) g.n = int32_t(*v);

  if (auto v = get_number(body, "temperature")) p.temperature = *v;
  if (auto v = get_number(body, "top_p")) p.top_p = *v;
  if (auto v = get_number(body, "min_p")) p.min_p = *v;
  if (auto v = get_int(body, "top_k", -1, std::numeric_limits<int32_t>::max()); v && *v >= 1)
    p.top_k = int32_t(*v);  // -1 and 0 mean "disabled", as in vLLM
  if (auto v = get_number(body, "presence_penalty")) p.presence_penalty = *v;
  if (auto v = get_number(body, "frequency_penalty")) p.frequency_penalty = *v;
  if (auto v = get_number(body, "repetition_penalty")) p.repetition_penalty = *v;
  if (const ojson* v = find_value(body, "seed")) {
    if (!v->is_number_integer()) wrong_type("seed", "an integer", *v);
    p.seed = v->is_number_unsigned() ? v->get<uint64_t>() : uint64_t(v->get<int64_t>());
  }
  if (const ojson* v = find_value(body, "stop")) {
    if (v->is_string()) {
      p.stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (size_t i = 0; i < v->size(); ++i) {
        if (!(*v)[i].is_string()) wrong_type(str_cat("stop[", i, "]"), "a string", (*v)[i]);
        p.stop.push_back((*v)[i].get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
    if (int64_t(p.stop.size()) > kMaxStopStrings)
      throw invalid_request(str_cat("'stop' has ", p.stop.size(), " strings, more than the limit of ", kMaxStopStrings,
                                    " (kMaxStopStrings)"),
                            "stop");
    for (size_t i = 0; i < p.stop.size(); ++i) {
      if (p.stop[i].empty()) throw invalid_request(str_cat("'stop' entry ", i, " is empty: stop strings must be non-empty"), "stop");
      if (int64_t(p.stop[i].size()) > kMaxStopStringBytes)
        throw invalid_request(str_cat("'stop' entry ", i, " is ", p.stop[i].size(), " bytes long, more than the limit of ",
                                      kMaxStopStringBytes, " (kMaxStopStringBytes)"),
                              "stop");
    }
  }
  if (const ojson* v = find_value(body, "stop_token_ids")) p.stop_token_ids = get_token_list("stop_token_ids", *v);
  if (const ojson* v = find_value(body, "logit_bias")) {
    if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to biases", *v);
    if (int64_t(v->size()) > kMaxLogitBiasEntries)
      throw invalid_request(str_cat("'logit_bias' has ", v->size(), " entries, more than the limit of ",
                                    kMaxLogitBiasEntries, " (kMaxLogitBiasEntries)"),
                            "logit_bias");
    for (auto it = v->begin(); it != v->end(); ++it) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(it.key(), &used);
        if (used != it.key().size()) id = -1;
      } catch (...) {
        id = -1;
      }
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        throw invalid_request(str_cat("'logit_bias' key '", it.key(), "' is not a token id"), "logit_bias");
      if (!it->is_number()) wrong_type(str_cat("logit_bias[", it.key(), "]"), "a number", *it);
      p.logit_bias.push_back({int32_t(id), it->get<float>()});
    }
  }
  p.ignore_eos = get_bool(body, "ignore_eos", false);
  g.skip_special_tokens = get_bool(body, "skip_special_tokens", true);

  g.stream = get_bool(body, "stream", false);
  if (const ojson* v = find_value(body, "stream_options")) {
    if (!v->is_object()) wrong_type("stream_options", "an object", *v);
    if (!g.stream) throw invalid_request("'stream_options' is only allowed when 'stream' is true", "stream_options");
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key() == "include_usage") {
        if (!it->is_null() && !it->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *it);
        g.include_usage = it->is_boolean() && it->get<bool>();
      } else if (it.key() == "continuous_usage_stats" && (it->is_null() || (it->is_boolean() && !it->get<bool>()))) {
      } else {
        throw invalid_request(str_cat("unsupported field 'stream_options.", it.key(), "'"), "stream_options");
      }
    }
  }
  parse_structured(body, g);
}

// response_format / structured_outputs: shapes only (what they ask for is compiled later).
void parse_structured(const ojson& body, GenerationFields& g) {
  if (const ojson* v = find_value(body, "response_format")) {
    if (!v->is_object()) wrong_type("response_format", "an object", *v);
    const ojson* type = find_value(*v, "type");
    if (!type || !type->is_string())
      throw invalid_request("'response_format.type' is required: one of \"text\", \"json_object\", \"json_schema\"",
                            "response_format");
    const std::string t = type->get<std::string>();
    for (auto it = v->begin(); it != v->end(); ++it)
      if (it.key() != "type" && !(t == "json_schema" && it.key() == "json_schema"))
        throw invalid_request(str_cat("unknown field 'response_format.", it.key(), "' for type \"", t, "\""),
                              "response_format");
    if (t == "json_schema") {
      const ojson* js = find_value(*v, "json_schema");
      if (!js || !js->is_object())
        throw invalid_request("'response_format.json_schema' is required and must be an object", "response_format");
      for (auto it = js->begin(); it != js->end(); ++it)
        if (it.key() != "name" && it.key() != "schema" && it.key() != "strict" && it.key() != "description")
          throw invalid_request(str_cat("unknown field 'response_format.json_schema.", it.key(),
                                        "' (allowed: name, description, schema, strict)"),
                                "response_format");
      const ojson* name = find_value(*js, "name");
      if (!name || !name->is_string() || name->get<std::string>().empty() || name->get<std::string>().size() > 64 ||
          name->get<std::string>().find_first_not_of(
              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != std::string::npos)
        throw invalid_request("'response_format.json_schema.name' is required: 1 to 64 of a-z, A-Z, 0-9, _ and -",
                              "response_format");
      if (const ojson* st = find_value(*js, "strict"); st && !st->is_boolean())
        wrong_type("response_format.json_schema.strict", "a boolean", *st);
      if (const ojson* sc = find_value(*js, "schema"); sc && !sc->is_object() && !sc->is_boolean())
        wrong_type("response_format.json_schema.schema", "an object", *sc);
      g.response_format = *v;
    } else if (t == "json_object") {
      g.response_format = *v;
    } else if (t != "text") {
      throw invalid_request(str_cat("'response_format.type' = \"", t,
                                    "\" is not one of \"text\", \"json_object\", \"json_schema\""),
                            "response_format");
    }
  }
  if (const ojson* v = find_value(body, "structured_outputs")) {
    if (!v->is_object()) wrong_type("structured_outputs", "an object", *v);
    int kinds = 0;
    for (auto it = v->begin(); it != v->end(); ++it) {
      const std::string& k = it.key();
      if (it->is_null()) continue;
      const std::string f = "structured_outputs." + k;
      if (k == "json") {
        if (!it->is_object() && !it->is_string() && !it->is_boolean())
          wrong_type(f, "a JSON schema (object or JSON text)", *it);
      } else if (k == "regex" || k == "grammar") {
        if (!it->is_string()) wrong_type(f, "a string", *it);
      } else if (k == "choice") {
        if (!it->is_array() || it->empty()) wrong_type(f, "a non-empty array of strings", *it);
        if (int64_t(it->size()) > kMaxChoices)
          throw invalid_request(str_cat("'", f, "' has ", it->size(), " entries, more than the limit of ", kMaxChoices,
                                        " (kMaxChoices)"),
                                f);
        for (const ojson& c : *it)
          if (!c.is_string()) wrong_type(f, "a non-empty array of strings", *it);
      } else if (k == "json_object") {
        if (!it->is_boolean()) wrong_type(f, "a boolean", *it);
        if (!it->get<bool>()) continue;
      } else {
        throw invalid_request(str_cat("unsupported field '", f,
                                      "' (supported: json, regex, choice, grammar, json_object)"),
                              "structured_outputs");
      }
      ++kinds;
    }
    if (kinds != 1)
      throw invalid_request("'structured_outputs' must set exactly one of json, regex, choice, grammar, json_object",
                            "structured_outputs");
    if (!g.response_format.is_null())
      throw invalid_request("'structured_outputs' and 'response_format' cannot be combined", "structured_outputs");
    g.structured_outputs = *v;
  }
}

void finish_params(GenerationFields& g) {
  // Range checks shared with the offline path; vocabulary bounds are checked by the engine.
  SamplingParams probe = g.params;
  probe.max_tokens = g.max_tokens.value_or(std::max(1, probe.min_tokens));
  if (g.max_tokens && probe.min_tokens > *g.max_tokens && !g.max_tokens_is_default)
    throw invalid_request(str_cat("'min_tokens' = ", probe.min_tokens, " exceeds 'max_tokens' = ", *g.max_tokens),
                          "min_tokens");
  if (g.max_tokens_is_default) probe.max_tokens = std::max(probe.max_tokens, probe.min_tokens);
  try {
    probe.validate();
  } catch (const Error& e) {
    throw api_error_from_engine(e.what());
  }
}

std::string message_content(const ojson& msg, size_t i) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  const std::string field = str_cat("messages[", i, "].content");
  if (!it->is_array()) wrong_type(field, "a string or an array of content parts", *it);
  std::string text;
  for (size_t j = 0; j < it->size(); ++j) {
    const ojson& part = (*it)[j];
    const std::string pf = str_cat(field, "[", j, "]");
    if (!part.is_object()) wrong_type(pf, "an object", part);
    const std::string type = part.value("type", "");
    // Image and video parts (OpenAI's image_url, vLLM's video_url, image, video) would need the
    // vision tower of Qwen3.5 / Qwen3.6, which is not served: say so rather than "unknown part".
    static const std::set<std::string> media = {"image_url", "video_url", "image", "video", "input_image",
                                                "input_video"};
    if (media.count(type))
      throw invalid_request(str_cat("'", pf, ".type' = '", type,
                                    "' is not supported: image and video inputs need a vision model, and only text "
                                    "is served (the vision tower of Qwen3.5 / Qwen3.6 checkpoints is not loaded)"),
                            pf);
    if (type != "text")
      throw invalid_request(str_cat("'", pf, ".type' = '", type, "' is not supported: only text parts"), pf);
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) throw invalid_request(str_cat("'", pf, ".text' must be a string"), pf);
    if (j > 0) text += "\n";
    text += t->get<std::string>();
  }
  return text;
}

bool valid_function_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 &&
         n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos;
}

// tools, tool_choice, parallel_tool_calls (OpenAI's shapes; see ChatRequest).
void parse_tools(const ojson& body, ChatRequest& r) {
  std::vector<std::string> names;
  const ojson* tools = find_value(body, "tools");
  if (tools) {
    if (!tools->is_array()) wrong_type("tools", "an array", *tools);
    if (int64_t(tools->size()) > kMaxTools)
      throw invalid_request(str_cat("'tools' declares ", tools->size(), " functions, more than the limit of ", kMaxTools,
                                    " (kMaxTools)"),
                            "tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& t = (*tools)[i];
      const std::string f = str_cat("tools[", i, "]");
      if (!t.is_object()) wrong_type(f, "an object", t);
      if (t.value("type", "") != "function")
        throw invalid_request(str_cat("'", f, ".type' must be \"function\""), f + ".type");
      const ojson* fn = find_value(t, "function");
      if (!fn || !fn->is_object()) throw invalid_request(str_cat("'", f, ".function' is required and must be an object"), f + ".function");
      const ojson* name = find_value(*fn, "name");
      if (!name || !name->is_string() || !valid_function_name(name->get<std::string>()))
        throw invalid_request(str_cat("'", f, ".function.name' is required: 1 to 64 of a-z, A-Z, 0-9, _ and -"),
                              f + ".function.name");
      if (const ojson* p = find_value(*fn, "parameters"); p && !p->is_object())
        wrong_type(f + ".function.parameters", "an object (a JSON schema)", *p);
      if (std::find(names.begin(), names.end(), name->get<std::string>()) != names.end())
        throw invalid_request(str_cat("'", f, ".function.name' = '", name->get<std::string>(), "' is declared twice"),
                              f + ".function.name");
      names.push_back(name->get<std::string>());
    }
  }
  ojson choice = names.empty() ? ojson("none") : ojson("auto");
  if (const ojson* v = find_value(body, "tool_choice")) {
    if (v->is_string()) {
      const std::string c = v->get<std::string>();
      if (c != "none" && c != "auto" && c != "required")
        throw invalid_request(str_cat("'tool_choice' = \"", c, "\" is not one of \"none\", \"auto\", \"required\" "
                                      "or {\"type\": \"function\", \"function\": {\"name\": ...}}"),
                              "tool_choice");
      choice = c;
    } else if (v->is_object()) {
      const ojson* fn = find_value(*v, "function");
      const ojson* name = fn && fn->is_object() ? find_value(*fn, "name") : nullptr;
      if (v->value("type", "") != "function" || !name || !name->is_string())
        throw invalid_request("'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                              "tool_choice");
      choice = *v;
    } else {
      wrong_type("tool_choice", "a string or an object", *v);
    }
    if (choice != "none" && choice != "auto" && names.empty())
      throw invalid_request(str_cat("'tool_choice' = ", choice.dump(), " needs 'tools': no function is declared"),
                            "tool_choice");
    if (choice.is_object()) {
      const std::string n = choice["function"]["name"].get<std::string>();
      if (std::find(names.begin(), names.end(), n) == names.end()) {
        std::string known;
        for (const std::string& k : names) known += (known.empty() ? "" : ", ") + k;
        throw invalid_request(str_cat("'tool_choice' names function '", n, "', which is not in 'tools' (declared: ",
                                      known, ")"),
                              "tool_choice");
      }
    }
  }
  r.tool_choice = choice;
  r.parallel_tool_calls = get_bool(body, "parallel_tool_calls", true);
  if (tools && choice != "none" && !tools->empty()) r.tools = *tools;
  if (choice != "none" && (!r.response_format.is_null() || !r.structured_outputs.is_null()))
    throw invalid_request(str_cat("'tool_choice' = ", choice.dump(),
                                  " cannot be combined with 'response_format' or 'structured_outputs' "
                                  "(set tool_choice to \"none\")"),
                          "tool_choice");
}

}  // namespace

nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& msgs_in) {
  const ojson* msgs = &msgs_in;
  ojson result = ojson::array();
  if (!msgs->is_array()) wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) throw invalid_request("'messages' is empty: at least one message is required", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string name = str_cat("messages[", i, "]");
    if (!m.is_object()) wrong_type(name, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw invalid_request(str_cat("'", name, ".role' is required and must be a string"), name + ".role");
    std::string rs = role->get<std::string>();
    if (rs == "developer") rs = "system";
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool")
      throw invalid_request(str_cat("'", name, ".role' = '", rs, "' is not one of system, developer, user, assistant, tool"),
                            name + ".role");
    ojson out = m;
    out["role"] = rs;
    out["content"] = message_content(m, i);
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null() && !tc->is_array())
      wrong_type(name + ".tool_calls", "an array", *tc);
    result.push_back(std::move(out));
  }
  return result;
}

TokenizeRequest parse_tokenize_request(const nlohmann::ordered_json& body) {
  static const std::set<std::string> known = {"model", "prompt", "messages", "add_special_tokens", "return_token_strs",
                                              "add_generation_prompt", "tools", "chat_template_kwargs",
                                              "continue_final_message", "request_id"};  // the last: no id to give
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!known.count(it.key()) && !kIgnoredFields.count(it.key()))
      throw invalid_request(str_cat("unknown field '", it.key(), "'"), it.key());
  TokenizeRequest r;
  if (const ojson* v = find_value(body, "model")) {
    if (!v->is_string()) wrong_type("model", "a string", *v);
    r.model = v->get<std::string>();
  }
  if (get_bool(body, "continue_final_message", false))
    throw invalid_request("continue_final_message is not supported", "continue_final_message");
  r.return_token_strs = get_bool(body, "return_token_strs", false);
  const ojson* prompt = find_value(body, "prompt");
  const ojson* msgs = find_value(body, "messages");
  if ((prompt != nullptr) == (msgs != nullptr))
    throw invalid_request("exactly one of 'prompt' and 'messages' is required", prompt ? "messages" : "prompt");
  if (prompt) {
    if (!prompt->is_string()) wrong_type("prompt", "a string", *prompt);
    r.prompt = prompt->get<std::string>();
    r.add_special_tokens = get_bool(body, "add_special_tokens", true);
    return r;
  }
  r.chat = true;
  r.messages = normalize_messages(*msgs);
  r.add_special_tokens = get_bool(body, "add_special_tokens", false);
  r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  if (const ojson* v = find_value(body, "tools")) {
    if (!v->is_array()) wrong_type("tools", "an array", *v);
    if (int64_t(v->size()) > kMaxTools)
      throw invalid_request(str_cat("'tools' declares ", v->size(), " functions, more than the limit of ", kMaxTools,
                                    " (kMaxTools)"),
                            "tools");
    if (!v->empty()) r.tools = *v;
  }
  if (const ojson* v = find_value(body, "chat_template_kwargs")) {
    if (!v->is_object()) wrong_type("chat_template_kwargs", "an object", *v);
    r.chat_template_kwargs = *v;
  }
  return r;
}

std::vector<int32_t> parse_detokenize_request(const nlohmann::ordered_json& body, std::optional<std::string>& model) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "tokens" && it.key() != "request_id" && !kIgnoredFields.count(it.key()))
      throw invalid_request(str_cat("unknown field '", it.key(), "'"), it.key());
  if (const ojson* v = find_value(body, "model")) {
    if (!v->is_string()) wrong_type("model", "a string", *v);
    model = v->get<std::string>();
  }
  const ojson* t = find_value(body, "tokens");
  if (!t) throw invalid_request("'tokens' is required", "tokens");
  return get_token_list("tokens", *t);
}

nlohmann::ordered_json parse_json_body(const std::string& text) {
  check_json_limits(text, "request body");
  ojson body;
  try {
    body = ojson::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1E400
    throw invalid_request(str_cat("the request body is not valid JSON: ", e.what()));
  }
  if (!body.is_object()) throw invalid_request(str_cat("the request body must be a JSON object, got ", type_name(body)));
  return body;
}

ApiError api_error_from_engine(const std::string& message) {
  std::optional<std::string> param;
  const size_t q = message.find('\'');
  if (q != std::string::npos) {
    const size_t e = message.find('\'', q + 1);
    if (e != std::string::npos) param = message.substr(q + 1, e - q - 1);
  }
  return invalid_request(message, param);
}

namespace {
// --generate-config key -> request field names it provides a default for.
struct DefaultKey {
  const char* key;
  const char* field;
};
const DefaultKey kDefaultKeys[] = {
    {"max_new_tokens", "max_tokens"}, {"max_tokens", "max_tokens"}, {"temperature", "temperature"},
    {"top_p", "top_p"}, {"top_k", "top_k"}, {"min_p", "min_p"}, {"stop", "stop"}, {"stream", "stream"},
    {"ignore_eos", "ignore_eos"}, {"seed", "seed"}, {"min_tokens", "min_tokens"},
    {"presence_penalty", "presence_penalty"}, {"frequency_penalty", "frequency_penalty"},
    {"repetition_penalty", "repetition_penalty"}, {"stop_token_ids", "stop_token_ids"},
    {"skip_special_tokens", "skip_special_tokens"},
};
}  // namespace

void validate_generate_config(const nlohmann::json& defaults) {
  if (!defaults.is_object()) fail("--generate-config must be a JSON object");
  for (auto it = defaults.begin(); it != defaults.end(); ++it) {
    bool known = false;
    for (const DefaultKey& k : kDefaultKeys) known |= it.key() == k.key;
    if (!known) fail("--generate-config: unknown key '", it.key(), "'");
  }
  // Type and range checks: run the values through the request parser.
  ojson probe = ojson::object();
  apply_generate_defaults(probe, defaults, false);
  probe["prompt"] = "x";
  probe.erase("stream");
  try {
    parse_completion_request(probe, {});
  } catch (const ApiError& e) {
    fail("--generate-config: ", e.what());
  }
}

std::set<std::string> apply_generate_defaults(nlohmann::ordered_json& body, const nlohmann::json& defaults,
                                              bool chat) {
  std::set<std::string> applied;
  if (!defaults.is_object()) return applied;
  for (const DefaultKey& k : kDefaultKeys) {
    auto it = defaults.find(k.key);
    if (it == defaults.end()) continue;
    std::string field = k.field;
    if (field == "max_tokens") {
      if (body.contains("max_tokens") || (chat && body.contains("max_completion_tokens"))) continue;
    } else if (body.contains(field)) {
      continue;
    }
    if (applied.count(field)) continue;
    body[field] = ojson(*it);
    applied.insert(field);
  }
  return applied;
}

CompletionRequest parse_completion_request(const nlohmann::ordered_json& body, const std::set<std::string>& defaulted) {
  check_fields(body, false);
  CompletionRequest r;
  parse_common(body, defaulted, false, r);
  r.echo = get_bool(body, "echo", false);
  if (const ojson* v = find_value(body, "logprobs")) {
    if (v->is_boolean()) {  // some clients send false for "none"
      if (v->get<bool>()) wrong_type("logprobs", "an integer (number of alternatives, 0 to 20)", *v);
    } else {
      r.params.logprobs = int32_t(as_int("logprobs", *v, 0, kMaxTopLogprobs));
    }
  }
  if (r.echo && r.params.logprobs)
    throw invalid_request("'echo' together with 'logprobs' needs prompt logprobs, which are not supported", "echo");

  const ojson* prompt = find_value(body, "prompt");
  if (!prompt) throw invalid_request("'prompt' is required", "prompt");
  if (prompt->is_string()) {
    r.prompts.push_back({true, prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) throw invalid_request("'prompt' is an empty array", "prompt");
    const ojson& first = (*prompt)[0];
    if (first.is_number_integer()) {
      r.prompts.push_back({false, {}, get_token_list("prompt", *prompt)});
    } else {
      for (size_t i = 0; i < prompt->size(); ++i) {
        const ojson& p = (*prompt)[i];
        const std::string name = str_cat("prompt[", i, "]");
        if (p.is_string()) {
          r.prompts.push_back({true, p.get<std::string>(), {}});
        } else if (p.is_array()) {
          r.prompts.push_back({false, {}, get_token_list(name, p)});
        } else {
          wrong_type(name, "a string or an array of token ids", p);
        }
      }
    }
  } else {
    wrong_type("prompt", "a string, an array of strings, an array of token ids or an array of token-id arrays",
               *prompt);
  }
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const PromptInput& p = r.prompts[i];
    if ((p.is_text && p.text.empty()) || (!p.is_text && p.token_ids.empty()))
      throw invalid_request(r.prompts.size() == 1 ? std::string("'prompt' is empty")
                                                  : str_cat("'prompt[", i, "]' is empty"),
                            "prompt");
  }
  finish_params(r);
  return r;
}

ChatRequest parse_chat_request(const nlohmann::ordered_json& body, const std::set<std::string>& defaulted) {
  check_fields(body, true);
  ChatRequest r;
  parse_common(body, defaulted, true, r);

  if (const ojson* v = find_value(body, "logprobs")) {
    if (!v->is_boolean()) wrong_type("logprobs", "a boolean", *v);
    r.logprobs = v->get<bool>();
  }
  if (auto v = get_int(body, "top_logprobs", 0, kMaxTopLogprobs)) {
    if (!r.logprobs) throw invalid_request("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
    r.params.logprobs = int32_t(*v);
  } else if (r.logprobs) {
    r.params.logprobs = 0;
  }
  r.add_generation_prompt = get_bool(body, "add_generation_prompt", true);
  r.include_reasoning = get_bool(body, "include_reasoning", true);

  const ojson* msgs = find_value(body, "messages");
  if (!msgs) throw invalid_request("'messages' is required", "messages");
  r.messages = normalize_messages(*msgs);

  parse_tools(body, r);
  if (const ojson* v = find_value(body, "chat_template_kwargs")) {
    if (!v->is_object()) wrong_type("chat_template_kwargs", "an object", *v);
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt")
        throw invalid_request(str_cat("'chat_template_kwargs.", it.key(), "' is not allowed: use the request field"),
                              "chat_template_kwargs");
      if (it.key() == "enable_thinking" && !it->is_boolean())
        wrong_type("chat_template_kwargs.enable_thinking", "a boolean", *it);
    }
    r.chat_template_kwargs = *v;
  }
  finish_params(r);
  return r;
}

}  // namespace pypto
