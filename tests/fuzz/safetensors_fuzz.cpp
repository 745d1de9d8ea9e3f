// libFuzzer target: the safetensors header parser on arbitrary file images. Malformed input must
// raise pypto::Error, never crash, overflow or read out of bounds (ASan/UBSan watch).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t start = 0;
  try {
    auto tensors = pypto::parse_safetensors_header(data, size, "fuzz.safetensors", &start);
    // Whatever parses must describe bytes inside the image.
    for (const auto& t : tensors)
      if (start + t.end > size) __builtin_trap();
  } catch (const pypto::Error&) {
  }
  return 0;
}
