#pragma once
// Shared helpers of the model tests: test checkpoints made by the project's make_test_model
// (cached under the build directory), the independent PyTorch reference
// (tests/reference/qwen3_reference.py, run as a subprocess, outputs cached next to the model),
// loading a model onto a backend, and an engine-side greedy decode.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"
#include "model/test_model.h"
#include "npy.h"

namespace pypto::test {

// Directory of the checkpoint make_test_model writes for `opt` (its out_dir is ignored), kept in
// <build>/test_models/<name>-<hash of the options> (model/test_model_cache.h): made once, safe
// when several test processes ask at once, and never replaced under another test's feet.
std::string ensure_test_model(const std::string& name, TestModelOptions opt);

// n token ids drawn from [0, 151643) (ordinary, non-special Qwen3 tokens) by a seeded RNG.
std::vector<int32_t> random_prompt(int n, uint64_t seed);

// The Python interpreter with torch and numpy ($PYPTO_PYTHON, else the one CMake found); empty
// when there is none (the reference tests then skip, saying why).
std::string torch_python();

struct ReferenceRun {
  std::vector<NpyF32> logits;                // per prompt [T, vocab]
  std::vector<std::vector<int32_t>> greedy;  // per prompt, greedy_n tokens (empty if 0)
};
// Runs the PyTorch reference on `prompts` (cached in <model_dir>.ref/<hash of inputs>).
ReferenceRun run_reference(const std::string& model_dir, const std::vector<std::vector<int32_t>>& prompts,
                           int greedy_n);

struct LoadedModel {
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Backend> backend;
  Qwen3Weights weights;
  std::unique_ptr<Qwen3Model> model;
};
// Stages `dir` onto the scalar reference backend (scalar = true) or the CPU backend.
std::unique_ptr<LoadedModel> load_model(const std::string& dir, bool scalar, int threads = 2);
// The same with staging options (--quantization and its group; show_progress is forced off).
std::unique_ptr<LoadedModel> load_model(const std::string& dir, bool scalar, int threads, StagingOptions opt);

// n greedy tokens after `prompt`: one prefill call, then one decode call per token over the
// paged cache (argmax, ties to the lowest id, as torch.argmax).
std::vector<int32_t> engine_greedy(Qwen3Model& model, const std::vector<int32_t>& prompt, int n, DType kv_dtype);

// max |a[i] - b[i]| and max |b[i]| over n values.
struct Diff {
  double max_abs_diff = 0, max_abs_ref = 0;
};
Diff compare(const float* a, const float* ref, size_t n);

std::string join_ids(const std::vector<int32_t>& ids);

}  // namespace pypto::test
