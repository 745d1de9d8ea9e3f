// libFuzzer target: config.json and generation_config.json parsing on arbitrary text.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    pypto::ModelConfig c = pypto::parse_model_config(text, "config.json");
    // A config that parses must be internally consistent.
    if (c.head_dim <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) __builtin_trap();
    // A quantization_config that parses describes a format the decoders serve.
    if (c.quant.method == pypto::QuantMethod::Fp8 && (c.quant.fp8_block_n <= 0 || c.quant.fp8_block_k <= 0))
      __builtin_trap();
    if (c.quant.method == pypto::QuantMethod::Awq && (c.quant.awq_bits != 4 || c.quant.awq_group <= 0))
      __builtin_trap();
    if (c.quant.method == pypto::QuantMethod::Gptq && (c.quant.gptq_bits != 4 || c.quant.gptq_group <= 0))
      __builtin_trap();
    pypto::merge_generation_config(c, text, "generation_config.json");
  } catch (const pypto::Error&) {
  }
  return 0;
}
