#include "engine/mtp_config.h"

#include "core/error.h"
#include "core/log.h"
#include "engine/speculative_config.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace pypto {

bool is_mtp_method(const std::string& method) {
  if (method == "mtp") return true;
  if (method == "qwen3_5_mtp" || method == "qwen3_next_mtp") {
    log_warn("--speculative-config: method \"", method, "\" is deprecated (as in vLLM); use \"mtp\"");
    return true;
  }
  return false;
}

void check_mtp_target(const SpeculativeConfig& spec, const ModelConfig& target, const std::string& target_dir) {
  constexpr const char* kWhere = "--speculative-config";
  if (!target.hybrid())
    fail(kWhere, ": method mtp drafts with the checkpoint's own MTP head, which only Qwen3.5 / Qwen3.6 and ",
         "Qwen3-Next checkpoints carry; ", target.architecture, " has none: use method ngram or draft_model");
  const std::string path = target_dir + "/config.json";
  const nlohmann::json cfg = parse_json_object(read_text_file(path), path);
  const nlohmann::json& text = cfg.contains("text_config") && cfg["text_config"].is_object() ? cfg["text_config"] : cfg;
  if (target.architecture == "Qwen3NextForCausalLM") {
    // Qwen3NextConfig has no MTP key: the published config.json declares none and the head is
    // there when the checkpoint has mtp.* (refused by name when staging otherwise). vLLM reads an
    // optional num_nextn_predict_layers (default 1) for the number of MTP layers.
    const auto n = text.find("num_nextn_predict_layers");
    if (n != text.end() && (!n->is_number_integer() || n->get<int64_t>() != 1))
      fail(kWhere, ": ", path, " declares num_nextn_predict_layers ", n->dump(),
           "; only 1 (one MTP layer, as Qwen3-Next publishes) is supported");
    return;
  }
  const auto it = text.find("mtp_num_hidden_layers");
  if (it == text.end() || !it->is_number_integer() || it->get<int64_t>() < 1)
    fail(kWhere, ": method mtp needs an MTP head, but ", path, " declares none (mtp_num_hidden_layers ",
         it == text.end() ? std::string("is absent") : "is " + it->dump(), ")");
  if (it->get<int64_t>() != 1)
    fail(kWhere, ": ", path, " declares mtp_num_hidden_layers ", it->get<int64_t>(),
         "; only 1 (every published Qwen3.5 / Qwen3.6 checkpoint) is supported");
  if (text.value("mtp_use_dedicated_embeddings", false))
    fail(kWhere, ": ", path, " sets mtp_use_dedicated_embeddings: an MTP head with its own embedding and lm_head is ",
         "not supported (the published checkpoints share the target's)");
  (void)spec;
}

}  // namespace pypto
