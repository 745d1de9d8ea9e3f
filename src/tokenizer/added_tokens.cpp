#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace pypto {
namespace {

// Rust's char::is_whitespace (the Unicode White_Space property), which Hugging Face uses for
// lstrip/rstrip.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Letters, digits and underscore count as word characters for single_word.
bool is_word_char(char32_t c) {
  if (c == '_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// Start of the last code point of s (s valid UTF-8, non-empty).
size_t last_char_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t last_char(std::string_view s) {
  size_t i = last_char_start(s);
  return utf8::next_code_point(s, i);
}

char32_t first_char(std::string_view s) {
  size_t i = 0;
  return utf8::next_code_point(s, i);
}

}  // namespace

AddedToken AddedToken::from_json(const nlohmann::json& j) {
  AddedToken t;
  t.id = j.at("id").get<int32_t>();
  t.content = j.at("content").get<std::string>();
  t.special = j.value("special", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.single_word = j.value("single_word", false);
  t.normalized = j.value("normalized", !t.special);
  if (t.content.empty()) fail("tokenizer.json: added token id ", t.id, " has empty content");
  if (utf8::find_invalid(t.content)) fail("tokenizer.json: added token id ", t.id, " is not valid UTF-8");
  return t;
}

void AddedTokenMatcher::add(std::string pattern, const AddedToken& token) {
  if (pattern.empty()) return;
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  entries_.push_back({std::move(pattern), token});
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.pattern[0] != b.pattern[0]) return static_cast<unsigned char>(a.pattern[0]) < static_cast<unsigned char>(b.pattern[0]);
    return a.pattern.size() > b.pattern.size();
  });
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>& out) const {
  if (entries_.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  size_t plain_start = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const Entry* hit = nullptr;
    for (const Entry& e : entries_) {
      if (e.pattern[0] != text[pos]) continue;
      if (text.compare(pos, e.pattern.size(), e.pattern) == 0) {
        hit = &e;  // sorted longest first
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + hit->pattern.size();
    const AddedToken& tok = hit->token;
    if (tok.single_word) {
      const bool word_before = start > 0 && is_word_char(last_char(text.substr(0, start)));
      const bool word_after = stop < text.size() && is_word_char(first_char(text.substr(stop)));
      if (word_before || word_after) {
        // Hugging Face's matcher consumed this span; the search resumes after it.
        pos = stop;
        continue;
      }
    }
    if (tok.lstrip) {
      while (start > plain_start) {
        const size_t prev = last_char_start(text.substr(0, start));
        if (!is_white_space(last_char(text.substr(0, start)))) break;
        start = prev;
      }
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_white_space(utf8::next_code_point(text, next))) break;
        stop = next;
      }
    }
    if (start > plain_start) out.push_back({text.substr(plain_start, start - plain_start), -1});
    out.push_back({{}, tok.id});
    plain_start = pos = stop;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
}

}  // namespace pypto
