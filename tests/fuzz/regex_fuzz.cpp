// libFuzzer target: the regex compiler on arbitrary patterns, in each mode (first byte: full
// match or search, plain or JSON-string spelling), then the grammar is compiled and walked.
// Whatever the input: pypto::Error or a grammar whose masks agree with stepping.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_grammar.h"
#include "structured/regex.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 12) return 0;
  const auto mode = data[0] & 1 ? pypto::structured::RegexMode::Search : pypto::structured::RegexMode::FullMatch;
  const bool json_string = data[0] & 2;
  const std::string pattern(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    pypto::structured::Grammar g;
    g.root = pypto::structured::compile_regex(pattern, mode, json_string);
    pypto::fuzz::compile_and_walk(g, pattern);
  } catch (const pypto::Error&) {
  }
  return 0;
}
