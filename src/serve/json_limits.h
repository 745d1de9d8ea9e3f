#pragma once
// Limits on JSON text from a client, checked by one flat scan of the text before it is parsed.
// nlohmann's parser is iterative, but copying, dumping, comparing and destroying a json value
// recurse once per nesting level, and so do the schema compiler and the chat template's view of
// the messages: a body nested 100,000 levels deep would overflow the request thread's stack and
// take the whole server down. Refusing it before parsing protects everything downstream.
#include <cstdint>
#include <string>
#include <string_view>

namespace pypto {

// Nesting of arrays and objects. A JSON schema kMaxSchemaDepth (64) levels deep nested through
// "properties" is ~130 levels of JSON inside a request, well within this; the chat template's
// value depth limit (jinja::kMaxValueDepth) is the same 256.
inline constexpr int kMaxJsonDepth = 256;
// Values (array elements and object members) in one text: about 60 bytes of memory each once
// parsed, so this caps a body's parsed size near 120 MiB whatever its bytes.
inline constexpr int64_t kMaxJsonValues = 2'000'000;

struct JsonShape {
  int depth = 0;       // deepest nesting of [ and {
  int64_t values = 0;  // an upper bound on the values: every [, { and , outside strings, plus one
};

// The shape of `text` as written (also for invalid JSON: the parser reports that afterwards).
JsonShape json_shape(std::string_view text);

// 400 naming `where` (e.g. "request body", "structured_outputs.json"), the limit and the value
// found when `text` nests deeper than kMaxJsonDepth or holds more than kMaxJsonValues values.
// `param` is the field named in the error (empty: none).
void check_json_limits(std::string_view text, const std::string& where, const std::string& param = "");

}  // namespace pypto
