#include "sampling/rejection_sampler.h"

#include <algorithm>

#include "core/error.h"
#include "sampling/logits_processors.h"
#include "sampling/philox.h"

namespace pypto {

RejectionStep rejection_step(std::span<const float> p, std::span<const float> q, int32_t x, double u_accept,
                             double u_residual) {
  PYPTO_ASSERT(p.size() == q.size() && x >= 0 && size_t(x) < p.size());
  const double px = p[size_t(x)], qx = q[size_t(x)];
  // u < p/q, written without the division (q(x) > 0 for a token drawn from q; q(x) == 0 rejects).
  if (qx > 0.0 && u_accept * qx < px) return {true, x};
  std::vector<float> residual(p.size());
  bool any = false;
  for (size_t i = 0; i < p.size(); ++i) {
    residual[i] = std::max(0.0f, p[i] - q[i]);
    any = any || residual[i] > 0.0f;
  }
  return {false, draw_from_weights(any ? std::span<const float>(residual) : p, u_residual)};
}

std::vector<SampledToken> rejection_sample(std::span<float> logits, int64_t vocab, std::span<const int32_t> drafts,
                                           std::span<const float> draft_probs, std::span<const SamplerRow> rows) {
  const size_t k = drafts.size(), V = size_t(vocab);
  PYPTO_ASSERT(logits.size() == (k + 1) * V && draft_probs.size() == k * V && rows.size() == k + 1,
               "rejection_sample: ", logits.size(), " logits, ", draft_probs.size(), " draft probs, ", rows.size(),
               " rows for ", k, " drafts of vocab ", vocab);
  std::vector<SampledToken> run;
  std::vector<float> p, raw;
  for (size_t j = 0; j <= k; ++j) {
    std::span<float> row_logits = logits.subspan(j * V, V);
    const SamplerRow& row = rows[j];
    const auto& want_logprobs = row.params->logprobs;
    if (j == k) {  // every draft accepted: the bonus token, drawn as plain decoding draws
      run.push_back(sample_row(row_logits, row));
      break;
    }
    sanitize_logits(row_logits);  // (sample_row's first step; raw logprobs are taken after it)
    if (want_logprobs) raw.assign(row_logits.begin(), row_logits.end());
    sampling_distribution(row_logits, row, p);
    const uint64_t pos = uint64_t(row.output_token_ids.size());
    const RejectionStep step = rejection_step(p, draft_probs.subspan(j * V, V), drafts[j],
                                              philox_uniform(row.seed, kAcceptStream | pos),
                                              philox_uniform(row.seed, kResidualStream | pos));
    SampledToken t;
    t.token_id = step.token_id;
    if (want_logprobs) raw_logprobs(raw, *want_logprobs, t);
    run.push_back(std::move(t));
    if (!step.accepted) break;
  }
  return run;
}

}  // namespace pypto
