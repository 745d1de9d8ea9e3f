#include "serve/pooling_options.h"

#include <bit>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/pooling_protocol.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

const ojson* present(const ojson& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> opt_bool(const ojson& body, const char* key) {
  const ojson* v = present(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw invalid_request(str_cat("'", key, "' must be true or false, got ", v->dump()), key);
  return v->get<bool>();
}

std::optional<std::string> opt_enum(const ojson& body, const char* key, std::initializer_list<const char*> allowed) {
  const ojson* v = present(body, key);
  if (!v) return std::nullopt;
  std::string list;
  for (const char* a : allowed) list += str_cat(list.empty() ? "" : ", ", a);
  if (v->is_string())
    for (const char* a : allowed)
      if (v->get<std::string>() == a) return std::string(a);
  throw invalid_request(str_cat("'", key, "' is ", v->dump(), " (allowed: ", list, ")"), key);
}

// use_activation and the older names of the same switch on this endpoint; two that disagree
// are refused rather than one silently winning.
std::optional<bool> activation(const ojson& body, PoolingEndpoint ep) {
  std::vector<const char*> names = {"use_activation"};
  if (ep == PoolingEndpoint::Embeddings || ep == PoolingEndpoint::Pooling) names.push_back("normalize");
  if (ep == PoolingEndpoint::Score || ep == PoolingEndpoint::Rerank) names.insert(names.end(), {"activation", "softmax"});
  std::optional<bool> out;
  const char* from = nullptr;
  for (const char* n : names) {
    const std::optional<bool> v = opt_bool(body, n);
    if (!v) continue;
    if (out && *out != *v)
      throw invalid_request(str_cat("'", n, "' (", *v, ") contradicts '", from, "' (", *out,
                                    "): they are the same switch (use_activation)"),
                            n);
    out = v;
    from = n;
  }
  return out;
}

uint16_t to_float16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xff) return uint16_t(sign | 0x7c00u | (m ? 0x200u : 0u));  // inf, nan
  const int32_t he = int32_t(e) - 127 + 15;
  if (he >= 0x1f) return uint16_t(sign | 0x7c00u);  // too large: inf
  uint32_t mant = m, shift = 13, base = uint32_t(he) << 10;
  if (he <= 0) {  // a float16 subnormal (or zero): value = half * 2^-24
    if (he < -10) return uint16_t(sign);
    mant = m | 0x800000u;
    shift = uint32_t(14 - he);
    base = 0;
  }
  uint32_t half = base | (mant >> shift);
  const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
  if (rem > mid || (rem == mid && (half & 1u))) ++half;  // a carry into the exponent is right
  return uint16_t(sign | half);
}

uint16_t to_bfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // nan stays nan
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace

std::vector<const char*> pooling_option_fields(PoolingEndpoint ep) {
  std::vector<const char*> f = {"user", "truncate_prompt_tokens", "truncation_side", "use_activation",
                                "request_id", "priority", "cache_salt", "padding"};
  if (ep == PoolingEndpoint::Embeddings || ep == PoolingEndpoint::Pooling)
    f.insert(f.end(), {"normalize", "add_special_tokens", "embed_dtype", "endianness"});
  else
    f.insert(f.end(), {"activation", "softmax"});
  return f;
}

PoolingOptions parse_pooling_options(const ojson& body, PoolingEndpoint ep) {
  PoolingOptions o;
  if (const ojson* v = present(body, "user"); v && !v->is_string())
    throw invalid_request(str_cat("'user' must be a string, got ", v->dump()), "user");
  if (const ojson* v = present(body, "truncate_prompt_tokens")) {
    if (!v->is_number_integer() || v->get<int64_t>() == 0 || v->get<int64_t>() < -1)
      throw invalid_request(str_cat("'truncate_prompt_tokens' is ", v->dump(),
                                    " (allowed: -1 for up to --max-model-len, or a token count >= 1)"),
                            "truncate_prompt_tokens");
    o.truncate_prompt_tokens = v->get<int64_t>();
  }
  if (auto side = opt_enum(body, "truncation_side", {"left", "right"})) o.truncate_keep_last = *side == "left";
  o.use_activation = activation(body, ep);
  if (const ojson* v = present(body, "request_id")) {
    if (!v->is_string() || v->get<std::string>().empty() || v->get<std::string>().size() > 256)
      throw invalid_request(str_cat("'request_id' must be a string of 1 to 256 characters, got ", v->dump().substr(0, 64)),
                            "request_id");
    o.request_id = v->get<std::string>();
  }
  if (const ojson* v = present(body, "priority")) {
    if (!v->is_number_integer())
      throw invalid_request(str_cat("'priority' must be an integer, got ", v->dump()), "priority");
    if (v->get<int64_t>() != 0)
      throw invalid_request(str_cat("'priority' is ", v->dump(),
                                    "; this server schedules first come, first served, so only 0 is accepted"),
                            "priority");
  }
  if (present(body, "cache_salt"))
    throw invalid_request("'cache_salt' is not supported: the prefix cache is shared by all requests (start the server "
                          "with --no-enable-prefix-caching to keep requests from sharing cached prefixes)",
                          "cache_salt");
  if (auto pad = opt_enum(body, "padding", {"do_not_pad", "max_length"}); pad && *pad == "max_length")
    throw invalid_request("'padding' max_length is not supported: pad tokens after the last real token would change "
                          "a last-token pooled vector (allowed: do_not_pad)",
                          "padding");
  if (ep == PoolingEndpoint::Embeddings || ep == PoolingEndpoint::Pooling) {
    if (auto v = opt_bool(body, "add_special_tokens")) o.add_special_tokens = *v;
    if (auto d = opt_enum(body, "embed_dtype", {"float32", "float16", "bfloat16"}))
      o.embed_dtype = *d == "float32" ? EmbedDType::Float32 : *d == "float16" ? EmbedDType::Float16 : EmbedDType::BFloat16;
    if (auto e = opt_enum(body, "endianness", {"native", "little", "big"}))
      o.big_endian = *e == "big" || (*e == "native" && std::endian::native == std::endian::big);
  }
  return o;
}

std::optional<int64_t> resolve_truncation(const PoolingOptions& o, int64_t max_model_len) {
  if (!o.truncate_prompt_tokens) return std::nullopt;
  if (*o.truncate_prompt_tokens == -1) return max_model_len;
  if (*o.truncate_prompt_tokens > max_model_len)
    throw invalid_request(str_cat("'truncate_prompt_tokens' is ", *o.truncate_prompt_tokens,
                                  "; at most this model's maximum context length, ", max_model_len,
                                  " tokens (--max-model-len), or -1 for that"),
                          "truncate_prompt_tokens");
  return *o.truncate_prompt_tokens;
}

void truncate_tokens(std::vector<int32_t>& ids, std::optional<int64_t> keep, const PoolingOptions& o) {
  if (!keep || int64_t(ids.size()) <= *keep) return;
  if (o.truncate_keep_last) ids.erase(ids.begin(), ids.end() - *keep);
  else ids.resize(size_t(*keep));
}

std::string base64_embedding(const std::vector<float>& v, const PoolingOptions& o) {
  std::vector<unsigned char> bytes;
  auto put = [&](uint32_t bits, int n) {  // n bytes of `bits`, little-endian unless big_endian
    for (int i = 0; i < n; ++i) bytes.push_back(uint8_t(bits >> (8 * (o.big_endian ? n - 1 - i : i))));
  };
  for (float x : v) {
    switch (o.embed_dtype) {
      case EmbedDType::Float32: put(std::bit_cast<uint32_t>(x), 4); break;
      case EmbedDType::Float16: put(to_float16(x), 2); break;
      case EmbedDType::BFloat16: put(to_bfloat16(x), 2); break;
    }
  }
  return base64_encode(bytes.data(), bytes.size());
}

std::string response_id(const PoolingOptions& o, const char* prefix, const std::string& generated) {
  return o.request_id ? str_cat(prefix, *o.request_id) : generated;
}

}  // namespace pypto
