#pragma once
// --generate-config JSON: the seed's strict generation options. Unknown keys and wrong types are
// errors naming the key; in offline mode they set every prompt's sampling, in serve mode they are
// the defaults for fields a request omits.
#include <nlohmann/json.hpp>
#include <string>

#include "sampling/sampling_params.h"

namespace pypto::cli {

// Keys accepted (OpenAI/vLLM names; max_new_tokens is the seed's name for max_tokens).
const std::vector<std::string>& generate_config_keys();
// Parses and validates the JSON text; Error "--generate-config: ..." names the key at fault.
nlohmann::json parse_generate_config(const std::string& text);
// Applies a parsed config to params (only the keys present).
void apply_generate_config(const nlohmann::json& cfg, SamplingParams& params);

}  // namespace pypto::cli
