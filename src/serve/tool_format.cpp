#include "serve/tool_format.h"

#include "core/error.h"
#include "serve/tool_parser.h"
#include "serve/xml_tool_parser.h"
#include "tokenizer/chat_template.h"

namespace pypto {

void check_tool_call_parser_name(const std::string& name) {
  if (name != "auto" && name != "hermes" && name != "qwen3" && name != "qwen3_coder")
    throw Error(str_cat("--tool-call-parser '", name, "': unknown; use one of ", kToolCallParserNames));
}

namespace {

// Renders a user turn and an assistant turn with one call to a probe tool; the XML form is
// recognised by its `<function=NAME>` tag.
bool template_writes_xml_calls(const ChatTemplate& t) {
  using ojson = nlohmann::ordered_json;
  const ojson tool = {{"type", "function"},
                      {"function",
                       {{"name", "probe_tool"},
                        {"description", "probe"},
                        {"parameters", {{"type", "object"}, {"properties", {{"x", {{"type", "string"}}}}}}}}}};
  const ojson call = {{"id", "call_0"},
                      {"type", "function"},
                      {"function", {{"name", "probe_tool"}, {"arguments", {{"x", "y"}}}}}};
  ojson ctx;
  ctx["messages"] = ojson::array({{{"role", "user"}, {"content", "hi"}},
                                  {{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array({call})}}});
  ctx["tools"] = ojson::array({tool});
  ctx["add_generation_prompt"] = false;
  try {
    return t.render(ctx).find("<function=probe_tool>") != std::string::npos;
  } catch (const Error&) {
    return false;  // a template that cannot render calls: the JSON form (Qwen3's) stays
  }
}

}  // namespace

ToolFormat resolve_tool_format(const std::string& parser_name, const ChatTemplate* chat_template) {
  check_tool_call_parser_name(parser_name);
  if (parser_name == "qwen3_coder") return ToolFormat::Xml;
  if (parser_name != "auto") return ToolFormat::Json;
  return chat_template && template_writes_xml_calls(*chat_template) ? ToolFormat::Xml : ToolFormat::Json;
}

const char* tool_format_name(ToolFormat f) { return f == ToolFormat::Xml ? "qwen3_coder (XML)" : "hermes (JSON)"; }

nlohmann::ordered_json messages_for_template(ToolFormat format, const nlohmann::ordered_json& messages) {
  if (format != ToolFormat::Xml || !messages.is_array()) return messages;
  nlohmann::ordered_json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    auto& m = out[i];
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (size_t j = 0; j < m["tool_calls"].size(); ++j) {
      auto& call = m["tool_calls"][j];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      auto& args = call["function"]["arguments"];
      if (!args.is_string()) continue;
      nlohmann::ordered_json parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object())
        throw Error(str_cat("messages[", i, "].tool_calls[", j, "].function.arguments is not a JSON object; this model's "
                            "template writes each argument separately (XML tool calls)"));
      args = std::move(parsed);
    }
  }
  return out;
}

std::unique_ptr<ToolCallStream> make_tool_call_stream(ToolFormat format, const nlohmann::ordered_json& tools,
                                                      std::function<std::string()> make_id, int32_t max_calls) {
  if (format == ToolFormat::Xml) return std::make_unique<XmlToolCallParser>(tools, std::move(make_id), max_calls);
  return std::make_unique<ToolCallParser>(std::move(make_id), max_calls);
}

}  // namespace pypto
