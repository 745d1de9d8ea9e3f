#pragma once
// Content released by a tool-call parser (serve/tool_parser.h, serve/xml_tool_parser.h) never
// starts with whitespace, and whitespace at the end of a released piece is held back until more
// content follows, so the whitespace the model writes before a call or at the end of its output
// does not become content.
#include <string>
#include <string_view>

namespace pypto {

class HeldWhitespace {
 public:
  static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

  // Appends `text` to `content`: without leading whitespace while nothing was released yet, with
  // the held whitespace before it, and holding back its own trailing whitespace.
  void emit(std::string_view text, std::string& content) {
    if (!emitted_)
      while (!text.empty() && is_ws(text.front())) text.remove_prefix(1);
    size_t end = text.size();
    while (end > 0 && is_ws(text[end - 1])) --end;
    if (end == 0) {
      held_ += text;
      return;
    }
    if (emitted_) content += held_;
    content += text.substr(0, end);
    held_ = std::string(text.substr(end));
    emitted_ = true;
  }
  // Forgets the held whitespace (it was not content: e.g. it stood before a call).
  void drop() { held_.clear(); }

 private:
  std::string held_;      // whitespace that becomes content only if more content follows
  bool emitted_ = false;  // some content was released (leading whitespace is dropped)
};

}  // namespace pypto
