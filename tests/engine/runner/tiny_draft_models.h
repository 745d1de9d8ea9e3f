#pragma once
// The draft-model tests' two checkpoints (draft_model_runner_test, draft_prefix_cache_test),
// loaded once per test binary: the tiny target, and the same tiny shape with other random weights
// (seed 7: same vocabulary and tokenizer, mostly rejected drafts).
#include <memory>

#include "model_harness.h"

namespace pypto::test {

inline LoadedModel& target_model() {
  static std::unique_ptr<LoadedModel> m = load_model(ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/false);
  return *m;
}

inline LoadedModel& other_model() {
  static std::unique_ptr<LoadedModel> m = [] {
    TestModelOptions o;
    o.seed = 7;
    return load_model(ensure_test_model("tiny", o), /*scalar=*/false);
  }();
  return *m;
}

}  // namespace pypto::test
