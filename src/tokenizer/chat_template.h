#pragma once
// Chat-template rendering: the checkpoint's Jinja `chat_template` turned into a prompt string.
//
// Output is byte-identical to @huggingface/jinja (what transformers.js and most JS clients
// use), the reference our parity test checks against. Only the Jinja subset that Qwen-family
// templates need is implemented; anything else is rejected by parse(), naming the construct
// and its line, so a model with an unsupported template fails to load instead of failing
// requests.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace pypto {

namespace jinja {
struct Node;
}

class ChatTemplate {
 public:
  // Throws pypto::Error on a syntax error or an unsupported construct.
  static std::shared_ptr<const ChatTemplate> parse(const std::string& source);

  // Renders with the given variables: messages, tools, add_generation_prompt, bos_token, and
  // any chat_template_kwargs (enable_thinking, ...). Throws pypto::Error when the template
  // raises (raise_exception) or hits a type error. Thread-safe: the template is immutable.
  //
  // Key order matters (tool schemas are printed with tojson in their given order), so prefer
  // the ordered_json overload; nlohmann::json keeps objects sorted by key.
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::json& context) const;

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

 private:
  ChatTemplate();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pypto
