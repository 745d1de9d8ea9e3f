// POST /v1/chat/completions: messages -> chat template -> tokens -> chat.completion objects or
// chat.completion.chunk SSE events, with Qwen3 reasoning split into reasoning_content.
#include "core/error.h"
#include "serve/reasoning_parser.h"
#include "serve/request_common.h"
#include "serve/routes.h"
#include "serve/sse_stream.h"
#include "serve/structured_request.h"
#include "serve/tool_format.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

std::string render_chat_prompt(const ServerState& s, const ojson& messages, const ojson& tools,
                               bool add_generation_prompt, const ojson& kwargs) {
  if (!s.ctx.chat_template)
    throw invalid_request("this model has no chat template (tokenizer_config.json has no chat_template); "
                          "use /v1/completions",
                          "messages");
  ojson c = ojson::object();
  try {
    c["messages"] = messages_for_template(s.tool_format, messages);  // XML calls: arguments as objects
  } catch (const Error& e) {
    throw invalid_request(e.what(), "messages");
  }
  if (!tools.is_null()) c["tools"] = tools;
  c["add_generation_prompt"] = add_generation_prompt;
  const Tokenizer& tok = *s.ctx.tokenizer;
  c["bos_token"] = tok.bos_token().value_or("");
  c["eos_token"] = tok.eos_token().value_or("");
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) c[it.key()] = *it;
  try {
    return s.ctx.chat_template->render(c);
  } catch (const Error& e) {
    throw invalid_request(str_cat("the chat template failed on these messages: ", e.what()), "messages");
  }
}

namespace {

struct ChatChoice {
  explicit ChatChoice(ReasoningStart start) : parser(start) {}
  ReasoningParser parser;
  std::unique_ptr<ToolCallStream> tools;  // set when tool calls are parsed (tools, choice not "none")
  std::string content;
  std::string reasoning;
  std::vector<TokenInfo> tokens;
  std::string finish_reason;
  std::optional<SpecRequestStats> spec_stats;  // --per-request-spec-decode-stats
};

struct ChatJob {
  std::unique_ptr<Generation> gen;
  std::string id;           // the engine's (unique)
  std::string response_id;  // the response's "id": "<prefix>" + the client's request_id, else id
  int64_t created = 0;
  std::string model;
  bool want_logprobs = false;
  bool include_usage = false;
  bool include_reasoning = true;
  bool reasoning_active = false;  // the reasoning_content field is reported
  std::vector<ChatChoice> choices;
  std::chrono::steady_clock::time_point arrival;
};

ojson chunk_base(const ChatJob& j) {
  ojson c;
  c["id"] = j.response_id;
  c["object"] = "chat.completion.chunk";
  c["created"] = j.created;
  c["model"] = j.model;
  return c;
}

ojson stream_chunk(const ChatJob& j, int32_t index, ojson delta, ojson logprobs,
                   const std::optional<std::string>& finish, const std::optional<SpecRequestStats>& spec = std::nullopt) {
  ojson c = chunk_base(j);
  ojson choice;
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = finish ? ojson(*finish) : ojson(nullptr);
  if (spec) choice["speculative_decoding_stats"] = spec_request_stats_json(*spec);
  c["choices"] = ojson::array({std::move(choice)});
  if (j.include_usage) c["usage"] = nullptr;
  return c;
}

// Adds a text delta of a choice (after flush when it finished) to the parser; returns the split.
ReasoningParser::Delta split(ChatJob& j, ChatChoice& c, const ChoiceDelta& d) {
  ReasoningParser::Delta out = c.parser.append(d.text);
  if (d.finish_reason) {
    ReasoningParser::Delta rest = c.parser.flush();
    out.reasoning += rest.reasoning;
    out.content += rest.content;
  }
  if (!j.include_reasoning) out.reasoning.clear();
  return out;
}

// Runs a content delta through the choice's tool-call parser (when tools are on); the call
// pieces it releases go to `calls`.
std::string tool_split(ChatChoice& c, const std::string& content, bool finished,
                       std::vector<ToolCallStream::CallDelta>& calls) {
  if (!c.tools) return content;
  ToolCallStream::Delta d = c.tools->append(content);
  if (finished) {
    ToolCallStream::Delta rest = c.tools->flush();
    d.content += rest.content;
    d.calls.insert(d.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  calls.insert(calls.end(), d.calls.begin(), d.calls.end());
  return d.content;
}

// "stop" becomes "tool_calls" when the choice made calls (OpenAI's finish reason).
std::string chat_finish_reason(const ChatChoice& c, const std::string& reason) {
  return reason == "stop" && c.tools && !c.tools->calls().empty() ? "tool_calls" : reason;
}

}  // namespace

void handle_chat_completions(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::None, "/v1/chat/completions");  // serve/pooling_batch.h
  ojson body = parse_json_body(req.body);
  const std::set<std::string> defaulted = apply_generate_defaults(body, s.options.generate_config, true);
  ChatRequest r = parse_chat_request(body, defaulted);
  check_model(s, r.model);
  const Tokenizer& tok = *s.ctx.tokenizer;

  const std::string prompt = render_chat_prompt(s, r.messages, r.tools, r.add_generation_prompt, r.chat_template_kwargs);
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(prompt, false);
  } catch (const Error& e) {
    throw invalid_request(str_cat("the rendered chat prompt cannot be tokenized: ", e.what()), "messages");
  }
  if (ids.empty()) throw invalid_request("the rendered chat prompt is empty", "messages");
  const int32_t max_tokens = resolve_max_tokens(r, int64_t(ids.size()), s.ctx.max_model_len, "messages");
  const ReasoningStart start = s.reasoning_tokens ? reasoning_start_from_prompt(prompt) : ReasoningStart::ContentOnly;
  // The constraint (if any) starts after the reasoning: 2 = output starts inside it, 1 = may open it.
  const int reasoning = start == ReasoningStart::InReasoning ? 2 : start == ReasoningStart::Detect ? 1 : 0;
  const StructuredSetup constraint = structured_for_request(s, r, &r, reasoning);
  std::vector<SequenceSpec> specs;
  add_sequences(specs, r, 0, ids, max_tokens);
  for (SequenceSpec& spec : specs) {
    spec.grammar = constraint.grammar;
    spec.grammar_options = constraint.options;
  }
  const bool parse_tools = !r.tools.is_null() && r.tool_choice != "none";

  auto job = std::make_shared<ChatJob>();
  // The engine's ids stay unique (generated); the client's request_id, if any, names the response.
  job->id = s.make_id("chatcmpl-");
  job->response_id = r.request_id ? "chatcmpl-" + *r.request_id : job->id;
  job->created = unix_now();
  job->model = s.model_name;
  job->want_logprobs = r.logprobs;
  job->include_usage = r.include_usage;
  job->include_reasoning = r.include_reasoning;
  job->reasoning_active = s.reasoning_tokens && r.include_reasoning;
  for (size_t i = 0; i < specs.size(); ++i) {
    job->choices.emplace_back(start);
    if (parse_tools) job->choices.back().parser.end_reasoning_at_tool_call();
    if (parse_tools)
      job->choices.back().tools = make_tool_call_stream(s.tool_format, r.tools, [&s] { return s.make_id("call_"); },
                                                        r.parallel_tool_calls ? -1 : 1);
  }
  job->arrival = arrival;
  job->gen = std::make_unique<Generation>(s, job->id, std::move(specs), r.skip_special_tokens, arrival);
  job->gen->submit();

  if (!r.stream) {
    std::string engine_error;
    const bool alive = drive_generation(s, *job->gen, arrival, [&](std::vector<ChoiceDelta>& deltas) {
      for (ChoiceDelta& d : deltas) {
        ChatChoice& c = job->choices[size_t(d.index)];
        ReasoningParser::Delta part = split(*job, c, d);
        std::vector<ToolCallStream::CallDelta> calls;  // kept by the parser (calls())
        c.reasoning += part.reasoning;
        c.content += tool_split(c, part.content, d.finish_reason.has_value(), calls);
        c.tokens.insert(c.tokens.end(), d.tokens.begin(), d.tokens.end());
        if (d.finish_reason) c.finish_reason = chat_finish_reason(c, *d.finish_reason);
        if (d.spec_stats) c.spec_stats = d.spec_stats;
        if (!d.error.empty() && engine_error.empty()) engine_error = d.error;
      }
      return true;
    });
    if (!alive) return;
    throw_engine_error(engine_error);
    ojson out;
    out["id"] = job->response_id;
    out["object"] = "chat.completion";
    out["created"] = job->created;
    out["model"] = job->model;
    ojson arr = ojson::array();
    for (size_t i = 0; i < job->choices.size(); ++i) {
      const ChatChoice& c = job->choices[i];
      ojson msg;
      msg["role"] = "assistant";
      const bool has_calls = c.tools && !c.tools->calls().empty();
      const bool reasoning_only = c.content.empty() && (c.parser.saw_reasoning() || has_calls);
      msg["content"] = reasoning_only ? ojson(nullptr) : ojson(c.content);
      if (job->reasoning_active)
        msg["reasoning_content"] = c.parser.saw_reasoning() ? ojson(c.reasoning) : ojson(nullptr);
      if (has_calls) {
        ojson calls = ojson::array();
        for (const ToolCallStream::Call& call : c.tools->calls())
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        msg["tool_calls"] = std::move(calls);
      }
      ojson choice;
      choice["index"] = i;
      choice["message"] = std::move(msg);
      choice["logprobs"] = job->want_logprobs ? chat_logprobs_json(tok, c.tokens) : ojson(nullptr);
      choice["finish_reason"] = c.finish_reason;
      if (c.spec_stats) choice["speculative_decoding_stats"] = spec_request_stats_json(*c.spec_stats);
      arr.push_back(std::move(choice));
    }
    out["choices"] = std::move(arr);
    out["usage"] = usage_json(*job->gen);
    write_json(res, out);
    return;
  }

  std::shared_ptr<const Tokenizer> tk = s.ctx.tokenizer;  // held by the stream
  SseStream st = sse_stream_for(job, chunk_base(*job));
  st.opening = [job](const SseWrite& write) {
    for (size_t i = 0; i < job->choices.size(); ++i)
      if (!write(stream_chunk(*job, int32_t(i), {{"role", "assistant"}, {"content", ""}}, nullptr, std::nullopt)))
        return false;
    return true;
  };
  st.on_deltas = [job, tk](std::vector<ChoiceDelta>& deltas, const SseWrite& write) {
    for (ChoiceDelta& d : deltas) {
      ChatChoice& c = job->choices[size_t(d.index)];
      ReasoningParser::Delta part = split(*job, c, d);
      std::vector<ToolCallStream::CallDelta> calls;
      part.content = tool_split(c, part.content, d.finish_reason.has_value(), calls);
      // Reasoning and content go in separate chunks (reasoning first); the tokens' logprobs ride
      // on the last one.
      ojson lp = job->want_logprobs && !d.tokens.empty() ? chat_logprobs_json(*tk, d.tokens) : ojson(nullptr);
      const bool content_chunk = !part.content.empty() || (part.reasoning.empty() && !d.tokens.empty());
      if (!part.reasoning.empty() &&
          !write(stream_chunk(*job, d.index, {{"reasoning_content", part.reasoning}},
                              content_chunk ? ojson(nullptr) : std::move(lp), std::nullopt)))
        return false;
      if (content_chunk && !write(stream_chunk(*job, d.index, {{"content", part.content}}, std::move(lp), std::nullopt)))
        return false;
      // Calls as OpenAI streams them: a call opens with its index, id, type and name (arguments
      // ""); later pieces carry the index and argument text as it is written.
      for (const ToolCallStream::CallDelta& call : calls) {
        ojson piece = call.opens ? ojson{{"index", call.index},
                                         {"id", call.id},
                                         {"type", "function"},
                                         {"function", {{"name", call.name}, {"arguments", ""}}}}
                                 : ojson{{"index", call.index}, {"function", {{"arguments", call.arguments}}}};
        if (!write(stream_chunk(*job, d.index, {{"tool_calls", ojson::array({piece})}}, nullptr, std::nullopt)))
          return false;
      }
      if (d.finish_reason &&
          !write(stream_chunk(*job, d.index, ojson::object(), nullptr, chat_finish_reason(c, *d.finish_reason),
                              d.spec_stats)))  // the choice's speculative_decoding_stats: last chunk only
        return false;
    }
    return true;
  };
  stream_sse(res, s, std::move(st));
}

}  // namespace pypto
