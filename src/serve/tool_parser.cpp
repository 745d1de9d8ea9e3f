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

// The call header: ws '{' ws "name" ws ':' ws STRING ws ',' ws "arguments" ws ':' ws '{'.
struct Header {
  enum { NeedMore, Fail, Done } status = NeedMore;
  std::string name;
  size_t end = 0;  // bytes of the header, the arguments' '{' included
};

Header parse_header(std::string_view h) {
  Header r;
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < h.size() && is_ws(h[i])) ++i;
    return i < h.size();
  };
  // Reads `lit`; false with r.status set when it is not (all) there.
  auto expect = [&](std::string_view lit) {
    if (!skip_ws()) return false;
    const size_t n = std::min(lit.size(), h.size() - i);
    if (h.substr(i, n) != lit.substr(0, n)) {
      r.status = Header::Fail;
      return false;
    }
    i += n;
    return n == lit.size();
  };
  if (!expect("{") || !expect("\"name\"") || !expect(":") || !skip_ws()) return r;
  if (h[i] != '"') return r.status = Header::Fail, r;
  size_t j = i + 1;
  while (j < h.size() && h[j] != '"') j += h[j] == '\\' ? 2 : 1;
  if (j >= h.size()) return r;
  try {
    r.name = nlohmann::json::parse(h.substr(i, j + 1 - i)).get<std::string>();
  } catch (const std::exception&) {
    return r.status = Header::Fail, r;
  }
  i = j + 1;
  if (!expect(",") || !expect("\"arguments\"") || !expect(":") || !expect("{")) return r;
  r.status = Header::Done;
  r.end = i;
  return r;
}

}  // namespace

ToolCallParser::ToolCallParser(std::function<std::string()> make_id, int32_t max_calls)
    : make_id_(std::move(make_id)), max_calls_(max_calls) {}

void ToolCallParser::emit_content(std::string_view text, Delta& out) {
  held_ws_.emit(text, out.content);
}

void ToolCallParser::add_arguments(std::string_view text, Delta& out) {
  if (text.empty()) return;
  Call& call = calls_.back();
  call.arguments += text;
  if (out.calls.empty() || out.calls.back().index != call.index || out.calls.back().opens)
    out.calls.push_back(CallDelta{.index = call.index, .opens = false, .id = {}, .name = {}, .arguments = {}});
  out.calls.back().arguments += text;
}

void ToolCallParser::close_call() {
  mode_ = Mode::Text;
  tail_.clear();
  tail_brace_ = false;
}

ToolCallParser::Delta ToolCallParser::append(std::string_view text) {
  Delta out;
  buf_ += text;
  size_t pos = 0;  // Args / Tail / Raw consume buf_ from here
  for (;;) {
    switch (mode_) {
      case Mode::Text: {
        buf_.erase(0, pos);
        pos = 0;
        const bool full = max_calls_ >= 0 && int32_t(calls_.size()) >= max_calls_;
        const size_t p = full ? std::string::npos : buf_.find(kOpen);
        if (p == std::string::npos) {
          const size_t keep = full ? 0 : partial_tag_suffix(buf_, kOpen);
          emit_content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
          buf_.erase(0, buf_.size() - keep);
          return out;
        }
        emit_content(std::string_view(buf_).substr(0, p), out);
        buf_.erase(0, p + kOpen.size());
        mode_ = Mode::Header;
        break;
      }
      case Mode::Header: {
        // Decided on the first kMaxHeaderBytes bytes only, so that every split decides the same.
        const Header h = parse_header(std::string_view(buf_).substr(0, kMaxHeaderBytes));
        if (h.status == Header::NeedMore && buf_.size() < kMaxHeaderBytes) return out;
        if (h.status != Header::Done) {  // not a call: the tag is content, the rest is read again
          emit_content(kOpen, out);
          mode_ = Mode::Text;
          break;
        }
        held_ws_.drop();  // whitespace around calls is not content
        Call call;
        call.index = int32_t(calls_.size());
        call.id = make_id_();
        call.name = h.name;
        calls_.push_back(call);
        out.calls.push_back(CallDelta{.index = call.index, .opens = true, .id = call.id, .name = call.name, .arguments = {}});
        add_arguments("{", out);
        json_ = JsonPrefix::inside_object();
        pos = h.end;
        mode_ = Mode::Args;
        break;
      }
      case Mode::Args: {
        std::string args;
        for (; pos < buf_.size() && mode_ == Mode::Args; ++pos) {
          const JsonPrefix::Step st = json_.feed(buf_[pos]);
          if (st == JsonPrefix::Step::Bad) {
            mode_ = Mode::Raw;
            break;
          }
          if (st != JsonPrefix::Step::Space) args += buf_[pos];
          if (st == JsonPrefix::Step::Done) mode_ = Mode::Tail;
        }
        add_arguments(args, out);
        if (mode_ == Mode::Args) {
          buf_.clear();
          return out;
        }
        break;
      }
      case Mode::Tail: {
        while (pos < buf_.size() && (is_ws(buf_[pos]) || (buf_[pos] == '}' && !tail_brace_))) {
          tail_brace_ |= buf_[pos] == '}';
          tail_ += buf_[pos++];
        }
        const std::string_view rest = std::string_view(buf_).substr(pos);
        if (rest.empty() || (rest.size() < kClose.size() && kClose.substr(0, rest.size()) == rest)) {
          buf_.erase(0, pos);  // a possible </tool_call> stays in buf_
          return out;
        }
        if (tail_brace_ && rest.substr(0, kClose.size()) == kClose) {
          pos += kClose.size();
          close_call();
          break;
        }
        add_arguments(tail_, out);  // other text: the call broke after its arguments
        tail_.clear();
        mode_ = Mode::Raw;
        break;
      }
      case Mode::Raw: {
        const std::string_view rest = std::string_view(buf_).substr(pos);
        const size_t p = rest.find(kClose);
        if (p != std::string_view::npos) {
          add_arguments(rest.substr(0, p), out);
          pos += p + kClose.size();
          close_call();
          break;
        }
        const size_t keep = partial_tag_suffix(rest, kClose);
        add_arguments(rest.substr(0, rest.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return out;
      }
    }
  }
}

ToolCallParser::Delta ToolCallParser::flush() {
  Delta out;
  switch (mode_) {
    case Mode::Text:
      emit_content(buf_, out);
      break;
    case Mode::Header:
      emit_content(std::string(kOpen) + buf_, out);
      break;
    case Mode::Args:  // cut inside the arguments: they stay as they are
    case Mode::Tail:  // cut inside `}` + </tool_call>: only the call's own syntax is missing
      break;
    case Mode::Raw:
      add_arguments(buf_, out);
      break;
  }
  buf_.clear();
  close_call();
  held_ws_.drop();
  return out;
}

}  // namespace pypto
