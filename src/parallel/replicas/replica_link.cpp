#include "parallel/replicas/replica_link.h"

#include "core/error.h"
#include "core/log.h"
#include "parallel/rank_health.h"
#include "parallel/replicas/batch_codec.h"

namespace pypto {

RemoteReplicaExecutor::RemoteReplicaExecutor(std::shared_ptr<Communicator> link, int64_t vocab_size,
                                             int32_t block_size, int32_t state_slots)
    : link_(std::move(link)), vocab_size_(vocab_size), block_size_(block_size) {
  PYPTO_ASSERT(link_ && link_->size() == 2 && link_->rank() == 0, "a replica link is rank 0 and the replica's leader");
  if (state_slots > 0) tables_.enable_state_slots(state_slots);  // a hybrid's batches carry them
}

RemoteReplicaExecutor::~RemoteReplicaExecutor() {
  if (rank_fault()) return;  // the group is broken: nobody is listening
  mark_ranks_stopping();
  StepHeader h{kStopMessage, 0};
  try {
    link_->send(&h, sizeof h, 1);
  } catch (const std::exception& e) {
    log_warn("stopping a data-parallel replica's ranks: ", e.what());
  }
}

void RemoteReplicaExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  build_forward_batch(so, tables_, block_size_, batch_);
  out.vocab_size = vocab_size_;
  out.logits.resize(static_cast<size_t>(batch_.num_logits() * vocab_size_));
  if (batch_.num_tokens() == 0) return;
  encode_batch(batch_, message_);
  StepHeader h{kStepMessage, static_cast<int64_t>(message_.size())};
  link_->send(&h, sizeof h, 1);
  link_->send(message_.data(), h.bytes, 1);
  LinkReply reply{};
  link_->recv(&reply, sizeof reply, 1);
  if (reply.error_bytes > 0) {
    std::string what(size_t(reply.error_bytes), '\0');
    link_->recv(what.data(), reply.error_bytes, 1);
    fail(what);  // the engine fails this step's requests and goes on
  }
  if (!out.logits.empty()) link_->recv(out.logits.data(), int64_t(sizeof(float) * out.logits.size()), 1);
}

}  // namespace pypto
