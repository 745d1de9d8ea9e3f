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
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running requests first, then newly admitted ones
  int64_t total_num_scheduled_tokens = 0;
  // Requests preempted this step (blocks freed; they will come back as is_new).
  std::vector<std::string> preempted_req_ids;
  // Requests that finished since the previous step: the runner drops their state.
  std::vector<std::string> finished_req_ids;

  bool empty() const { return scheduled.empty(); }
  int64_t num_sampling_rows() const {
    int64_t n = 0;
    for (const ScheduledRequest& s : scheduled) n += s.samples;
    return n;
  }
};

}  // namespace pypto
