#pragma once
// A test drafter that forwards to an MtpProposer (MTP or EAGLE-3 head) and can play the cost
// model's stretch with speculation off: engine steps [off_from, off_to), counted by the
// scheduler's one set_context_needed() per step, tell the proposer its context is not needed and
// draft nothing. Subclasses record what they need through the two hooks.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/draft_proposer.h"
#include "engine/mtp_proposer.h"

namespace pypto::test {

class StretchDrafterBase : public DraftProposer {
 public:
  explicit StretchDrafterBase(std::shared_ptr<MtpProposer> mtp) : mtp_(std::move(mtp)) {}
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override {
    mtp_->propose(tokens, k, out);
  }
  void prepare(std::span<const Query> queries) override { mtp_->prepare(off() ? std::span<const Query>() : queries); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    out.clear();
    if (off()) return;
    mtp_->propose_for(req, k, out);
    if (!out.empty()) drafted(req, out);
  }
  void forget(const std::string& id) override { mtp_->forget(id); }
  void finish(const Request& req) override { mtp_->finish(req); }
  void set_context_needed(bool needed) override {
    ++step_;
    step_began();
    mtp_->set_context_needed(needed && !off());
  }
  void set_target_kv_blocks(int64_t n) override { mtp_->set_target_kv_blocks(n); }
  const DraftDistribution* distribution(const std::string& id) const override { return mtp_->distribution(id); }

  int64_t off_from = -1, off_to = -1;
  const MtpProposer& mtp() const { return *mtp_; }
  MtpProposer& mtp() { return *mtp_; }

 protected:
  // After the proposer drafted `out` (not empty) for `req` at its current position.
  virtual void drafted(const Request& req, const std::vector<int32_t>& out) = 0;
  // At the start of each engine step (step() is its index), before the proposer hears of it.
  virtual void step_began() {}
  int64_t step() const { return step_; }

 private:
  bool off() const { return step_ >= off_from && step_ < off_to; }
  std::shared_ptr<MtpProposer> mtp_;
  int64_t step_ = -1;
};

}  // namespace pypto::test
