// libFuzzer target: the JSON-schema compiler on arbitrary JSON text. The text goes through the
// same nesting/size check the server applies to request bodies (serve/json_limits.h), then the
// schema is compiled and its grammar walked. Whatever the input: pypto::Error or a grammar whose
// masks agree with stepping; no crash, no hang, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fuzz_grammar.h"
#include "serve/api_error.h"
#include "serve/json_limits.h"
#include "structured/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;  // schemas are small; longer inputs only slow the search down
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    pypto::check_json_limits(text, "schema");
  } catch (const pypto::ApiError&) {
    return 0;
  }
  const nlohmann::json schema = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  try {
    const pypto::structured::Grammar g = pypto::structured::json_schema_grammar(schema, "schema");
    pypto::fuzz::compile_and_walk(g, text);
  } catch (const pypto::Error&) {
  }
  return 0;
}
