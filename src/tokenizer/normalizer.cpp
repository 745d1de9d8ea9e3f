#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace pypto {
namespace {

// Every code point below U+0300 has NFC_Quick_Check=Yes and does not combine with what precedes
// it, so text made only of them is already NFC. This skips utf8proc for ASCII and most Latin
// text, which is the bulk of what a server sees.
bool trivially_nfc(std::string_view text) {
  for (unsigned char c : text) {
    // Lead bytes C2..CB encode U+0080..U+02FF; any lead byte from CC up starts U+0300 or above.
    if (c >= 0xCC) return false;
  }
  return true;
}

}  // namespace

std::string nfc(std::string_view text) {
  if (trivially_nfc(text)) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("NFC normalisation failed: ", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace pypto
