// POST /v1/completions: prompts (text or ids) -> text_completion objects or SSE chunks.
#include "serve/routes.h"

#include "core/error.h"
#include "serve/request_common.h"
#include "serve/sse_stream.h"
#include "serve/structured_request.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

struct Choice {
  std::string text;
  std::vector<TokenInfo> tokens;
  std::string finish_reason;
  size_t text_offset = 0;
  std::optional<SpecRequestStats> spec_stats;  // --per-request-spec-decode-stats
};

struct CompletionJob {
  std::unique_ptr<Generation> gen;
  std::string id;           // the engine's (unique)
  std::string response_id;  // the response's "id": "<prefix>" + the client's request_id, else id
  int64_t created = 0;
  std::string model;
  bool want_logprobs = false;
  bool include_usage = false;
  std::vector<std::string> echo;  // per choice, sent first (echo=true)
  std::vector<size_t> text_offset;
  std::chrono::steady_clock::time_point arrival;
};

ojson chunk_base(const CompletionJob& j) {
  ojson c;
  c["id"] = j.response_id;
  c["object"] = "text_completion";
  c["created"] = j.created;
  c["model"] = j.model;
  return c;
}

ojson stream_chunk(const CompletionJob& j, int32_t index, const std::string& text, const ojson& logprobs,
                   const std::optional<std::string>& finish, const std::optional<SpecRequestStats>& spec = std::nullopt) {
  ojson c = chunk_base(j);
  ojson choice;
  choice["index"] = index;
  choice["text"] = text;
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish ? ojson(*finish) : ojson(nullptr);
  if (spec) choice["speculative_decoding_stats"] = spec_request_stats_json(*spec);
  c["choices"] = ojson::array({choice});
  if (j.include_usage) c["usage"] = nullptr;
  return c;
}

}  // namespace

void handle_completions(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::None, "/v1/completions");  // serve/pooling_batch.h
  ojson body = parse_json_body(req.body);
  const std::set<std::string> defaulted = apply_generate_defaults(body, s.options.generate_config, false);
  CompletionRequest r = parse_completion_request(body, defaulted);
  check_model(s, r.model);
  const Tokenizer& tok = *s.ctx.tokenizer;

  std::vector<SequenceSpec> specs;
  std::vector<std::string> echo_texts;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const PromptInput& p = r.prompts[i];
    const char* param = "prompt";
    std::vector<int32_t> ids;
    if (p.is_text) {
      try {
        ids = tok.encode(p.text, true);
      } catch (const Error& e) {
        throw invalid_request(str_cat("'prompt' cannot be tokenized: ", e.what()), param);
      }
      if (ids.empty()) throw invalid_request("'prompt' is empty after tokenization", param);
    } else {
      ids = p.token_ids;
      for (int32_t id : ids)
        if (id >= tok.vocab_size() || id >= s.ctx.model_config.vocab_size)
          throw invalid_request(str_cat("'prompt' has token id ", id, ": allowed 0 <= id < vocab size ",
                                        std::min<int64_t>(tok.vocab_size(), s.ctx.model_config.vocab_size)),
                                param);
    }
    const int32_t max_tokens = resolve_max_tokens(r, int64_t(ids.size()), s.ctx.max_model_len, param);
    if (r.echo) echo_texts.push_back(p.is_text ? p.text : tok.decode(ids, r.skip_special_tokens));
    add_sequences(specs, r, i, ids, max_tokens);
  }

  auto job = std::make_shared<CompletionJob>();
  // The engine's ids stay unique (generated); the client's request_id, if any, names the response.
  job->id = s.make_id("cmpl-");
  job->response_id = r.request_id ? "cmpl-" + *r.request_id : job->id;
  job->created = unix_now();
  job->model = s.model_name;
  job->want_logprobs = r.params.logprobs.has_value();
  job->include_usage = r.include_usage;
  job->arrival = arrival;
  // Plain completions have no reasoning split: a constraint applies from the first token.
  const StructuredSetup constraint = structured_for_request(s, r, nullptr, 0);
  for (SequenceSpec& spec : specs) {
    spec.grammar = constraint.grammar;
    spec.grammar_options = constraint.options;
  }
  const size_t num_choices = specs.size();
  if (r.echo)
    for (const SequenceSpec& spec : specs) job->echo.push_back(echo_texts[spec.prompt_index]);
  job->text_offset.assign(num_choices, 0);
  for (size_t c = 0; c < job->echo.size(); ++c) job->text_offset[c] = job->echo[c].size();
  job->gen = std::make_unique<Generation>(s, job->id, std::move(specs), r.skip_special_tokens, arrival);
  job->gen->submit();

  if (!r.stream) {
    std::vector<Choice> choices(num_choices);
    std::string engine_error;
    for (size_t c = 0; c < num_choices; ++c) {
      if (r.echo) choices[c].text = job->echo[c];
      choices[c].text_offset = job->text_offset[c];
    }
    const bool alive = drive_generation(s, *job->gen, arrival, [&](std::vector<ChoiceDelta>& deltas) {
      for (ChoiceDelta& d : deltas) {
        Choice& c = choices[size_t(d.index)];
        c.text += d.text;
        c.tokens.insert(c.tokens.end(), d.tokens.begin(), d.tokens.end());
        if (d.finish_reason) c.finish_reason = *d.finish_reason;
        if (d.spec_stats) c.spec_stats = d.spec_stats;
        if (!d.error.empty() && engine_error.empty()) engine_error = d.error;
      }
      return true;
    });
    if (!alive) return;  // nobody to answer
    throw_engine_error(engine_error);
    ojson out = chunk_base(*job);
    ojson arr = ojson::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      ojson c;
      c["index"] = i;
      c["text"] = choices[i].text;
      c["logprobs"] = job->want_logprobs ? completion_logprobs_json(tok, choices[i].tokens, choices[i].text_offset)
                                         : ojson(nullptr);
      c["finish_reason"] = choices[i].finish_reason;
      if (choices[i].spec_stats) c["speculative_decoding_stats"] = spec_request_stats_json(*choices[i].spec_stats);
      arr.push_back(std::move(c));
    }
    out["choices"] = std::move(arr);
    out["usage"] = usage_json(*job->gen);
    write_json(res, out);
    return;
  }

  std::shared_ptr<const Tokenizer> tk = s.ctx.tokenizer;  // held by the stream
  SseStream st = sse_stream_for(job, chunk_base(*job));
  st.opening = [job](const SseWrite& write) {
    for (size_t c = 0; c < job->echo.size(); ++c)
      if (!write(stream_chunk(*job, int32_t(c), job->echo[c], nullptr, std::nullopt))) return false;
    return true;
  };
  st.on_deltas = [job, tk](std::vector<ChoiceDelta>& deltas, const SseWrite& write) {
    for (ChoiceDelta& d : deltas) {
      if (!d.text.empty() || !d.tokens.empty()) {
        ojson lp = job->want_logprobs ? completion_logprobs_json(*tk, d.tokens, job->text_offset[size_t(d.index)])
                                      : ojson(nullptr);
        if (!write(stream_chunk(*job, d.index, d.text, lp, std::nullopt))) return false;
      }
      // The choice's speculative_decoding_stats ride on its last chunk only.
      if (d.finish_reason && !write(stream_chunk(*job, d.index, "", nullptr, d.finish_reason, d.spec_stats)))
        return false;
    }
    return true;
  };
  stream_sse(res, s, std::move(st));
}

}  // namespace pypto
