#include "serve/tool_parser.h"

#include <nlohmann/json.hpp>

namespace pypto {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest suffix of `s` that is a proper prefix of `tag` (kept back: the tag may
// be completed by the next delta).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ToolCallParser::ToolCallParser(std::function<std::string()> make_id, int32_t max_calls)
    : make_id_(std::move(make_id)), max_calls_(max_calls) {}

void ToolCallParser::emit_content(std::string_view text, Delta& out) {
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    pending_ws_ += text;
    return;
  }
  if (emitted_) out.content += pending_ws_;  // content never starts with whitespace
  out.content += text.substr(0, end);
  emitted_ = true;
  pending_ws_ = std::string(text.substr(end));
}

void ToolCallParser::finish_call(std::string_view body, bool closed, Delta& out) {
  bool ok = max_calls_ < 0 || int32_t(calls_.size()) < max_calls_;
  Call call;
  if (ok) {
    ok = false;
    try {
      const auto j = nlohmann::ordered_json::parse(body);
      const auto name = j.find("name");
      const auto args = j.find("arguments");
      if (j.is_object() && name != j.end() && name->is_string() && args != j.end() && args->is_object()) {
        call.name = name->get<std::string>();
        call.arguments = args->dump();
        ok = true;
      }
    } catch (const std::exception&) {
    }
  }
  if (!ok) {
    std::string raw = std::string(kOpen) + std::string(body);
    if (closed) raw += kClose;
    emit_content(raw, out);
    return;
  }
  pending_ws_.clear();  // whitespace around calls is not content
  call.index = int32_t(calls_.size());
  call.id = make_id_();
  calls_.push_back(call);
  out.calls.push_back(std::move(call));
}

ToolCallParser::Delta ToolCallParser::append(std::string_view text) {
  Delta out;
  buf_ += text;
  for (;;) {
    if (!in_call_) {
      const size_t p = buf_.find(kOpen);
      if (p == std::string::npos) {
        const size_t keep = partial_tag_suffix(buf_, kOpen);
        emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return out;
      }
      emit_content(std::string_view(buf_).substr(0, p), out);
      buf_.erase(0, p + kOpen.size());
      in_call_ = true;
    } else {
      const size_t p = buf_.find(kClose);
      if (p == std::string::npos) return out;  // the body so far stays in buf_
      finish_call(std::string_view(buf_).substr(0, p), true, out);
      buf_.erase(0, p + kClose.size());
      in_call_ = false;
    }
  }
}

ToolCallParser::Delta ToolCallParser::flush() {
  Delta out;
  if (in_call_) finish_call(buf_, false, out);
  else emit_content(buf_, out);
  buf_.clear();
  in_call_ = false;
  pending_ws_.clear();
  return out;
}

}  // namespace pypto
