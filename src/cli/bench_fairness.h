#pragma once
// `bench fairness`: does one request that asks for a lot starve the others? Measures the ITL and
// TTFT of a few ordinary streaming completions alone, then while a heavy client keeps one heavy
// request in the server at a time (sent again as soon as one ends, a fresh prompt each time so
// the prefix cache does not soften it):
//   n64          n = 64 with long outputs (ignore_eos);
//   long-prompt  a prompt of max_model_len − 8 random token ids (one long prefill after another);
//   slow-grammar a regex whose counted repetition makes every step a grammar state not seen
//                before (a vocabulary walk per token), n = 8.
// The ratios to the alone figures are what the issue asks to state.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"

namespace pypto::bench {

struct FairnessOptions {
  std::string base_url;
  std::string model;
  int64_t max_model_len = 0;   // from /v1/models when 0
  int ordinary = 4;            // ordinary streams at once
  int64_t ordinary_prompt = 32, ordinary_output = 64;
  int64_t heavy_output = 256;  // n64 and slow-grammar outputs
  std::vector<std::string> heavies = {"n64", "long-prompt", "slow-grammar"};
  int32_t vocab = 150000;      // random prompt ids are drawn below this
  uint64_t seed = 0;
  double timeout_s = 600;
};

struct FairnessPhase {
  std::string name;              // "alone" or a heavy kind
  Summary itl_ms, ttft_ms, tpot_ms;
  std::vector<double> itls_ms;   // pooled, for the CDF
  size_t heavy_requests = 0;     // heavy requests sent during the phase
  size_t failed = 0;             // ordinary requests that did not complete
  double seconds = 0;
};

const std::vector<std::string>& heavy_kinds();

// The heavy request's body (k counts the heavy requests sent, for fresh prompts).
nlohmann::json heavy_body(const std::string& kind, const FairnessOptions& o, uint64_t k);

std::vector<FairnessPhase> run_fairness(const FairnessOptions& o);

void print_fairness_summary(const std::vector<FairnessPhase>& phases);
void save_fairness_results(const std::string& dir, const nlohmann::ordered_json& config,
                           const std::vector<FairnessPhase>& phases);

}  // namespace pypto::bench
