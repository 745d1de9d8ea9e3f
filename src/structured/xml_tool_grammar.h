#pragma once
// The grammar of one tool call's body in the XML form (Qwen3-Coder, Qwen3.5/3.6; the parser is
// serve/xml_tool_parser.h), for tool_choice "required", a named function, and the text after
// the <tool_call> token under "auto":
//
//   <function=NAME>\n
//   <parameter=P>\nVALUE\n</parameter>\n     one per property, in the schema's key order:
//   ...                                      required ones always, the others when the model wants
//   </function>
//
// VALUE is written the way the parser reads it back: a parameter whose type allows string is
// raw text, which may not contain "</" (the parser ends the value at the first "</parameter>",
// and a closing tag has no escape); with minLength / maxLength it is that many characters other
// than '<'; pattern and format are refused (an Error naming the keyword) rather than ignored. An
// enum or const is one of its values (strings raw, others as JSON); every other schema is JSON
// text under it (structured/json_schema.h, with its keyword subset and errors). Properties not
// in the schema cannot be written.
#include <string>

#include <nlohmann/json.hpp>

#include "structured/grammar.h"

namespace pypto::structured {

// `function`: the tool's "function" object (name, parameters), in the request's key order;
// `where` names it in errors (e.g. "tools[0].function").
ExprPtr add_xml_call_body(Grammar& g, const nlohmann::ordered_json& function, const std::string& where);

}  // namespace pypto::structured
