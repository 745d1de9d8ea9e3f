#include "cli/generate_config.h"

#include <algorithm>

#include "core/error.h"

namespace pypto::cli {

const std::vector<std::string>& generate_config_keys() {
  static const std::vector<std::string> keys = {
      "max_new_tokens", "max_tokens", "min_tokens", "temperature", "top_p", "top_k", "min_p",
      "seed", "stop", "stop_token_ids", "ignore_eos", "repetition_penalty", "presence_penalty",
      "frequency_penalty", "n", "logprobs"};
  return keys;
}

namespace {

std::string allowed_keys() {
  std::string s;
  for (const auto& k : generate_config_keys()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

[[noreturn]] void bad(const std::string& key, const char* expected, const nlohmann::json& v) {
  fail("--generate-config: '", key, "' must be ", expected, ", got ", v.dump());
}

int32_t as_int(const std::string& key, const nlohmann::json& v) {
  // JSON booleans are not integers here (the seed rejects True for max_new_tokens too).
  if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)
    bad(key, "an integer", v);
  return static_cast<int32_t>(v.get<int64_t>());
}

float as_float(const std::string& key, const nlohmann::json& v) {
  if (!v.is_number()) bad(key, "a number", v);
  return v.get<float>();
}

}  // namespace

nlohmann::json parse_generate_config(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("--generate-config: invalid JSON: ", e.what());
  }
  if (!j.is_object()) fail("--generate-config: expected a JSON object, got ", j.dump());
  const auto& keys = generate_config_keys();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      fail("--generate-config: unknown key '", it.key(), "' (allowed: ", allowed_keys(), ")");
  if (j.contains("max_new_tokens") && j.contains("max_tokens"))
    fail("--generate-config: give max_new_tokens or max_tokens, not both");
  SamplingParams p;
  apply_generate_config(j, p);  // type errors
  try {
    p.validate();
  } catch (const Error& e) {
    fail("--generate-config: ", e.what());
  }
  return j;
}

void apply_generate_config(const nlohmann::json& cfg, SamplingParams& p) {
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = *it;
    if (k == "max_new_tokens" || k == "max_tokens") p.max_tokens = as_int(k, v);
    else if (k == "min_tokens") p.min_tokens = as_int(k, v);
    else if (k == "temperature") p.temperature = as_float(k, v);
    else if (k == "top_p") p.top_p = as_float(k, v);
    else if (k == "top_k") {
      if (v.is_null()) p.top_k.reset();
      else p.top_k = as_int(k, v);
    } else if (k == "min_p") p.min_p = as_float(k, v);
    else if (k == "seed") {
      if (v.is_null()) p.seed.reset();
      else if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(k, "a non-negative integer", v);
      else p.seed = v.get<uint64_t>();
    } else if (k == "stop") {
      p.stop.clear();
      if (v.is_string()) p.stop.push_back(v.get<std::string>());
      else if (v.is_array()) {
        for (const auto& s : v) {
          if (!s.is_string()) bad(k, "a string or a list of strings", v);
          p.stop.push_back(s.get<std::string>());
        }
      } else bad(k, "a string or a list of strings", v);
    } else if (k == "stop_token_ids") {
      if (!v.is_array()) bad(k, "a list of integers", v);
      p.stop_token_ids.clear();
      for (const auto& s : v) p.stop_token_ids.push_back(as_int(k, s));
    } else if (k == "ignore_eos") {
      if (!v.is_boolean()) bad(k, "true or false", v);
      p.ignore_eos = v.get<bool>();
    } else if (k == "repetition_penalty") p.repetition_penalty = as_float(k, v);
    else if (k == "presence_penalty") p.presence_penalty = as_float(k, v);
    else if (k == "frequency_penalty") p.frequency_penalty = as_float(k, v);
    else if (k == "n") p.n = as_int(k, v);
    else if (k == "logprobs") {
      if (v.is_null()) p.logprobs.reset();
      else p.logprobs = as_int(k, v);
    } else fail("--generate-config: unknown key '", k, "' (allowed: ", allowed_keys(), ")");
  }
}

}  // namespace pypto::cli
