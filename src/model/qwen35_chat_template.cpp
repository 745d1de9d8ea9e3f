#include "model/qwen35_chat_template.h"

#include <cstddef>

namespace pypto {

namespace {
struct EmbeddedFile {
  const char* name;
  const unsigned char* data;
  size_t size;
};
#include "chat_templates.inc"
}  // namespace

const std::string& qwen35_chat_template() {
  static const std::string text(reinterpret_cast<const char*>(kChatTemplates[0].data), kChatTemplates[0].size);
  return text;
}

}  // namespace pypto
