#include "serve/json_limits.h"

#include "core/error.h"
#include "serve/api_error.h"

namespace pypto {

JsonShape json_shape(std::string_view text) {
  JsonShape s;
  int depth = 0;
  bool in_string = false;
  int64_t marks = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped byte cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        ++marks;
        if (++depth > s.depth) s.depth = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',': ++marks; break;
      default: break;
    }
  }
  s.values = marks + 1;
  return s;
}

void check_json_limits(std::string_view text, const std::string& where, const std::string& param) {
  const JsonShape s = json_shape(text);
  std::optional<std::string> p;
  if (!param.empty()) p = param;
  if (s.depth > kMaxJsonDepth)
    throw invalid_request(str_cat(where, ": nesting depth ", s.depth, " exceeds the limit of ", kMaxJsonDepth,
                                  " (kMaxJsonDepth)"),
                          p, "json_too_deep");
  if (s.values > kMaxJsonValues)
    throw invalid_request(str_cat(where, ": about ", s.values, " values exceed the limit of ", kMaxJsonValues,
                                  " (kMaxJsonValues)"),
                          p, "json_too_large");
}

}  // namespace pypto
