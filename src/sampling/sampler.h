#pragma once
// The batched sampler: logits [rows, vocab] (f32, row-major) plus each row's parameters and
// state -> one token per row, with logprobs when asked.
//
// Every row is processed on its own (penalties, bias, temperature, top-k, top-p, min-p, its own
// seeded draw), so a row with an unusual option never pushes the batch onto a slower path, and a
// row's token never depends on the other rows. Order of operations per row:
//   nan -> -inf (+inf -> max float), logit_bias, penalties, min_tokens mask, then either greedy
//   argmax (ties -> lowest id), or temperature, top-k, top-p (keeps the token that crosses p),
//   min-p and one inverse-CDF draw u = philox_uniform(seed, number of output tokens so far) over
//   the kept tokens in id order. Truncation keeps the tokens first in (logit desc, id asc) order,
//   found by selection (a bounded heap for top-k, quickselect on mass for top-p) rather than a
//   sort: every option costs O(vocab).
// Logprobs are those of the model's raw distribution (log_softmax of the logits as given), as
// vLLM reports them by default.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace pypto {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;                     // filled only when params.logprobs is set
  std::vector<TokenLogprob> top_logprobs;   // params.logprobs entries, most likely first
};

// One row's inputs. Spans must stay valid during the call.
struct SamplerRow {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_token_ids;  // for repetition_penalty
  std::span<const int32_t> output_token_ids;  // penalties, min_tokens, and the draw counter
  std::span<const int32_t> eos_token_ids;     // masked (with stop_token_ids) before min_tokens
  uint64_t seed = 0;                          // the request's resolved seed
  // Structured outputs: the tokens the grammar allows (bit id % 32 of word id / 32); empty =
  // unconstrained. Applied after the raw logprobs are taken, before logit_bias and penalties.
  std::span<const uint32_t> allowed_tokens;
};

// Samples one row; `logits` is modified in place (it holds the processed logits afterwards).
SampledToken sample_row(std::span<float> logits, const SamplerRow& row);

// Runs fn(i) for every i in [0, n), possibly in parallel, and returns when all are done. The
// engine passes its backend's thread pool (ModelExecutor::parallel_rows), so sampling runs on the
// same pinned threads as the kernels instead of a second pool whose idle threads would spin
// against them.
using RowRunner = std::function<void(int64_t n, const std::function<void(int64_t)>& fn)>;

// Samples every row of logits [rows.size(), vocab_size] (modified in place), rows spread by
// `run_rows` (empty: one after another on the calling thread); results are in row order and never
// depend on how rows were spread.
std::vector<SampledToken> sample_batch(std::span<float> logits, int64_t vocab_size,
                                       std::span<const SamplerRow> rows, const RowRunner& run_rows = {});

// The distribution sample_row draws row's token from, over the whole vocabulary: the same
// processing (mask, logit_bias, penalties, min_tokens), temperature and truncation (top-k, top-p,
// min-p: the same kept set), normalised; a greedy row gives one-hot(argmax). `logits` is
// modified in place; probs gets [vocab] floats summing to 1. Speculative decoding's rejection
// sampler (sampling/rejection_sampler.h) applies it to the target's and the draft's rows alike.
void sampling_distribution(std::span<float> logits, const SamplerRow& row, std::vector<float>& probs);
// out.logprob (and top_n top_logprobs) of out.token_id under log_softmax(raw), as sample_row
// reports them; raw: a sanitized row before any processing.
void raw_logprobs(std::span<const float> raw, int32_t top_n, SampledToken& out);
// Inverse-CDF draw in id order from non-negative weights (not necessarily normalised; at least
// one > 0), u in [0, 1).
int32_t draw_from_weights(std::span<const float> w, double u);

// Building blocks, exposed for tests.
// The random draw (temperature, top-k, top-p, min-p, u in [0, 1)) always over the whole
// vocabulary, without sample_row's shortcut for a small top-k (which must draw the same token).
int32_t sample_random_full_vocab(std::span<float> logits, const SamplingParams& p, double u);
// argmax with ties broken towards the lowest id.
int32_t argmax_lowest_id(std::span<const float> logits);
// The k most likely tokens as (id, logprob) under log_softmax(logits), most likely first,
// ties by lowest id. Uses a partial selection, not a full sort.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k);

}  // namespace pypto
