#include "serve/request_common.h"

#include <ctime>

#include "core/error.h"
#include "serve/request_limits.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

int32_t resolve_max_tokens(const GenerationFields& g, int64_t prompt_len, int64_t max_model_len,
                           const char* prompt_param) {
  if (prompt_len >= max_model_len)
    throw invalid_request(str_cat("This model's maximum context length is ", max_model_len,
                                  " tokens. However, your prompt has ", prompt_len,
                                  " tokens, which leaves no room for the completion (max_tokens ",
                                  g.max_tokens ? str_cat(*g.max_tokens) : std::string("unset"),
                                  "). Please shorten the prompt."),
                          prompt_param, "context_length_exceeded");
  const int64_t room = max_model_len - prompt_len;
  if (!g.max_tokens) return int32_t(std::min<int64_t>(room, std::numeric_limits<int32_t>::max()));
  if (g.max_tokens_is_default) return int32_t(std::min<int64_t>(*g.max_tokens, room));
  if (prompt_len + *g.max_tokens > max_model_len)
    throw invalid_request(str_cat("This model's maximum context length is ", max_model_len,
                                  " tokens. However, you requested ", prompt_len + *g.max_tokens, " tokens (",
                                  prompt_len, " in the prompt, ", *g.max_tokens,
                                  " for the completion). Please reduce the prompt or max_tokens."),
                          prompt_param, "context_length_exceeded");
  return *g.max_tokens;
}

void add_sequences(std::vector<SequenceSpec>& specs, const GenerationFields& g, size_t prompt_index,
                   const std::vector<int32_t>& prompt_ids, int32_t max_tokens) {
  int64_t total = int64_t(g.n) * max_tokens;
  for (const SequenceSpec& spec : specs) total += spec.params.max_tokens;
  if (total > kMaxRequestTokens)
    throw invalid_request(str_cat("n x max_tokens over the request's prompts is ", total,
                                  " tokens, more than the limit of ", kMaxRequestTokens,
                                  " (kMaxRequestTokens): lower n or max_tokens"),
                          "max_tokens");
  for (int32_t k = 0; k < g.n; ++k) {
    SequenceSpec spec;
    spec.index = int32_t(prompt_index) * g.n + k;
    spec.prompt_index = prompt_index;
    spec.seq_index = k;
    spec.prompt_token_ids = prompt_ids;
    spec.params = g.params;
    spec.params.n = 1;
    spec.params.max_tokens = max_tokens;
    if (spec.params.min_tokens > max_tokens)
      throw invalid_request(str_cat("'min_tokens' = ", spec.params.min_tokens, " exceeds the ", max_tokens,
                                    " tokens left for the completion"),
                            "min_tokens");
    specs.push_back(std::move(spec));
  }
}

bool drive_generation(ServerState& s, Generation& gen, std::chrono::steady_clock::time_point arrival,
                      const std::function<bool(std::vector<ChoiceDelta>&)>& emit) {
  const bool has_timeout = s.options.request_timeout_s > 0;
  const auto deadline = arrival + std::chrono::microseconds(int64_t(s.options.request_timeout_s * 1e6));
  while (!gen.done()) {
    std::vector<ChoiceDelta> deltas = gen.poll(std::chrono::milliseconds(20));
    if (!deltas.empty() && !emit(deltas)) {
      gen.abort();
      return false;
    }
    if (gen.done()) break;
    if (HttpServer::client_disconnected()) {
      gen.abort();
      return false;
    }
    if (s.stopping || (has_timeout && std::chrono::steady_clock::now() >= deadline)) {
      std::vector<ChoiceDelta> ab = gen.abort();
      return emit(ab);
    }
  }
  return true;
}

void throw_engine_error(const std::string& engine_error) {
  if (engine_error.empty()) return;
  throw ApiError(500, str_cat("the engine failed while generating: ", engine_error), "internal_server_error",
                 std::nullopt, "engine_error");
}

ojson usage_json(const Generation& gen) {
  ojson u;
  u["prompt_tokens"] = gen.prompt_tokens();
  u["completion_tokens"] = gen.completion_tokens();
  u["total_tokens"] = gen.prompt_tokens() + gen.completion_tokens();
  u["prompt_tokens_details"] = {{"cached_tokens", gen.cached_tokens()}};
  return u;
}

namespace {
std::string token_text(const Tokenizer& tok, int32_t id) {
  const int32_t ids[1] = {id};
  return tok.decode(ids, false);
}
ojson token_bytes_json(const Tokenizer& tok, int32_t id) {
  const std::string b = tok.is_added(id) ? tok.id_to_token(id) : tok.token_bytes(id);
  ojson arr = ojson::array();
  for (unsigned char c : b) arr.push_back(int(c));
  return arr;
}
}  // namespace

ojson completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenInfo>& tokens, size_t& text_offset) {
  ojson lp;
  ojson toks = ojson::array(), lps = ojson::array(), tops = ojson::array(), offs = ojson::array();
  for (const TokenInfo& t : tokens) {
    const std::string text = token_text(tok, t.token_id);
    toks.push_back(text);
    lps.push_back(t.logprob);
    ojson top = ojson::object();
    for (const TokenLogprob& a : t.top) {
      const std::string at = token_text(tok, a.token_id);
      if (!top.contains(at)) top[at] = a.logprob;
    }
    tops.push_back(std::move(top));
    offs.push_back(text_offset);
    text_offset += text.size();
  }
  lp["tokens"] = std::move(toks);
  lp["token_logprobs"] = std::move(lps);
  lp["top_logprobs"] = std::move(tops);
  lp["text_offset"] = std::move(offs);
  return lp;
}

ojson chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenInfo>& tokens) {
  ojson content = ojson::array();
  for (const TokenInfo& t : tokens) {
    ojson e;
    e["token"] = token_text(tok, t.token_id);
    e["logprob"] = t.logprob;
    e["bytes"] = token_bytes_json(tok, t.token_id);
    ojson top = ojson::array();
    for (const TokenLogprob& a : t.top)
      top.push_back({{"token", token_text(tok, a.token_id)}, {"logprob", a.logprob},
                     {"bytes", token_bytes_json(tok, a.token_id)}});
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}};
}

int64_t unix_now() { return int64_t(std::time(nullptr)); }

}  // namespace pypto
