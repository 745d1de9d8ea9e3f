// libFuzzer target: the OpenAI request parser, body text -> validated request, through the
// functions the server's handlers call (parse_json_body, apply_generate_defaults, then the
// endpoint's parse_*_request). The first byte picks the endpoint and whether --generate-config
// defaults apply. Whatever the body: a request or an ApiError (a 400); any other exception is a
// bug (it would be a 500) and aborts the run.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/openai_protocol.h"

namespace {

const nlohmann::json& generate_defaults() {
  static const auto d = nlohmann::json::parse(
      R"({"max_new_tokens": 64, "temperature": 0.7, "top_p": 0.9, "stop": ["###"], "seed": 3})");
  return d;
}

void parse(uint8_t which, const std::string& text) {
  nlohmann::ordered_json body = pypto::parse_json_body(text);
  const bool defaults = which & 4;
  switch (which % 4) {
    case 0: {
      const auto d = defaults ? pypto::apply_generate_defaults(body, generate_defaults(), true) : std::set<std::string>{};
      const pypto::ChatRequest r = pypto::parse_chat_request(body, d);
      (void)r.messages.dump();  // what the chat template is given
      (void)r.tools.dump();
      break;
    }
    case 1: {
      const auto d = defaults ? pypto::apply_generate_defaults(body, generate_defaults(), false) : std::set<std::string>{};
      (void)pypto::parse_completion_request(body, d);
      break;
    }
    case 2: (void)pypto::parse_tokenize_request(body); break;
    default: {
      std::optional<std::string> model;
      (void)pypto::parse_detokenize_request(body, model);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 16) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    parse(data[0], text);
  } catch (const pypto::ApiError&) {
  }
  return 0;
}
