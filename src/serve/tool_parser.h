#pragma once
// Qwen3 tool calls in the output text: each `<tool_call>` + JSON {"name", "arguments"} +
// `</tool_call>` becomes a call; the rest is content. Incremental, like ReasoningParser: feed
// content deltas as they are released, get content and call deltas back; a tag split across
// deltas is held back and never leaks into content.
//
// A call opens once its header `{"name": "<string>", "arguments": {` is read (name first, as
// Qwen3's template and our grammars write it; whitespace anywhere between the tokens). Until
// then nothing of it is reported, and a body that does not match the header is plain content,
// tags included. Once open, its arguments stream: every byte that keeps them a valid JSON prefix
// is final and is reported as soon as it arrives, whitespace between JSON tokens dropped (the
// arguments string is the model's object written compactly, key order, numbers and escapes as
// written). After the object closes, whitespace, one `}` and `</tool_call>` end the call. If the
// model breaks the JSON after the header (a byte no JSON could continue with, or other text
// before `</tool_call>`), what was streamed cannot be taken back: the rest of the body up to
// `</tool_call>` is appended to the arguments as written, which then are not JSON, as with an
// output cut by max_tokens (OpenAI's arguments are not guaranteed JSON either). So every split of
// the same text gives the same content and calls.
//
// Whitespace between or around calls, and at the start or end of the content, is not content;
// other text before, between and after calls is.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/json_prefix.h"
#include "serve/held_whitespace.h"
#include "serve/tool_call_stream.h"

namespace pypto {

class ToolCallParser : public ToolCallStream {
 public:
  // A call header longer than this is not a call: it is content (bounds the work of re-reading
  // a header that is still being written, e.g. a runaway name).
  static constexpr size_t kMaxHeaderBytes = 4096;

  // max_calls: calls beyond it are returned as content (-1: no limit).
  explicit ToolCallParser(std::function<std::string()> make_id, int32_t max_calls = -1);

  Delta append(std::string_view text) override;
  // The output ended: an open call keeps what it has (its arguments may be cut short); a call
  // whose header is incomplete, and any held-back text, is content.
  Delta flush() override;

  const std::vector<Call>& calls() const override { return calls_; }

 private:
  enum class Mode {
    Text,    // outside calls
    Header,  // after <tool_call>, before the arguments' '{' (buf_ holds the header so far)
    Args,    // inside the arguments object (json_ checks it)
    Tail,    // after the arguments object: whitespace, '}', then </tool_call>
    Raw,     // the call broke: everything up to </tool_call> is argument text
  };
  void emit_content(std::string_view text, Delta& out);
  void add_arguments(std::string_view text, Delta& out);
  void close_call();

  std::function<std::string()> make_id_;
  int32_t max_calls_;
  Mode mode_ = Mode::Text;
  std::string buf_;         // undecided text (a possible tag prefix, or a call's header so far)
  std::string tail_;        // Tail: the bytes read after the arguments (arguments text if it breaks)
  bool tail_brace_ = false; // Tail: the call object's '}' was read
  JsonPrefix json_;
  HeldWhitespace held_ws_;  // content never starts or ends with whitespace before a call
  std::vector<Call> calls_;
};

}  // namespace pypto
