#pragma once
// The tiny-hybrid checkpoints with an MTP head (make-test-model --preset tiny-hybrid --mtp KIND,
// model/test_model.h) staged with their head, as the MTP engine tests load them: KIND is
// "random" (random MTP weights), "oracle" (the head predicts the target's next token exactly) or
// "oracle-perturbed" (another mtp.norm: partial acceptance). The target is built for `max_seqs`
// GDN state slots and `rollback` GDN rollback entries per slot (the largest k the test drafts).
// Loaded once per (kind, max_seqs, rollback) and kept for the test binary's life.
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "model_harness.h"

namespace pypto::test {

inline LoadedModel& mtp_test_model(const std::string& kind, int32_t max_seqs, int32_t rollback) {
  static std::map<std::tuple<std::string, int32_t, int32_t>, std::unique_ptr<LoadedModel>> models;
  std::unique_ptr<LoadedModel>& m = models[{kind, max_seqs, rollback}];
  if (!m) {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    o.mtp = kind;
    StagingOptions so;
    so.mtp = true;
    m = load_model(ensure_test_model("tiny-hybrid-mtp-" + kind, o), /*scalar=*/false, 2, so);
    m->weights.state_slots = max_seqs;
    m->weights.state_snapshots = 32;
    m->weights.state_rollback = rollback;
    m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  }
  return *m;
}

}  // namespace pypto::test
