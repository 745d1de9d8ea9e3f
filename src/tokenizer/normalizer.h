#pragma once
// Unicode normalisation of text before pre-tokenization (tokenizer.json "normalizer").
#include <string>
#include <string_view>

namespace pypto {

// NFC of valid UTF-8 text, computed by utf8proc.
std::string nfc(std::string_view text);

}  // namespace pypto
