#pragma once
// Qwen3 tool calls in the output text: each `<tool_call>` + JSON {"name", "arguments"} +
// `</tool_call>` becomes a call; the rest is content. Incremental, like ReasoningParser: feed
// content deltas as they are released, get content and finished calls back; a tag split across
// deltas is held back and never leaks into content.
//
// A call is reported once its closing tag arrives (or the output ends inside it): streaming
// sends its name and then its arguments as one fragment, so the streamed and non-streamed
// answers are the same whatever the split. A call whose body is not a JSON object with a string
// "name" and an object "arguments" is returned as plain content, tags included. Whitespace
// between or around calls, and at the start or end of the content, is not content; other text
// before, between and after calls is.
// arguments is the object re-serialized compactly (key order and characters kept).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

class ToolCallParser {
 public:
  struct Call {
    int32_t index = 0;  // dense from 0, in output order
    std::string id;     // "call_..." from make_id
    std::string name;
    std::string arguments;  // JSON text of an object
  };
  struct Delta {
    std::string content;
    std::vector<Call> calls;  // calls completed by this delta
  };

  // max_calls: calls beyond it are returned as content (-1: no limit).
  explicit ToolCallParser(std::function<std::string()> make_id, int32_t max_calls = -1);

  Delta append(std::string_view text);
  // The output ended: an unterminated final call is taken if its body is complete, else it is
  // content; held-back text is released.
  Delta flush();

  const std::vector<Call>& calls() const { return calls_; }

 private:
  void emit_content(std::string_view text, Delta& out);
  void finish_call(std::string_view body, bool closed, Delta& out);

  std::function<std::string()> make_id_;
  int32_t max_calls_;
  bool in_call_ = false;
  std::string buf_;         // undecided text (a possible tag prefix, or a call's body so far)
  std::string pending_ws_;  // whitespace that becomes content only if more content follows
  bool emitted_ = false;    // some content was released (leading whitespace is dropped)
  std::vector<Call> calls_;
};

}  // namespace pypto
