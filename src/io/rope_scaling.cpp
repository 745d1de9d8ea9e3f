#include "io/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace pypto {

namespace {

// 0.1 · m · ln(s) + 1 for s > 1 (YaRN's magnitude correction), 1 otherwise.
double yarn_mscale(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

}  // namespace

RopeScaling parse_rope_scaling(const nlohmann::json& rs, int64_t max_position_embeddings, const std::string& path) {
  RopeScaling r;
  if (rs.is_null()) return r;
  if (!rs.is_object()) fail(path, ": rope_scaling must be null or an object, got ", json_type_name(rs));
  const std::string where = path + ": rope_scaling";
  JsonFields f(rs, where);
  std::string type = "default";
  for (const char* k : {"type", "rope_type"})  // "type" is the older spelling
    if (f.has(k)) type = f.req_string(k);
  if (type == "default") return r;
  if (type != "yarn")
    fail(where, " type '", type, "' is not supported (supported: default, yarn; linear, dynamic, llama3 and longrope are not)");
  static const std::set<std::string> known = {"type", "rope_type", "factor", "original_max_position_embeddings",
                                              "beta_fast", "beta_slow", "truncate", "attention_factor",
                                              "mscale", "mscale_all_dim", "rope_theta"};
  for (const auto& [k, v] : rs.items())
    if (!known.count(k)) fail(where, ": field '", k, "' is not a YaRN field (known: factor, original_max_position_embeddings, beta_fast, beta_slow, truncate, attention_factor, mscale, mscale_all_dim)");
  r.yarn = true;
  r.original_max_position_embeddings = max_position_embeddings;
  if (auto v = f.opt_int("original_max_position_embeddings")) {
    if (*v <= 0) fail(where, ": field 'original_max_position_embeddings' must be a positive integer, got ", *v);
    r.original_max_position_embeddings = *v;
  }
  if (auto v = f.opt_number("factor")) r.factor = *v;
  else if (f.has("original_max_position_embeddings"))  // transformers: the ratio of the two lengths
    r.factor = double(max_position_embeddings) / double(r.original_max_position_embeddings);
  else fail(where, ": YaRN needs 'factor' (or 'original_max_position_embeddings' to derive it)");
  if (!(r.factor >= 1) || !std::isfinite(r.factor)) fail(where, ": field 'factor' must be a number >= 1, got ", r.factor);
  r.beta_fast = f.opt_number("beta_fast").value_or(32.0);
  r.beta_slow = f.opt_number("beta_slow").value_or(1.0);
  if (!(r.beta_fast > 0) || !(r.beta_slow > 0))
    fail(where, ": beta_fast and beta_slow must be > 0, got ", r.beta_fast, " and ", r.beta_slow);
  r.truncate = f.opt_bool("truncate").value_or(true);
  const std::optional<double> mscale = f.opt_number("mscale"), mscale_all = f.opt_number("mscale_all_dim");
  if (auto a = f.opt_number("attention_factor")) {
    if (!(*a > 0)) fail(where, ": field 'attention_factor' must be > 0, got ", *a);
    r.attention_factor = *a;
  } else if (mscale && mscale_all && *mscale != 0 && *mscale_all != 0) {
    r.attention_factor = yarn_mscale(r.factor, *mscale) / yarn_mscale(r.factor, *mscale_all);
  } else {
    r.attention_factor = yarn_mscale(r.factor, 1.0);
  }
  return r;
}

int64_t model_max_positions(const ModelConfig& c) {
  if (!c.rope_scaling.yarn) return c.max_position_embeddings;
  const auto extended = int64_t(std::floor(c.rope_scaling.factor * double(c.rope_scaling.original_max_position_embeddings)));
  return std::max(c.max_position_embeddings, extended);
}

void check_max_model_len(const ModelConfig& c, int64_t max_model_len) {
  const int64_t limit = model_max_positions(c);
  if (max_model_len <= limit) return;
  if (c.rope_scaling.yarn)
    fail("--max-model-len ", max_model_len, " exceeds the model's ", limit, " positions (YaRN factor ",
         c.rope_scaling.factor, " x original_max_position_embeddings ", c.rope_scaling.original_max_position_embeddings,
         "); lower --max-model-len or raise rope_scaling.factor in config.json");
  fail("--max-model-len ", max_model_len, " exceeds the model's max_position_embeddings (", limit,
       "); lower it, or extend the context with YaRN in config.json, e.g. \"rope_scaling\": {\"rope_type\": \"yarn\", "
       "\"factor\": 4.0, \"original_max_position_embeddings\": 32768} for Qwen3 up to 131,072");
}

}  // namespace pypto
