#pragma once
// String helpers with JavaScript semantics for the chat-template interpreter.
//
// @huggingface/jinja (our oracle) runs on JavaScript strings: UTF-16 code units, JS's own
// whitespace set for trim()/\s, JS number formatting. We keep strings in UTF-8 and reproduce
// those rules here, so that lengths, trims and printed numbers match byte for byte.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pypto::jinja {

// Decodes one code point at s[i] and advances i. An invalid byte decodes as U+FFFD (one byte).
char32_t next_code_point(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
std::vector<char32_t> to_code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps);

// UTF-16 view used where JS indexes code units (String.length, str.at(i)).
std::u16string to_utf16(std::string_view s);
std::string from_utf16(std::u16string_view s);
size_t utf16_length(std::string_view s);

// JS strings can hold lone surrogates (e.g. "😀"[0]). We keep them as 3-byte sequences
// (WTF-8) so that JSON.stringify can escape them and re-joined halves become the character
// again. canonical_wtf8 joins adjacent high+low halves into one 4-byte character;
// to_output_utf8 also turns the remaining lone halves into U+FFFD, as node does when it
// writes a string out as UTF-8.
std::string canonical_wtf8(std::string s);
std::string to_output_utf8(std::string s);

// JS WhiteSpace + LineTerminator (the set of /\s/ and String.prototype.trim).
bool is_js_space(char32_t cp);
std::string js_trim(std::string_view s);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);

// String.prototype.toUpperCase / toLowerCase (simple mappings plus the common special cases).
std::string js_upper(std::string_view s);
std::string js_lower(std::string_view s);

// Number.prototype.toString() (shortest round-trip digits laid out as ECMAScript specifies).
std::string js_number_to_string(double v);
// JSON.stringify of a string (escapes ", \, control characters; leaves non-ASCII as is).
void append_json_string(std::string& out, std::string_view s);
// Replaces every UTF-16 code unit >= 0x7F with \uXXXX, as the oracle's ensure_ascii does.
std::string make_ascii_safe(std::string_view s);

// JS Number(string) and parseInt(string, 10) / parseFloat(string); NaN when not a number.
double js_string_to_number(std::string_view s);
double js_parse_int(std::string_view s);
double js_parse_float(std::string_view s);

}  // namespace pypto::jinja
