#pragma once
// UTF-8 helpers shared by the encoder (input validation), the decoder (lossy conversion of
// token bytes) and the incremental detokenizer (holding back an unfinished character).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pypto::utf8 {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlongs,
// surrogates and code points above U+10FFFF are ill-formed), or nullopt if `s` is valid.
std::optional<size_t> find_invalid(std::string_view s);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with U+FFFD. This is the
// Unicode "best practice" that Rust's String::from_utf8_lossy (used by Hugging Face tokenizers),
// Python's errors="replace" and the WHATWG TextDecoder all follow, so one bad byte inside a
// multi-byte character gives one U+FFFD, not one per byte.
void append_lossy(std::string& out, std::string_view bytes);

// Length of the trailing bytes of `s` that form a proper, still unfinished prefix of a
// well-formed character (e.g. "\xE4\xB8"): more bytes may complete it. 0 when `s` ends on a
// character boundary or with bytes that can never become valid.
size_t incomplete_tail(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (must be a Unicode scalar value).
void append_code_point(std::string& out, char32_t cp);

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);

}  // namespace pypto::utf8
