#pragma once
// The request loop the speculative-decoding engine tests share: every prompt becomes request
// "<tag><i>" (temperature as given, seed seed0 + i, max_tokens, EOS ignored), then the engine is
// stepped until every request has finished (at most 10,000 steps). Returns each request's tokens
// and its prefix-cache hit (num_cached_tokens of its final output); an output with
// finish_reason error fails the calling test.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace pypto::test {

struct SpecRunResult {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, int64_t> cached;  // per request: prompt tokens served from the prefix cache
  int64_t hits = 0;                       // the sum of `cached`
};

inline SpecRunResult run_spec_requests(Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                       int32_t max_tokens, float temperature, uint64_t seed0,
                                       const std::string& tag) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.request_id = tag + std::to_string(i);
    r.prompt_token_ids = prompts[i];
    r.params.temperature = temperature;
    r.params.seed = seed0 + uint64_t(i);
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    engine.add_request(r);
  }
  SpecRunResult out;
  for (int step = 0; step < 10000 && engine.has_unfinished_requests(); ++step)
    for (const RequestOutput& o : engine.step()) {
      EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
      std::vector<int32_t>& t = out.tokens[o.request_id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finish_reason) {
        out.cached[o.request_id] = o.num_cached_tokens;
        out.hits += o.num_cached_tokens;
      }
    }
  return out;
}

}  // namespace pypto::test
