#include "serve/reasoning_parser.h"

#include <algorithm>

namespace pypto {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kToolCall = "<tool_call>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  const size_t max = std::min(s.size(), tag.size() - 1);
  for (size_t len = max; len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}
}  // namespace

ReasoningStart reasoning_start_from_prompt(std::string_view prompt) {
  size_t turn = prompt.rfind("<|im_start|>");
  std::string_view tail = turn == std::string_view::npos ? prompt : prompt.substr(turn);
  const size_t open = tail.rfind(kOpen);
  const size_t close = tail.rfind(kClose);
  if (close != std::string_view::npos && (open == std::string_view::npos || close > open))
    return ReasoningStart::ContentOnly;
  if (open != std::string_view::npos) return ReasoningStart::InReasoning;
  return ReasoningStart::Detect;
}

ReasoningParser::ReasoningParser(ReasoningStart start) {
  switch (start) {
    case ReasoningStart::Detect:
      state_ = State::Start;
      detect_open_ = true;
      break;
    case ReasoningStart::InReasoning:
      state_ = State::Reasoning;
      strip_newlines_ = true;
      saw_reasoning_ = true;
      break;
    case ReasoningStart::ContentOnly:
      state_ = State::Content;
      break;
  }
}

void ReasoningParser::emit(Delta& d, std::string_view s) {
  if (strip_newlines_) {
    size_t i = 0;
    while (i < s.size() && s[i] == '\n') ++i;
    s.remove_prefix(i);
    if (s.empty()) return;
    strip_newlines_ = false;
  }
  (state_ == State::Reasoning ? d.reasoning : d.content) += s;
}

ReasoningParser::Delta ReasoningParser::append(std::string_view text) {
  Delta d;
  pending_ += text;
  for (;;) {
    if (state_ == State::Start) {
      // Leading whitespace, then either "<think>" or anything else (then content for good).
      // The whitespace seen so far is not scanned again: an output of only whitespace would
      // otherwise cost the square of its length.
      size_t i = start_ws_;
      while (i < pending_.size() && (pending_[i] == ' ' || pending_[i] == '\n')) ++i;
      start_ws_ = i;
      std::string_view rest = std::string_view(pending_).substr(i);
      if (rest.size() >= kOpen.size() && rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, i + kOpen.size());
        state_ = State::Reasoning;
        saw_reasoning_ = true;
        strip_newlines_ = true;
        continue;
      }
      if (rest.empty() || kOpen.substr(0, rest.size()) == rest) return d;  // still undecided
      state_ = State::Content;
      continue;
    }
    if (state_ == State::Content) {
      if (drop_close_) {
        const size_t close = pending_.find(kClose);
        if (close != std::string::npos) {
          emit(d, std::string_view(pending_).substr(0, close));
          pending_.erase(0, close + kClose.size());
          drop_close_ = false;
          continue;
        }
        const size_t keep = partial_tag_suffix(pending_, kClose);
        emit(d, std::string_view(pending_).substr(0, pending_.size() - keep));
        pending_.erase(0, pending_.size() - keep);
        return d;
      }
      emit(d, pending_);
      pending_.clear();
      return d;
    }
    // Reasoning: look for the closing tag (or a tool call, which also ends it when asked to).
    const size_t close = pending_.find(kClose);
    const size_t call = tool_call_ends_ ? pending_.find(kToolCall) : std::string::npos;
    if (call != std::string::npos && (close == std::string::npos || call < close)) {
      emit(d, std::string_view(pending_).substr(0, call));
      pending_.erase(0, call);  // the tag stays: it is the content's
      state_ = State::Content;
      strip_newlines_ = false;
      drop_close_ = true;
      continue;
    }
    if (close != std::string::npos) {
      emit(d, std::string_view(pending_).substr(0, close));
      pending_.erase(0, close + kClose.size());
      state_ = State::Content;
      strip_newlines_ = true;
      continue;
    }
    const size_t keep = std::max(partial_tag_suffix(pending_, kClose),
                                 tool_call_ends_ ? partial_tag_suffix(pending_, kToolCall) : 0);
    emit(d, std::string_view(pending_).substr(0, pending_.size() - keep));
    pending_.erase(0, pending_.size() - keep);
    return d;
  }
}

ReasoningParser::Delta ReasoningParser::flush() {
  Delta d;
  if (state_ == State::Start) state_ = State::Content;
  emit(d, pending_);
  pending_.clear();
  return d;
}

}  // namespace pypto
