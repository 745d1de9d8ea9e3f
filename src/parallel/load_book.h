#pragma once
// One replica's load in the seed's terms (least_pending_tokens): Σ over its unfinished requests
// of (prompt tokens not yet computed + tokens still to generate). Requests routed to the replica
// but not yet taken by its engine count in full (prompt length + max new tokens), which is the
// seed's "route extra load".
//
// Written from two sides: the router adds a request when it routes it and removes it once its
// stream has finished; the replica's executor (engine thread) reports, each step, how many tokens
// of each scheduled sequence are computed and which sequences finished. Thread-safe.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace pypto {

class LoadBook {
 public:
  // Sequence ids as the Engine forms them: the request id alone when n == 1, else request id,
  // this separator, and the sequence index.
  static constexpr char kSequenceSeparator = '\x1f';

  // A request with `n` sequences of a `prompt_tokens`-token prompt generating at most `max_new`
  // tokens each.
  void add(const std::string& request_id, int32_t n, int64_t prompt_tokens, int64_t max_new);
  void remove(const std::string& request_id);

  // Engine thread: after a step, `computed` tokens of sequence `seq_id` are computed (its
  // num_computed_tokens + num_scheduled_tokens). Unknown ids are ignored.
  void on_computed(const std::string& seq_id, int64_t computed);
  // Engine thread: the sequence finished (or was aborted): it no longer counts.
  void on_finished(const std::string& seq_id);

  int64_t pending_tokens() const;
  // Requests routed here and not yet removed.
  size_t num_requests() const;

  // Remaining tokens of one sequence with `computed` tokens computed: the prompt still to
  // prefill plus the tokens still to generate (a sequence that has computed c >= prompt tokens
  // has generated c - prompt + 1, the last one not yet fed back).
  static int64_t remaining(int64_t prompt_tokens, int64_t max_new, int64_t computed);

 private:
  struct Entry {
    int64_t prompt_tokens = 0, max_new = 0;
    std::vector<int64_t> computed;  // per sequence
    std::vector<bool> finished;     // per sequence
  };
  // The entry and sequence index of a sequence id, or nullptr.
  Entry* find(const std::string& seq_id, size_t* index);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace pypto
