#include "serve/xml_tool_parser.h"

#include <cstdint>

#include "serve/xml_param_value.h"

namespace pypto {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// JSON text of a value; invalid UTF-8 (a model can write any bytes) becomes U+FFFD rather than
// an exception.
std::string json_text(const nlohmann::ordered_json& v) {
  return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The longest prefix of s[0, end) that does not end inside a UTF-8 character.
size_t complete_utf8(std::string_view s, size_t end) {
  size_t i = end;
  for (int back = 0; back < 3 && i > 0 && (uint8_t(s[i - 1]) & 0xC0) == 0x80; ++back) --i;
  if (i == 0) return end;
  const uint8_t lead = uint8_t(s[i - 1]);
  const size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return i - 1 + len > end ? i - 1 : end;
}

// Length of the longest suffix of `s` that is a proper prefix of `tag` (held back: the next
// delta may complete the tag).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// Reading `<PREFIX NAME>` at the start of `s` (after whitespace).
struct NamedTag {
  enum { NeedMore, Fail, Done } status = NeedMore;
  std::string name;
  size_t end = 0;  // bytes read, '>' included
};

NamedTag read_named_tag(std::string_view s, std::string_view prefix) {
  NamedTag r;
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  const size_t n = std::min(prefix.size(), s.size() - i);
  if (s.substr(i, n) != prefix.substr(0, n)) return r.status = NamedTag::Fail, r;
  if (n < prefix.size()) return r;
  i += n;
  const size_t close = s.find('>', i);
  const size_t stop = close == std::string_view::npos ? s.size() : close;
  const std::string_view name = s.substr(i, stop - i);
  // A name is one line of tag text: no newline, no other tag inside.
  if (name.size() > XmlToolCallParser::kMaxNameBytes || name.find_first_of("\n<") != std::string_view::npos)
    return r.status = NamedTag::Fail, r;
  if (close == std::string_view::npos) return r;
  if (name.empty()) return r.status = NamedTag::Fail, r;
  r.status = NamedTag::Done;
  r.name = std::string(name);
  r.end = close + 1;
  return r;
}

// Whether `s` (after whitespace) starts with `tag`: 1 yes (then *end is past it), 0 not yet
// known, -1 no.
int read_tag(std::string_view s, std::string_view tag, size_t* end) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  const size_t n = std::min(tag.size(), s.size() - i);
  if (s.substr(i, n) != tag.substr(0, n)) return -1;
  if (n < tag.size()) return 0;
  *end = i + n;
  return 1;
}

}  // namespace

XmlToolCallParser::XmlToolCallParser(const nlohmann::ordered_json& tools, std::function<std::string()> make_id,
                                     int32_t max_calls)
    : make_id_(std::move(make_id)), max_calls_(max_calls) {
  if (!tools.is_array()) return;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const auto& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) continue;
    nlohmann::json params = fn.contains("parameters") ? nlohmann::json::parse(fn["parameters"].dump()) : nlohmann::json();
    params_[fn["name"].get<std::string>()] = std::move(params);
  }
}

void XmlToolCallParser::emit_content(std::string_view text, Delta& out) {
  held_ws_.emit(text, out.content);
}

nlohmann::json XmlToolCallParser::param_schema() {
  const nlohmann::json& schema = params_[calls_.back().name];
  if (schema.is_object() && schema.contains("properties") && schema["properties"].is_object() &&
      schema["properties"].contains(param_))
    return schema["properties"][param_];
  return nlohmann::json();
}

void XmlToolCallParser::add_piece(const std::string& piece, Delta& out) {
  if (piece.empty()) return;
  Call& call = calls_.back();
  call.arguments += piece;
  out.calls.push_back({call.index, false, "", "", piece});
}

void XmlToolCallParser::add_parameter(std::string_view raw, Delta& out) {
  // The format's own newlines around the value are not part of it.
  if (!raw.empty() && raw.front() == '\n') raw.remove_prefix(1);
  if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
  add_piece(std::string(first_param_ ? "{" : ",") + json_text(nlohmann::ordered_json(param_)) + ":" +
                json_text(xml_param_value(raw, param_schema())),
            out);
  first_param_ = false;
}

void XmlToolCallParser::stream_text(std::string_view text, bool last, Delta& out) {
  if (!value_started_) {
    if (text.empty() && !last) return;  // the leading newline may still come
    if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    value_started_ = true;
  }
  if (last && !text.empty() && text.back() == '\n') text.remove_suffix(1);
  std::string piece;
  if (!text.empty()) {
    const std::string quoted = json_text(nlohmann::ordered_json(std::string(text)));
    piece = quoted.substr(1, quoted.size() - 2);  // escaping is per character: pieces concatenate
  }
  if (last) piece += '"';
  add_piece(piece, out);
}

void XmlToolCallParser::close_call(Delta& out) {
  Call& call = calls_.back();
  const std::string piece = first_param_ ? "{}" : "}";
  call.arguments += piece;
  out.calls.push_back({call.index, false, "", "", piece});
}

bool XmlToolCallParser::step(Delta& out, bool at_end) {
  switch (mode_) {
    case Mode::Text: {
      const size_t open = buf_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = at_end ? 0 : partial_tag_suffix(buf_, kOpen);
        emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return false;
      }
      emit_content(std::string_view(buf_).substr(0, open), out);
      const bool room = max_calls_ < 0 || int32_t(calls_.size()) < max_calls_;
      if (!room) emit_content(kOpen, out);  // the tag is text: no more calls allowed
      buf_.erase(0, open + kOpen.size());
      if (room) mode_ = Mode::Head;
      return true;
    }
    case Mode::Head: {
      const NamedTag tag = read_named_tag(buf_, kFunction);
      const bool known = tag.status == NamedTag::Done && params_.count(tag.name) > 0;
      if (tag.status == NamedTag::NeedMore && !at_end) return false;
      if (!known) {  // not a call after all: the tag and what follows are text
        emit_content(kOpen, out);
        mode_ = Mode::Text;
        return true;
      }
      Call call;
      call.index = int32_t(calls_.size());
      call.id = make_id_();
      call.name = tag.name;
      out.calls.push_back({call.index, true, call.id, call.name, ""});
      calls_.push_back(std::move(call));
      first_param_ = true;
      buf_.erase(0, tag.end);
      mode_ = Mode::Body;
      return true;
    }
    case Mode::Body: {
      size_t end = 0;
      const int fn_end = read_tag(buf_, kFunctionEnd, &end);
      if (fn_end == 1) {
        close_call(out);
        buf_.erase(0, end);
        mode_ = Mode::Tail;
        return true;
      }
      const NamedTag tag = read_named_tag(buf_, kParameter);
      if (tag.status == NamedTag::Done) {
        param_ = tag.name;
        buf_.erase(0, tag.end);
        value_scan_ = 0;
        mode_ = Mode::Value;
        const nlohmann::json schema = param_schema();
        streaming_ = schema.is_null() || (schema.is_object() && schema.value("type", nlohmann::json()) == "string");
        value_started_ = false;
        if (streaming_) {
          add_piece(std::string(first_param_ ? "{" : ",") + json_text(nlohmann::ordered_json(param_)) + ":\"", out);
          first_param_ = false;
        }
        return true;
      }
      if ((fn_end == 0 || tag.status == NamedTag::NeedMore) && !at_end) return false;
      close_call(out);  // broken (or cut short): the call keeps what it has; the rest is text
      mode_ = Mode::Text;
      return true;
    }
    case Mode::Value: {
      const size_t close = buf_.find(kParameterEnd, value_scan_);
      if (streaming_) {
        if (close != std::string::npos || at_end) {
          const size_t end = close != std::string::npos ? close : buf_.size();
          stream_text(std::string_view(buf_).substr(0, end), true, out);
          buf_.erase(0, close != std::string::npos ? close + kParameterEnd.size() : end);
          if (close == std::string::npos) {  // cut short
            close_call(out);
            mode_ = Mode::Text;
          } else {
            mode_ = Mode::Body;
          }
          return true;
        }
        // Release what is certain to be text; hold back what may yet be the closing tag, the
        // newline before it, and an unfinished character.
        size_t end = buf_.size() - partial_tag_suffix(buf_, kParameterEnd);
        if (end > 0 && buf_[end - 1] == '\n') --end;
        end = complete_utf8(buf_, end);
        stream_text(std::string_view(buf_).substr(0, end), false, out);
        buf_.erase(0, end);
        return false;
      }
      if (close == std::string::npos) {
        if (at_end) {  // cut short: the value as it stands
          add_parameter(buf_, out);
          buf_.clear();
          close_call(out);
          mode_ = Mode::Text;
          return true;
        }
        value_scan_ = buf_.size() - partial_tag_suffix(buf_, kParameterEnd);
        return false;
      }
      add_parameter(std::string_view(buf_).substr(0, close), out);
      buf_.erase(0, close + kParameterEnd.size());
      mode_ = Mode::Body;
      return true;
    }
    case Mode::Tail: {
      size_t end = 0;
      const int r = read_tag(buf_, kClose, &end);
      if (r == 0 && !at_end) return false;
      if (r == 1) buf_.erase(0, end);  // else: no </tool_call>; what follows is text
      mode_ = Mode::Text;
      return true;
    }
  }
  return false;
}

ToolCallStream::Delta XmlToolCallParser::append(std::string_view text) {
  Delta out;
  buf_ += text;
  while (step(out, false)) {
  }
  return out;
}

ToolCallStream::Delta XmlToolCallParser::flush() {
  Delta out;
  while (step(out, true)) {
  }
  buf_.clear();
  return out;
}

}  // namespace pypto
