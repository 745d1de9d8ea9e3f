#include "serve/pooling_protocol.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "serve/api_error.h"
#include "serve/openai_protocol.h"
#include "serve/pooling_options.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

const char* type_name(const ojson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

// Refuses any field that is neither in `allowed` nor one of `ep`'s vLLM extras (pooling_options.h).
void check_fields(const ojson& body, std::initializer_list<const char*> own, PoolingEndpoint ep) {
  if (!body.is_object()) throw invalid_request("the request body must be a JSON object");
  std::vector<const char*> allowed(own);
  for (const char* f : pooling_option_fields(ep)) allowed.push_back(f);
  const std::set<std::string> ok(allowed.begin(), allowed.end());
  for (const auto& [key, value] : body.items())
    if (!ok.contains(key)) {
      std::string list;
      for (const char* a : allowed) list += str_cat(list.empty() ? "" : ", ", a);
      throw invalid_request(str_cat("unknown field '", key, "' (this endpoint takes: ", list, ")"), key);
    }
}

std::optional<std::string> opt_string(const ojson& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) throw invalid_request(str_cat("'", key, "' must be a string, got ", type_name(*it)), key);
  return it->get<std::string>();
}

bool opt_bool(const ojson& body, const char* key, bool dflt) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) throw invalid_request(str_cat("'", key, "' must be true or false, got ", type_name(*it)), key);
  return it->get<bool>();
}

int32_t token_id(const ojson& v, const std::string& field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    throw invalid_request(str_cat("'", field, "' must be a token id (an integer >= 0), got ", v.dump()), "input");
  return int32_t(v.get<int64_t>());
}

// A list of texts: a string, or a non-empty list of non-empty strings.
std::vector<std::string> text_list(const ojson& v, const char* key) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.empty()) throw invalid_request(str_cat("'", key, "' must not be an empty list"), key);
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string())
        throw invalid_request(str_cat("'", key, "[", i, "]' must be a string, got ", type_name(v[i])), key);
      out.push_back(v[i].get<std::string>());
    }
  } else {
    throw invalid_request(str_cat("'", key, "' must be a string or a list of strings, got ", type_name(v)), key);
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].empty())
      throw invalid_request(str_cat("'", key, v.is_array() ? str_cat("[", i, "]") : std::string(), "' is an empty string"), key);
  return out;
}

void parse_encoding(const ojson& body, EmbeddingRequest& r) {
  if (auto f = opt_string(body, "encoding_format")) {
    if (*f != "float" && *f != "base64")
      throw invalid_request(str_cat("'encoding_format' is '", *f, "' (allowed: float, base64)"), "encoding_format");
    r.base64 = *f == "base64";
  }
  if (auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) throw invalid_request(str_cat("'dimensions' must be an integer, got ", type_name(*it)), "dimensions");
    r.dimensions = it->get<int64_t>();
  }
}

// vLLM's chat form: `messages` in place of `input`, rendered with the model's chat template into
// one input. add_generation_prompt defaults to false and add_special_tokens too (the template
// writes the special tokens), as vLLM's EmbeddingChatRequest. False when the body has no messages.
bool parse_chat_form(const ojson& body, EmbeddingRequest& r) {
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  const bool has_input = body.contains("input") && !body["input"].is_null();
  if (!has_messages) {
    for (const char* k : {"add_generation_prompt", "continue_final_message", "chat_template_kwargs"})
      if (body.contains(k) && !body[k].is_null())
        throw invalid_request(str_cat("'", k, "' applies to the chat form (messages), not to input"), k);
    return false;
  }
  if (has_input) throw invalid_request("give 'input' or 'messages', not both", "messages");
  r.messages = normalize_messages(body["messages"]);
  r.add_generation_prompt = opt_bool(body, "add_generation_prompt", false);
  if (opt_bool(body, "continue_final_message", false))
    throw invalid_request("'continue_final_message' true is not supported", "continue_final_message");
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      throw invalid_request(str_cat("'chat_template_kwargs' must be an object, got ", type_name(*it)), "chat_template_kwargs");
    for (const auto& [k, v] : it->items())
      if (k == "messages" || k == "tools" || k == "add_generation_prompt")
        throw invalid_request(str_cat("'chat_template_kwargs.", k, "' is not allowed: use the request field"),
                              "chat_template_kwargs");
    r.chat_template_kwargs = *it;
  }
  if (!body.contains("add_special_tokens") || body["add_special_tokens"].is_null()) r.opts.add_special_tokens = false;
  return true;
}

}  // namespace

EmbeddingRequest parse_embedding_request(const ojson& body, bool pooling_endpoint) {
  const PoolingEndpoint ep = pooling_endpoint ? PoolingEndpoint::Pooling : PoolingEndpoint::Embeddings;
  if (pooling_endpoint)
    check_fields(body, {"model", "input", "encoding_format", "dimensions", "task", "messages", "add_generation_prompt",
                        "continue_final_message", "chat_template_kwargs"},
                 ep);
  else
    check_fields(body, {"model", "input", "encoding_format", "dimensions", "messages", "add_generation_prompt",
                        "continue_final_message", "chat_template_kwargs"},
                 ep);
  EmbeddingRequest r;
  r.model = opt_string(body, "model");
  r.task = opt_string(body, "task");
  r.opts = parse_pooling_options(body, ep);
  parse_encoding(body, r);
  if (parse_chat_form(body, r)) return r;
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) throw invalid_request("'input' is required", "input");
  const ojson& v = *in;
  if (v.is_string()) {
    if (v.get<std::string>().empty()) throw invalid_request("'input' is an empty string", "input");
    r.inputs.push_back({true, v.get<std::string>(), {}});
  } else if (v.is_array()) {
    if (v.empty()) throw invalid_request("'input' must not be an empty list", "input");
    if (v[0].is_number_integer()) {  // one input as token ids
      EmbeddingInput e{false, {}, {}};
      for (size_t i = 0; i < v.size(); ++i) e.token_ids.push_back(token_id(v[i], str_cat("input[", i, "]")));
      r.inputs.push_back(std::move(e));
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        const ojson& x = v[i];
        if (x.is_string()) {
          if (x.get<std::string>().empty()) throw invalid_request(str_cat("'input[", i, "]' is an empty string"), "input");
          r.inputs.push_back({true, x.get<std::string>(), {}});
        } else if (x.is_array()) {
          if (x.empty()) throw invalid_request(str_cat("'input[", i, "]' is an empty list of token ids"), "input");
          EmbeddingInput e{false, {}, {}};
          for (size_t j = 0; j < x.size(); ++j) e.token_ids.push_back(token_id(x[j], str_cat("input[", i, "][", j, "]")));
          r.inputs.push_back(std::move(e));
        } else {
          throw invalid_request(str_cat("'input[", i, "]' must be a string or a list of token ids, got ", type_name(x)),
                                "input");
        }
      }
    }
  } else {
    throw invalid_request(str_cat("'input' must be a string, a list of strings, a list of token ids or a list of "
                                  "lists of token ids, got ",
                                  type_name(v)),
                          "input");
  }
  return r;
}

RerankRequest parse_rerank_request(const ojson& body) {
  check_fields(body, {"model", "query", "documents", "top_n", "return_documents", "instruction"}, PoolingEndpoint::Rerank);
  RerankRequest r;
  r.model = opt_string(body, "model");
  r.opts = parse_pooling_options(body, PoolingEndpoint::Rerank);
  auto q = opt_string(body, "query");
  if (!q) throw invalid_request("'query' is required", "query");
  if (q->empty()) throw invalid_request("'query' is an empty string", "query");
  r.query = *q;
  auto d = body.find("documents");
  if (d == body.end() || d->is_null()) throw invalid_request("'documents' is required", "documents");
  if (!d->is_array()) throw invalid_request(str_cat("'documents' must be a list, got ", type_name(*d)), "documents");
  if (d->empty()) throw invalid_request("'documents' must not be an empty list", "documents");
  for (size_t i = 0; i < d->size(); ++i) {
    const ojson& x = (*d)[i];
    std::string text;
    if (x.is_string()) text = x.get<std::string>();
    else if (x.is_object() && x.contains("text") && x["text"].is_string()) text = x["text"].get<std::string>();
    else
      throw invalid_request(str_cat("'documents[", i, "]' must be a string or an object {\"text\": string}, got ",
                                    type_name(x)),
                            "documents");
    if (text.empty()) throw invalid_request(str_cat("'documents[", i, "]' is an empty string"), "documents");
    r.documents.push_back(std::move(text));
  }
  if (auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      throw invalid_request(str_cat("'top_n' must be an integer >= 0 (0: all), got ", it->dump()), "top_n");
    r.top_n = it->get<int64_t>();
  }
  r.return_documents = opt_bool(body, "return_documents", true);
  r.instruction = opt_string(body, "instruction");
  return r;
}

ScoreRequest parse_score_request(const ojson& body) {
  check_fields(body, {"model", "text_1", "text_2", "queries", "documents", "items", "data_1", "data_2", "instruction"},
               PoolingEndpoint::Score);
  ScoreRequest r;
  r.model = opt_string(body, "model");
  r.opts = parse_pooling_options(body, PoolingEndpoint::Score);
  // vLLM's four spellings of the two sides; exactly one pair.
  static const std::pair<const char*, const char*> kPairs[] = {
      {"text_1", "text_2"}, {"queries", "documents"}, {"queries", "items"}, {"data_1", "data_2"}};
  auto has = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  std::vector<std::pair<const char*, const char*>> given;
  for (const auto& p : kPairs)
    if (has(p.first) || has(p.second)) given.push_back(p);
  if (given.size() == 2 && given[0].first == given[1].first && !(has(given[0].second) && has(given[1].second)))
    given.erase(has(given[0].second) ? given.begin() + 1 : given.begin());  // queries with documents or items
  if (given.empty()) throw invalid_request("'text_1' is required (with 'text_2'; or queries/documents, queries/items, "
                                           "data_1/data_2)", "text_1");
  if (given.size() > 1) {
    const char* extra = has(given[1].first) && given[1].first != given[0].first ? given[1].first : given[1].second;
    throw invalid_request(str_cat("'", extra, "' mixes two spellings of the score request's sides: give one pair of "
                                  "text_1/text_2, queries/documents, queries/items or data_1/data_2"),
                          extra);
  }
  r.first_field = given[0].first;
  r.second_field = given[0].second;
  for (const char* k : {r.first_field, r.second_field})
    if (!has(k)) throw invalid_request(str_cat("'", k, "' is required"), k);
  std::vector<std::string> a = text_list(body[r.first_field], r.first_field),
                           b = text_list(body[r.second_field], r.second_field);
  if (a.size() == 1 && b.size() > 1) a.assign(b.size(), a[0]);
  if (a.size() != b.size())
    throw invalid_request(str_cat("'", r.first_field, "' has ", a.size(), " texts and '", r.second_field, "' ", b.size(),
                                  ": give one ", r.first_field, " for all, or as many as ", r.second_field),
                          r.second_field);
  r.queries = std::move(a);
  r.documents = std::move(b);
  r.instruction = opt_string(body, "instruction");
  return r;
}

std::vector<float> matryoshka_normalize(const std::vector<float>& v, std::optional<int64_t> d, bool normalize) {
  const size_t n = d ? size_t(*d) : v.size();
  PYPTO_ASSERT(n <= v.size(), "dimensions ", n, " of a ", v.size(), "-value vector");
  std::vector<float> out(v.begin(), v.begin() + ptrdiff_t(n));
  if (!normalize) return out;
  double ss = 0;
  for (float x : out) ss += double(x) * double(x);
  const double norm = std::sqrt(ss);
  if (norm > 0)
    for (float& x : out) x = float(double(x) / norm);
  return out;
}

std::string base64_encode(const unsigned char* p, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? uint32_t(p[i + 2]) : 0);
    out += kAlphabet[(b >> 18) & 63];
    out += kAlphabet[(b >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(b >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[b & 63] : '=';
  }
  return out;
}

std::string base64_f32le(const std::vector<float>& v) {
  static_assert(std::endian::native == std::endian::little, "base64 embeddings assume a little-endian host");
  return base64_encode(reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace pypto
