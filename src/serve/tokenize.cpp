// POST /tokenize and /detokenize in vLLM's shapes.
#include "core/error.h"
#include "serve/routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

void handle_tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  check_ready(s);
  const TokenizeRequest r = parse_tokenize_request(parse_json_body(req.body));
  check_model(s, r.model);
  const Tokenizer& tok = *s.ctx.tokenizer;
  const std::string text =
      r.chat ? render_chat_prompt(s, r.messages, r.tools, r.add_generation_prompt, r.chat_template_kwargs) : r.prompt;
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text, r.add_special_tokens);
  } catch (const Error& e) {
    throw invalid_request(str_cat("cannot tokenize: ", e.what()), r.chat ? "messages" : "prompt");
  }
  ojson out;
  out["count"] = ids.size();
  out["max_model_len"] = s.ctx.max_model_len;
  out["tokens"] = ids;
  if (r.return_token_strs) {
    ojson strs = ojson::array();
    for (int32_t id : ids) strs.push_back(tok.id_to_token(id));
    out["token_strs"] = std::move(strs);
  }
  write_json(res, out);
}

void handle_detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  check_ready(s);
  std::optional<std::string> model;
  const std::vector<int32_t> ids = parse_detokenize_request(parse_json_body(req.body), model);
  check_model(s, model);
  const Tokenizer& tok = *s.ctx.tokenizer;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= tok.vocab_size())
      throw invalid_request(str_cat("'tokens[", i, "]' = ", ids[i], " is not a token id: allowed 0 <= id < ",
                                    tok.vocab_size()),
                            "tokens");
  write_json(res, ojson{{"prompt", tok.decode(ids, false)}});
}

}  // namespace pypto
