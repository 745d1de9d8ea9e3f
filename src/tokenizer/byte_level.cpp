#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace pypto::byte_level {
namespace {

// Printable Latin-1 bytes stand for themselves; the remaining 68 bytes (controls, space, DEL,
// NBSP, soft hyphen) are given code points 256, 257, ... in byte order, as GPT-2 defined it.
struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 324> to_byte{};  // indexed by code point; every mapped one is below 324

  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char byte) { return tables().to_char[byte]; }

std::optional<std::string> token_to_bytes(std::string_view token) {
  if (utf8::find_invalid(token)) return std::nullopt;
  const Tables& t = tables();
  std::string bytes;
  bytes.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    const char32_t cp = utf8::next_code_point(token, i);
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(t.to_byte[cp]));
  }
  return bytes;
}

std::string bytes_to_token(std::string_view bytes) {
  std::string token;
  token.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8::append_code_point(token, byte_to_char(b));
  return token;
}

}  // namespace pypto::byte_level
