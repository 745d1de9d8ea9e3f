#pragma once
// A stand-in model with a real paged KV cache for engine tests. Each KV slot stores the token and
// position written to it; a sampling row reads its whole context back through its block table
// (so a wrong block id, a stale block or a bad prefix hit changes the answer or is reported) and
// "predicts" next_token(context), a deterministic hash. Its output for a request therefore
// equals the reference computed from the tokens alone, whatever the batching, chunking,
// preemption or prefix caching. A request verifying k drafts gets k + 1 predictions, row j from
// its context up to the j-th scheduled token (so a draft whose KV was not rolled back, read as
// context, changes the answer). A test may swap next_token for another predictor (`predict`),
// e.g. one whose output repeats so that n-gram drafts are accepted.
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_tables.h"
#include "engine/scheduler_output.h"
#include "sampling/sampler.h"

namespace pypto::testing {

class FakeModel {
 public:
  using Predictor = int32_t (*)(std::span<const int32_t> context, int32_t vocab);

  FakeModel(int32_t num_blocks, int32_t block_size, int32_t vocab, Predictor predict = next_token)
      : block_size_(block_size), vocab_(vocab), predict_(predict), kv_(size_t(num_blocks) * size_t(block_size)) {}

  static int32_t next_token(std::span<const int32_t> context, int32_t vocab) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the context
    for (int32_t t : context) {
      h ^= uint64_t(uint32_t(t));
      h *= 1099511628211ull;
    }
    return int32_t(h % uint64_t(vocab));
  }

  // A predictor whose output repeats the token 3 back (the prompt's last 3 tokens, forever), so
  // n-gram drafts are always right once the cycle is in the context.
  static int32_t copy_back(std::span<const int32_t> context, int32_t vocab) {
    return context.size() >= 3 ? context[context.size() - 3] : next_token(context, vocab);
  }
  // copy_back, except where a hash of the context breaks the cycle (about one step in four):
  // drafts partly accepted, partly rejected.
  static int32_t mostly_copy(std::span<const int32_t> context, int32_t vocab) {
    return next_token(context, 1000) % 4 == 0 ? next_token(context, vocab) : copy_back(context, vocab);
  }

  // Greedy tokens that `prompt` produces alone.
  static std::vector<int32_t> reference(std::vector<int32_t> tokens, int32_t n, int32_t vocab,
                                        Predictor predict = next_token) {
    std::vector<int32_t> out;
    for (int32_t i = 0; i < n; ++i) {
      out.push_back(predict(tokens, vocab));
      tokens.push_back(out.back());
    }
    return out;
  }

  // Logits with all the mass on next_token(context) for every sampling row (in scheduled order).
  std::vector<float> execute_logits(const SchedulerOutput& so) {
    std::vector<float> logits;
    for (int32_t t : execute(so)) {
      std::vector<float> row(size_t(vocab_), -10.0f);
      row[size_t(t)] = 10.0f;
      logits.insert(logits.end(), row.begin(), row.end());
    }
    return logits;
  }

  // The predicted token of each sampling row, in scheduled order.
  std::vector<int32_t> execute(const SchedulerOutput& so) {
    tables_.apply(so);
    std::vector<int32_t> out;
    for (const ScheduledRequest& s : so.scheduled) {
      const std::vector<int32_t>& table = tables_.table(s.req_id);
      EXPECT_EQ(int64_t(s.token_ids.size()), s.num_scheduled_tokens);
      for (int64_t j = 0; j < s.num_scheduled_tokens; ++j) {
        const int64_t pos = s.num_computed_tokens + j;
        Slot* slot = slot_of(table, pos, s.req_id);
        if (!slot) return out;
        *slot = {s.token_ids[size_t(j)], pos};
        ++computed_tokens;
      }
      if (!s.samples) continue;
      const int64_t end = s.num_computed_tokens + s.num_scheduled_tokens;
      for (int64_t len = end - s.num_draft_tokens; len <= end; ++len) {
        std::vector<int32_t> context;
        for (int64_t pos = 0; pos < len; ++pos) {
          Slot* slot = slot_of(table, pos, s.req_id);
          if (!slot) return out;
          EXPECT_EQ(slot->position, pos) << s.req_id << ": stale KV at position " << pos;
          context.push_back(slot->token);
        }
        out.push_back(predict_(context, vocab_));
      }
    }
    return out;
  }

  int64_t computed_tokens = 0;

 private:
  struct Slot {
    int32_t token = -1;
    int64_t position = -1;
  };
  Slot* slot_of(const std::vector<int32_t>& table, int64_t pos, const std::string& id) {
    const size_t b = size_t(pos / block_size_);
    if (b >= table.size()) {
      ADD_FAILURE() << id << ": position " << pos << " beyond its " << table.size() << " blocks";
      return nullptr;
    }
    return &kv_[size_t(table[b]) * size_t(block_size_) + size_t(pos % block_size_)];
  }

  int32_t block_size_;
  int32_t vocab_;
  Predictor predict_;
  std::vector<Slot> kv_;
  BlockTables tables_;
};

}  // namespace pypto::testing
