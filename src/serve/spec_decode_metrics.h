#pragma once
// /metrics lines for speculative decoding, vLLM's names and meaning (engine/spec_decode_stats.h):
//   vllm:spec_decode_num_drafts_total, vllm:spec_decode_num_draft_tokens_total,
//   vllm:spec_decode_num_accepted_tokens_total and
//   vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0".."k-1"}.
// The draft model's own prefix cache (engine/draft_kv_blocks.h), named as the target's
// vllm:prefix_cache_{queries,hits}_total under the project's prefix:
//   pypto:draft_prefix_cache_queries_total, pypto:draft_prefix_cache_hits_total (tokens).
// And the cost model's decisions (engine/spec_cost_stats.h), under the project's prefix:
//   pypto:spec_decode_speculating, pypto:spec_decode_last_k (gauges),
//   pypto:spec_decode_chosen_k_total{k="0".."k"}, pypto:spec_decode_steps_speculating_total,
//   pypto:spec_decode_steps_plain_total, pypto:spec_decode_probes_total (counters),
//   pypto:spec_decode_{plain,spec}_step_seconds and _tokens_per_second (estimates, NaN unmeasured).
// Written only when some engine speculates (as vLLM registers them only then).
#include <functional>
#include <string>
#include <vector>

#include "serve/metrics.h"

namespace pypto {

void render_spec_decode_metrics(std::string& out, const std::vector<EngineGauges>& gauges,
                                const std::function<std::string(size_t)>& labels);

}  // namespace pypto
