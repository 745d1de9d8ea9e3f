#include "serve/structured_request.h"

#include "core/error.h"
#include "serve/json_limits.h"
#include "serve/server_state.h"
#include "structured/ebnf.h"
#include "structured/grammar_cache.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "structured/xml_tool_grammar.h"

namespace pypto {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;
namespace st = pypto::structured;

namespace {

// Compiles through the server's cache; a compile Error becomes a 400 on `param`.
std::shared_ptr<const st::CompiledGrammar> compiled(ServerState& s, const std::string& key, const char* param,
                                                     const std::function<st::Grammar()>& make) {
  try {
    return s.grammars->get(key, make);
  } catch (const Error& e) {
    throw invalid_request(str_cat("invalid '", param, "': ", e.what()), param);
  }
}

json schema_of(const ojson& v, const char* where) {
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    check_json_limits(text, where, where);
    try {
      return json::parse(text);
    } catch (const std::exception& e) {
      throw invalid_request(str_cat("'", where, "' is not valid JSON: ", e.what()), where);
    }
  }
  return json::parse(v.dump());
}

// {"name": "N", "arguments": ARGS} for one tool, as the body of a call.
st::ExprPtr call_body(st::Grammar& g, const ojson& tool, size_t i) {
  const ojson& fn = tool["function"];
  const std::string name = fn["name"].get<std::string>();
  json params = fn.contains("parameters") && !fn["parameters"].is_null() ? json::parse(fn["parameters"].dump())
                                                                          : json{{"type", "object"}, {"properties", json::object()}};
  st::ExprPtr args = st::add_json_schema(g, params, str_cat("tools[", i, "].function.parameters"));
  return st::seq({st::literal("{\"name\": " + json(name).dump() + ", \"arguments\": "), args, st::literal("}")});
}

// The constraint a request asks for (below structured_for_request, which adds the checks).
StructuredSetup build_setup(ServerState& s, const GenerationFields& g, const ChatRequest* chat, int reasoning);

}  // namespace

StructuredSetup structured_for_request(ServerState& s, const GenerationFields& g, const ChatRequest* chat,
                                       int reasoning) {
  StructuredSetup out = build_setup(s, g, chat, reasoning);
  // Where a grammar ends only EOS is allowed, which min_tokens would forbid: nothing could be
  // sampled. A lazy grammar (tool_choice "auto") leaves free text around its calls, so it can.
  if (out.grammar && out.options.trigger < 0 && g.params.min_tokens > 0)
    throw invalid_request("'min_tokens' cannot be combined with response_format, structured_outputs or a forced "
                          "tool_choice: the grammar decides where the output ends",
                          "min_tokens");
  return out;
}

namespace {

StructuredSetup build_setup(ServerState& s, const GenerationFields& g, const ChatRequest* chat, int reasoning) {
  StructuredSetup out;
  const Tokenizer& tok = *s.ctx.tokenizer;
  if (reasoning > 0) {
    const auto end = tok.token_to_id("</think>");
    if (end) out.options.start_after = *end;
    if (reasoning == 1 && end) out.options.think_open = tok.token_to_id("<think>").value_or(-1);
  }
  if (!g.response_format.is_null()) {
    const ojson& rf = g.response_format;
    if (rf["type"] == "json_object") {
      out.grammar = compiled(s, "json_object", "response_format", [] { return st::json_object_grammar(); });
    } else {
      const ojson& js = rf["json_schema"];
      const json schema = js.contains("schema") && !js["schema"].is_null() ? json::parse(js["schema"].dump()) : json(true);
      out.grammar = compiled(s, "json_schema:" + schema.dump(), "response_format", [&] {
        return st::json_schema_grammar(schema, "response_format.json_schema.schema");
      });
    }
    return out;
  }
  if (!g.structured_outputs.is_null()) {
    const ojson& so = g.structured_outputs;
    if (const auto it = so.find("json"); it != so.end() && !it->is_null()) {
      const json schema = schema_of(*it, "structured_outputs.json");
      out.grammar = compiled(s, "json_schema:" + schema.dump(), "structured_outputs",
                             [&] { return st::json_schema_grammar(schema, "structured_outputs.json"); });
    } else if (const auto re = so.find("regex"); re != so.end() && !re->is_null()) {
      const std::string pattern = re->get<std::string>();
      out.grammar = compiled(s, "regex:" + pattern, "structured_outputs", [&] {
        st::Grammar gr;
        gr.root = st::compile_regex(pattern, st::RegexMode::FullMatch, false);
        return gr;
      });
    } else if (const auto ch = so.find("choice"); ch != so.end() && !ch->is_null()) {
      out.grammar = compiled(s, "choice:" + ch->dump(), "structured_outputs", [&] {
        st::Grammar gr;
        std::vector<st::ExprPtr> alts;
        for (const ojson& c : *ch) {
          gr.add_text(c.get_ref<const std::string&>().size(), "structured_outputs.choice");
          alts.push_back(st::literal(c.get<std::string>()));
        }
        gr.root = st::alt(std::move(alts));
        return gr;
      });
    } else if (const auto gm = so.find("grammar"); gm != so.end() && !gm->is_null()) {
      const std::string text = gm->get<std::string>();
      out.grammar = compiled(s, "grammar:" + text, "structured_outputs", [&] { return st::parse_ebnf(text); });
    } else {
      out.grammar = compiled(s, "json_object", "structured_outputs", [] { return st::json_object_grammar(); });
    }
    return out;
  }
  if (!chat || chat->tools.is_null() || chat->tool_choice == "none") return out;

  // Tool calls. The same tools and choice give the same grammar: the key is their JSON.
  const ojson& choice = chat->tool_choice;
  const bool lazy = choice == "auto";
  const std::string key = str_cat("tools:", choice.dump(), ":", chat->parallel_tool_calls, ":", chat->tools.dump());
  out.grammar = compiled(s, key, "tools", [&] {
    st::Grammar gr;
    std::vector<st::ExprPtr> bodies;
    for (size_t i = 0; i < chat->tools.size(); ++i) {
      const ojson& t = chat->tools[i];
      if (choice.is_object() && t["function"]["name"] != choice["function"]["name"]) continue;
      // The body in the form this server parses (serve/tool_format.h); the <tool_call> wrapping
      // around it is the same for both.
      bodies.push_back(s.tool_format == ToolFormat::Xml
                           ? st::add_xml_call_body(gr, t["function"], str_cat("tools[", i, "].function"))
                           : call_body(gr, t, i));
    }
    st::ExprPtr body = st::alt(std::move(bodies));
    if (lazy) {
      // What follows the <tool_call> token the model chose to write.
      gr.root = st::seq({st::literal("\n"), body, st::literal("\n</tool_call>")});
      return gr;
    }
    st::ExprPtr call = st::seq({st::literal("<tool_call>\n"), body, st::literal("\n</tool_call>")});
    st::ByteSet nl;
    nl.add('\n');
    st::ExprPtr calls = choice == "required" && chat->parallel_tool_calls
                            ? st::list(call, st::literal("\n"), true)
                            : call;
    gr.root = st::seq({st::repeat(st::bytes(nl), 0, 2), calls});
    return gr;
  });
  if (lazy) {
    const auto trigger = tok.token_to_id("<tool_call>");
    if (!trigger) throw invalid_request("this model's vocabulary has no <tool_call> token: tool calls cannot be parsed", "tools");
    out.options.trigger = *trigger;
    out.options.max_triggers = chat->parallel_tool_calls ? -1 : 1;
  }
  return out;
}

}  // namespace

}  // namespace pypto
