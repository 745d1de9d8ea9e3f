#pragma once
// Tool calls in the XML form that Qwen3-Coder and Qwen3.5/3.6 write (vLLM names this parser
// `qwen3_coder`):
//
//   <tool_call>
//   <function=NAME>
//   <parameter=P>
//   VALUE
//   </parameter>
//   ...
//   </function>
//   </tool_call>
//
// Incremental like ToolCallParser: feed content deltas, get content and OpenAI call deltas back;
// a tag split across deltas is held back. A call opens (id and name reported) once
// `<function=NAME>` is read and NAME is one of the request's tools; an unknown name, or anything
// else where the header should be, makes the `<tool_call>` and what follows plain content.
//
// The arguments are a JSON object built one parameter at a time, compact, in the order written.
// One newline after `<parameter=P>` and one before `</parameter>` belong to the format and are
// dropped. Values are typed by the tool's JSON schema for P (xml_param_value.h). A value that
// stays text (type string alone, or P not declared) streams as it is written: `"P":"` when the
// parameter opens, then its text JSON-escaped as it becomes certain (a possible `</parameter>`
// prefix, the newline before it and an unfinished UTF-8 character are held back); any other
// value is reported whole when its `</parameter>` arrives (it cannot be typed before).
//
// A call that breaks after it opened (text other than a parameter or `</function>` in its body)
// closes with the parameters read so far, and the rest is read as text again, so the stray tags
// become content; an output cut inside a call keeps what it has (a value cut short is typed as
// it stands). Whitespace between or around calls, and at the start or end of the content, is
// not content, as with ToolCallParser.
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/held_whitespace.h"
#include "serve/tool_call_stream.h"

namespace pypto {

class XmlToolCallParser : public ToolCallStream {
 public:
  // A function or parameter name longer than this is not one: the call is content.
  static constexpr size_t kMaxNameBytes = 256;

  // tools: the request's "tools" (OpenAI shape: [{"type": "function", "function": {"name",
  // "parameters"}}]); names and parameter schemas come from it. max_calls: calls beyond it are
  // content (-1: no limit).
  XmlToolCallParser(const nlohmann::ordered_json& tools, std::function<std::string()> make_id,
                    int32_t max_calls = -1);

  Delta append(std::string_view text) override;
  Delta flush() override;
  const std::vector<Call>& calls() const override { return calls_; }

 private:
  enum class Mode {
    Text,   // outside calls
    Head,   // after <tool_call>: whitespace, then <function=NAME>
    Body,   // inside <function>: whitespace, then <parameter=P> or </function>
    Value,  // inside <parameter=P>, up to </parameter>
    Tail,   // after </function>: whitespace, then </tool_call>
  };
  // One step of the state machine on buf_; false when it needs more text.
  bool step(Delta& out, bool at_end);
  void emit_content(std::string_view text, Delta& out);
  void add_parameter(std::string_view raw_value, Delta& out);
  // The schema of param_ in the open call (null when the tool does not declare it).
  nlohmann::json param_schema();
  void add_piece(const std::string& piece, Delta& out);
  // Streams text of a string parameter; `last`: the value ends after it (the closing quote).
  void stream_text(std::string_view text, bool last, Delta& out);
  void close_call(Delta& out);

  std::function<std::string()> make_id_;
  int32_t max_calls_;
  std::map<std::string, nlohmann::json> params_;  // function name -> its parameters schema
  Mode mode_ = Mode::Text;
  std::string buf_;          // text not yet decided on
  size_t value_scan_ = 0;    // Value: bytes of buf_ known to hold no complete </parameter>
  std::string param_;        // Value: the parameter being read
  bool first_param_ = true;  // the open call has reported no parameter yet
  bool streaming_ = false;   // Value: param_ is text, streamed as it comes
  bool value_started_ = false;  // Value, streaming: the format's leading newline is dealt with
  HeldWhitespace held_ws_;  // content never starts or ends with whitespace before a call
  std::vector<Call> calls_;
};

}  // namespace pypto
