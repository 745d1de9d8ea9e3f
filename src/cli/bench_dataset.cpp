#include "cli/bench_dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"

namespace pypto::bench {
namespace {

// The largest id that is a plain BPE token (added tokens sit at the top for Qwen).
std::vector<int32_t> plain_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  ids.reserve(size_t(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_added(id)) ids.push_back(id);
  return ids;
}

int64_t draw_len(int64_t len, double ratio, std::mt19937_64& rng) {
  if (ratio <= 0) return len;
  const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(len) * (1 - ratio))));
  const int64_t hi = std::max<int64_t>(lo, int64_t(std::ceil(double(len) * (1 + ratio))));
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

}  // namespace

std::vector<DatasetRequest> random_dataset(const Tokenizer& tok, const RandomDatasetOptions& o) {
  if (o.input_len < 1) fail("--input-len ", o.input_len, ": must be at least 1");
  if (o.output_len < 1) fail("--output-len ", o.output_len, ": must be at least 1");
  if (o.range_ratio < 0 || o.range_ratio >= 1) fail("--random-range-ratio ", o.range_ratio, ": must be in [0, 1)");
  const std::vector<int32_t> vocab = plain_ids(tok);
  if (vocab.empty()) fail("the tokenizer has no plain (non-added) tokens to draw prompts from");
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<size_t> pick(0, vocab.size() - 1);
  std::vector<DatasetRequest> out;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    const int64_t n = draw_len(o.input_len, o.range_ratio, rng);
    DatasetRequest r;
    r.output_len = draw_len(o.output_len, o.range_ratio, rng);
    std::vector<int32_t> ids;
    for (int round = 0;; ++round) {
      if (round == 32)
        fail("random dataset: could not build a prompt of exactly ", n, " tokens (seed ", o.seed, ", prompt ", i,
             "); last try had ", r.prompt_ids.size());
      while (int64_t(ids.size()) < n) ids.push_back(vocab[pick(rng)]);
      ids.resize(size_t(n));
      r.prompt = tok.decode(ids);
      r.prompt_ids = tok.encode(r.prompt);
      if (int64_t(r.prompt_ids.size()) == n) break;
      ids = r.prompt_ids;  // the fixed-point iteration: continue from what the text encodes to
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace pypto::bench
