#pragma once
// What the scheduler decided for one step: plain data, no tensors. The model runner turns it into
// a ForwardBatch (token ids, positions, slot mapping, block tables, which rows need logits).
#include <cstdint>
#include <string>
#include <vector>

namespace pypto {

// A snapshot of a hybrid model's recurrent state the step takes (engine/state_snapshots.h): the
// state after the sequence's tokens [0, position), copied into snapshot entry `entry`.
struct StateSave {
  int64_t position = 0;
  int32_t entry = 0;
};

struct ScheduledRequest {
  std::string req_id;
  // Position of the first scheduled token: tokens [num_computed_tokens, num_computed_tokens +
  // num_scheduled_tokens) are computed this step, attending to all earlier positions.
  int64_t num_computed_tokens = 0;
  int64_t num_scheduled_tokens = 0;
  std::vector<int32_t> token_ids;  // the scheduled tokens (size num_scheduled_tokens)
  // New or resumed (after preemption): block_ids is the request's full block table, and the
  // runner forgets any table it had. Otherwise block_ids holds only blocks appended this step.
  bool is_new = false;
  std::vector<int32_t> block_ids;
  // The scheduled range reaches the end of the sequence: the runner returns logits for this
  // row's last token and the engine samples. False for a prompt chunk that is not the last.
  bool samples = false;
  // Models with a recurrent state: a new request resuming from a prefix-cache hit starts from
  // snapshot entry state_restore (the state after its num_computed_tokens cached tokens; -1:
  // none), and the step saves the snapshots in state_saves (positions in (num_computed_tokens,
  // num_computed_tokens + num_scheduled_tokens], increasing).
  int32_t state_restore = -1;
  std::vector<StateSave> state_saves;
  // Speculative decoding: the last num_draft_tokens of token_ids are drafts (engine/draft_proposer.h)
  // after the request's last accepted token, so num_scheduled_tokens == 1 + num_draft_tokens and
  // samples is true. The runner then returns logits for every one of those 1 + num_draft_tokens
  // rows (row j predicts the token after token_ids[j]), and the engine verifies the drafts.
  int64_t num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running requests first, then newly admitted ones
  int64_t total_num_scheduled_tokens = 0;
  // Requests preempted this step (blocks freed; they will come back as is_new).
  std::vector<std::string> preempted_req_ids;
  // Requests that finished since the previous step: the runner drops their state.
  std::vector<std::string> finished_req_ids;

  bool empty() const { return scheduled.empty(); }
  // Logits rows of the step: one per sampling request, 1 + k for a request verifying k drafts.
  int64_t num_sampling_rows() const {
    int64_t n = 0;
    for (const ScheduledRequest& s : scheduled) n += s.samples ? 1 + s.num_draft_tokens : 0;
    return n;
  }
};

}  // namespace pypto
