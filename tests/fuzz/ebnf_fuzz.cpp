// libFuzzer target: the EBNF grammar parser (structured_outputs.grammar) on arbitrary text, then
// the grammar is compiled and walked. Whatever the input: pypto::Error or a grammar whose masks
// agree with stepping.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_grammar.h"
#include "structured/ebnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 14) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pypto::structured::Grammar g = pypto::structured::parse_ebnf(text);
    pypto::fuzz::compile_and_walk(g, text);
  } catch (const pypto::Error&) {
  }
  return 0;
}
