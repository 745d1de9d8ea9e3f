#pragma once
// Qwen3 reasoning split: text inside <think>...</think> goes to reasoning_content, the rest to
// content. Incremental: feed text deltas as they are released, get reasoning and content deltas
// back; a tag split across deltas is held back until it is complete, never leaked into either.
//
// Whether the output starts inside a think block is decided from the rendered prompt's tail
// (what the template put after the last "<|im_start|>"), not from request flags:
//   "...<think>\n"            -> starts in reasoning (template opened the block)
//   "...<think>\n\n</think>"  -> content only (thinking disabled, block already closed)
//   neither                   -> content, unless the output itself opens with <think>
#include <string>
#include <string_view>

namespace pypto {

enum class ReasoningStart {
  Detect,       // the output may open a <think> block (only at its very start)
  InReasoning,  // the prompt opened the block
  ContentOnly,  // no reasoning parsing at all
};

ReasoningStart reasoning_start_from_prompt(std::string_view prompt);

class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningStart start);

  struct Delta {
    std::string reasoning;
    std::string content;
  };
  Delta append(std::string_view text);
  // The output ended: releases what was held back (a partial tag is plain text then).
  Delta flush();

  // With tool calls on: a `<tool_call>` inside an unclosed think block ends the reasoning there
  // (the call and what follows are content, for the tool-call parser), and the `</think>` the
  // model may still write after it is dropped. Qwen3.5/3.6 call tools from inside their
  // thinking; without this the call would be lost in reasoning_content.
  void end_reasoning_at_tool_call() { tool_call_ends_ = true; }

  // Whether any reasoning was ever seen (non-streaming responses report null otherwise).
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State { Start, Reasoning, Content };
  void emit(Delta& d, std::string_view s);
  State state_;
  bool detect_open_ = false;   // at Start: still deciding whether the output opens with <think>
  bool strip_newlines_ = false;  // drop newlines right after a tag
  bool saw_reasoning_ = false;
  bool tool_call_ends_ = false;  // end_reasoning_at_tool_call()
  bool drop_close_ = false;      // reasoning ended at <tool_call>: a later </think> is dropped
  std::string pending_;
  size_t start_ws_ = 0;  // at Start: leading whitespace bytes of pending_ already scanned
};

}  // namespace pypto
