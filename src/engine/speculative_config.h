#pragma once
// --speculative-config: which drafter proposes tokens and how many per step (k). The JSON keys
// are vLLM's, so a vLLM command line works unchanged:
//   {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": M, "prompt_lookup_min": m}
//   {"model": DIR, "num_speculative_tokens": k, "quantization": "int8"}   (method draft_model)
//   {"method": "mtp", "num_speculative_tokens": k}   (the checkpoint's own MTP head: Qwen3.5 / Qwen3.6;
//   the older names qwen3_5_mtp and qwen3_next_mtp are accepted with a warning)
//   {"method": "eagle3", "model": DIR, "num_speculative_tokens": k}   (an EAGLE-3 head for a dense
//   Qwen3 target, model/eagle3_head.h; the method is inferred when DIR's config.json names an
//   EAGLE-3 architecture)
// Every method also takes "cost_model": true (the default: the engine speculates only where its
// measured step costs say it pays, engine/spec_cost_model.h) or false (always draft k tokens, for
// measuring what forced speculation gives; the per-request throttle still applies).
// Unknown keys, unknown methods and keys of the other method are refused by name, never ignored.
#include <cstdint>
#include <string>

namespace pypto {

struct ModelConfig;

enum class SpeculativeMethod { None, Ngram, DraftModel, Mtp, Eagle3 };

const char* speculative_method_name(SpeculativeMethod m);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::None;
  // k: draft tokens verified per step. A step then computes k + 1 rows for the request (its last
  // accepted token and the k drafts) and appends 1 .. k + 1 tokens.
  int32_t num_speculative_tokens = 0;
  // ngram: the suffix n-gram lengths tried, longest first (vLLM's defaults: both 5 when neither is
  // given; one given, the other copies it).
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // draft_model: the draft's checkpoint directory and its own weight quantization (none|int8|int4).
  // eagle3: the head's directory (draft_model), no quantization.
  std::string draft_model;
  std::string draft_quantization = "none";
  // Whether the measured cost model chooses k per step (engine/spec_cost_model.h).
  bool cost_model = true;

  bool enabled() const { return method != SpeculativeMethod::None; }
  // Methods whose drafter keeps per-request state and is handed to the scheduler (set_drafter).
  bool stateful_drafter() const {
    return method == SpeculativeMethod::DraftModel || method == SpeculativeMethod::Mtp ||
           method == SpeculativeMethod::Eagle3;
  }
  // Throws Error naming the field and its allowed values.
  void validate() const;
};

// The largest k accepted: a verify step holds k + 1 rows per request, and acceptance of long
// runs falls off geometrically (E = (1 - a^(k+1)) / (1 - a)), so more only costs.
constexpr int32_t kMaxSpeculativeTokens = 16;

// Parses --speculative-config. Empty text: speculation off. Throws Error naming the key.
SpeculativeConfig parse_speculative_config(const std::string& json_text);

// Checks the config against the target model (at start-up, once config.json is read): a draft
// model must share the target's vocabulary and tokenizer. (Hybrid targets roll their Gated
// DeltaNet state back past rejected drafts: model/gdn_rollback.h.) `target_dir` holds the target's tokenizer.json.
void check_speculative_target(const SpeculativeConfig& spec, const ModelConfig& target, const std::string& target_dir);

}  // namespace pypto
