#include "tokenizer/utf8.h"

namespace pypto::utf8 {
namespace {

// For a lead byte, the number of bytes of its sequence and the allowed range of the second
// byte (Unicode Table 3-7); later bytes are always 80..BF. Length 0 marks bytes that can never
// start a character (continuation bytes, C0, C1, F5..FF).
struct LeadInfo {
  uint8_t len;
  uint8_t lo;
  uint8_t hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes surrogates D800..DFFF
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // caps at U+10FFFF
  return {0, 0, 0};
}

// Number of bytes starting at s[i] that belong to a well-formed prefix of one character
// (1..len), and whether that prefix is the complete character.
size_t valid_prefix(std::string_view s, size_t i, bool& complete) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
  complete = false;
  if (info.len == 0) return 0;
  if (info.len == 1) {
    complete = true;
    return 1;
  }
  size_t n = 1;
  for (; n < info.len && i + n < s.size(); ++n) {
    const uint8_t c = static_cast<uint8_t>(s[i + n]);
    const uint8_t lo = n == 1 ? info.lo : 0x80;
    const uint8_t hi = n == 1 ? info.hi : 0xBF;
    if (c < lo || c > hi) return n;
  }
  complete = n == info.len;
  return n;
}

}  // namespace

std::optional<size_t> find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    bool complete = false;
    const size_t n = valid_prefix(s, i, complete);
    if (!complete) return i;
    i += n;
  }
  return std::nullopt;
}

void append_lossy(std::string& out, std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t run = i;  // copy ASCII runs in one go
    while (run < bytes.size() && static_cast<uint8_t>(bytes[run]) < 0x80) ++run;
    out.append(bytes.data() + i, run - i);
    i = run;
    if (i == bytes.size()) break;
    bool complete = false;
    const size_t n = valid_prefix(bytes, i, complete);
    if (complete) {
      out.append(bytes.data() + i, n);
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");  // the maximal subpart (at least one byte) becomes one U+FFFD
      i += n == 0 ? 1 : n;
    }
  }
}

size_t incomplete_tail(std::string_view s) {
  // A character has at most 4 bytes, so an unfinished one starts within the last 3.
  const size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    const LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
    if (info.len < 2) continue;
    bool complete = false;
    const size_t n = valid_prefix(s, i, complete);
    if (!complete && i + n == s.size()) return n;
  }
  return 0;
}

void append_code_point(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view s, size_t& i) {
  const uint8_t b = static_cast<uint8_t>(s[i]);
  if (b < 0x80) {
    ++i;
    return b;
  }
  const int len = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  char32_t cp = b & (0x7F >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

}  // namespace pypto::utf8
