#pragma once
// The `random` dataset of the benchmarks: prompts of random token ids, decoded to text, whose
// text encodes back to exactly the requested number of tokens.
//
// Exactness: decoding random ids and re-encoding the text can merge or split tokens (byte-level
// BPE), so the length is corrected until it is a fixed point: take the re-encoded ids, cut them
// to N or append fresh random ids, decode, re-encode, and repeat until encode(text) has exactly
// N ids (a few rounds at most in practice; an Error after 32). The server tokenizes the same
// text with the same tokenizer, so it sees N prompt tokens. Ids are drawn from the BPE
// vocabulary only (no added/special tokens).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pypto::bench {

struct DatasetRequest {
  std::string prompt;
  std::vector<int32_t> prompt_ids;  // encode(prompt)
  int64_t output_len = 0;
};

struct RandomDatasetOptions {
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;  // lengths uniform in [len·(1−r), len·(1+r)] (vLLM's --random-range-ratio)
  int64_t num_prompts = 1;
  uint64_t seed = 0;
};

std::vector<DatasetRequest> random_dataset(const Tokenizer& tok, const RandomDatasetOptions& o);

}  // namespace pypto::bench
