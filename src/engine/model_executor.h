#pragma once
// The engine's view of the model: one forward pass per step. The real implementation is the
// ModelRunner (SchedulerOutput -> ForwardBatch -> Qwen3 forward -> logits); tests use a fake.
//
// Contract of execute(so, out), called once per step from the engine thread:
//  - forget every request in so.finished_req_ids and so.preempted_req_ids (their KV blocks are
//    no longer theirs);
//  - for each ScheduledRequest s, in order: if s.is_new, its block table is s.block_ids (replacing
//    anything held under that id); otherwise append s.block_ids to the table it has. Token
//    s.token_ids[j] sits at position s.num_computed_tokens + j, and its KV goes to slot
//    table[pos / block_size] * block_size + pos % block_size. It attends to positions
//    0 .. pos of its own request (earlier positions' KV is already in the cache, possibly written
//    by another request through a shared prefix-cache block);
//  - all scheduled tokens of all requests go through one forward pass;
//  - out.logits gets one row of out.vocab_size f32 logits for the last scheduled token of each
//    request with s.samples == true, in SchedulerOutput order (so.num_sampling_rows() rows).
//    Other rows produce no logits.
// A thrown exception fails the step: the engine finishes every request scheduled in it with
// finish reason "error" and the exception's message, and keeps serving the others.
//
// The engine, not the executor, samples (src/sampling): the sampler is per row, seeded per
// request, and identical for every executor.
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/scheduler_output.h"

namespace pypto {

struct ExecutorOutput {
  std::vector<float> logits;  // [rows, vocab_size], row-major
  int64_t vocab_size = 0;
  // The step's cost in seconds as the executor knows it, for the speculation cost model
  // (engine/spec_cost_model.h); < 0 (the default): the engine times the step on its own clock.
  // Set by executors whose time is not the wall clock's (the tests' fakes with synthetic costs).
  double step_seconds = -1;
};

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;
  // `out` is the previous step's output (reused so its buffer is not reallocated every step):
  // set every field and resize logits to [rows, vocab_size].
  virtual void execute(const SchedulerOutput& so, ExecutorOutput& out) = 0;
  // Runs fn(i) for i in [0, n) on the executor's compute threads between steps (the engine's
  // sampler uses it); the default runs them on the calling thread. fn must not throw.
  virtual void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
};

}  // namespace pypto
