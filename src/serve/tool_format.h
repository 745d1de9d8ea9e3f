#pragma once
// Which form a served model writes tool calls in, and the parser for it.
//
// --tool-call-parser names the form as vLLM does: `hermes` / `qwen3` for Qwen3's JSON body
// (`<tool_call>{"name", "arguments"}</tool_call>`), `qwen3_coder` for the XML body of
// Qwen3-Coder and Qwen3.5/3.6 (serve/xml_tool_parser.h). `auto` (the default) asks the chat
// template: it renders an assistant turn holding one call, and the XML form is chosen when the
// template wrote `<function=NAME>` for it; the model then reads back what its own template
// taught it to write.
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/tool_call_stream.h"

namespace pypto {

class ChatTemplate;

enum class ToolFormat { Json, Xml };

// The names --tool-call-parser accepts, for its help text and errors.
inline constexpr const char* kToolCallParserNames = "auto, hermes, qwen3, qwen3_coder";

// Throws Error naming --tool-call-parser for an unknown name.
void check_tool_call_parser_name(const std::string& name);

// The format for a parser name; `auto` asks the template (Json when there is none, or it cannot
// render a call).
ToolFormat resolve_tool_format(const std::string& parser_name, const ChatTemplate* chat_template);

const char* tool_format_name(ToolFormat f);

// The messages as a template of `format` needs them. The XML form writes each argument as its own
// <parameter=...> element, so the template iterates the arguments as a mapping: OpenAI's
// arguments *string* of each assistant tool call is parsed into its object (Error naming
// messages[i].tool_calls[j].function.arguments when it is not a JSON object). The JSON form
// inserts the string as it is: the messages are returned unchanged.
nlohmann::ordered_json messages_for_template(ToolFormat format, const nlohmann::ordered_json& messages);

// A parser of `format` for one choice of a request with these tools.
std::unique_ptr<ToolCallStream> make_tool_call_stream(ToolFormat format, const nlohmann::ordered_json& tools,
                                                      std::function<std::string()> make_id, int32_t max_calls);

}  // namespace pypto
