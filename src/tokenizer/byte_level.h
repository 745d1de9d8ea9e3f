#pragma once
// The GPT-2 byte-level alphabet: every byte is shown as one printable code point so that BPE
// vocabularies can be stored as text (space is "Ġ", newline "Ċ"). The tokenizer works on raw
// bytes internally; this mapping is only needed to read tokenizer.json and to print tokens.
#include <optional>
#include <string>
#include <string_view>

namespace pypto::byte_level {

// The code point that stands for `byte`.
char32_t byte_to_char(unsigned char byte);

// Raw bytes of a vocabulary entry written in the byte-level alphabet, or nullopt when it holds a
// code point outside that alphabet (such a token is not a byte sequence).
std::optional<std::string> token_to_bytes(std::string_view token);

// The byte-level spelling of raw bytes (the inverse of token_to_bytes).
std::string bytes_to_token(std::string_view bytes);

}  // namespace pypto::byte_level
