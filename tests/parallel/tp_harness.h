#pragma once
// Helpers of the tensor-parallel tests: stage a checkpoint as tp slices, run one forward over
// all ranks (each on its own thread, as the TpModelRunner does), and drive a TpModelRunner with
// hand-made SchedulerOutputs for a greedy continuation.
#include <memory>
#include <string>
#include <vector>

#include "model/qwen3_weights.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto::test {

// The tp slices of `dir`, staged on the CPU backend (mtp: with a hybrid's MTP head).
std::vector<std::shared_ptr<const Qwen3Weights>> stage_slices(const std::string& dir, int tp, bool mtp = false);

// Logits of every row of `prompt` ([T, vocab] row-major), computed by tp ranks in lockstep (each
// rank its vocabulary columns, gathered onto rank 0, which returns them).
std::vector<float> tp_prompt_logits(const std::vector<std::shared_ptr<const Qwen3Weights>>& slices,
                                    const std::vector<int32_t>& prompt);

// A TpModelRunner over `slices` (one thread per rank, rank r pinned to available core r mod n).
std::unique_ptr<TpModelRunner> make_tp_runner(const std::vector<std::shared_ptr<const Qwen3Weights>>& slices,
                                              int64_t num_blocks);

// n greedy tokens after `prompt` through runner.execute(): a prefill step, then one step per token.
std::vector<int32_t> tp_greedy(TpModelRunner& runner, const std::vector<int32_t>& prompt, int n);

}  // namespace pypto::test
