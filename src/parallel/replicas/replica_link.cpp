#include "parallel/replicas/replica_link.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "parallel/rank_health.h"
#include "parallel/replicas/batch_codec.h"

namespace pypto {

void build_forward_batch(const SchedulerOutput& so, BlockTables& tables, int32_t block_size, ForwardBatch& batch,
                         int32_t block_offset) {
  tables.apply(so);
  int32_t max_blocks = 0;
  for (const ScheduledRequest& s : so.scheduled)
    max_blocks = std::max(max_blocks, static_cast<int32_t>(tables.table(s.req_id).size()));
  batch.clear();
  batch.max_blocks_per_seq = max_blocks;
  std::vector<int32_t> shifted;
  for (const ScheduledRequest& s : so.scheduled) {
    const std::vector<int32_t>* t = &tables.table(s.req_id);
    if (block_offset != 0) {
      shifted.assign(t->begin(), t->end());
      for (int32_t& b : shifted) b += block_offset;
      t = &shifted;
    }
    const std::vector<int32_t>& table = *t;
    PYPTO_ASSERT(static_cast<int64_t>(s.token_ids.size()) == s.num_scheduled_tokens);
    PYPTO_ASSERT(static_cast<int64_t>(table.size()) * block_size >= s.num_computed_tokens + s.num_scheduled_tokens,
                 "request ", s.req_id, " has too few blocks");
    batch.add_sequence(s.token_ids.data(), static_cast<int32_t>(s.num_scheduled_tokens),
                       static_cast<int32_t>(s.num_computed_tokens), table.data(), static_cast<int32_t>(table.size()),
                       block_size, s.samples ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
  }
}

RemoteReplicaExecutor::RemoteReplicaExecutor(std::shared_ptr<Communicator> link, int64_t vocab_size,
                                             int32_t block_size)
    : link_(std::move(link)), vocab_size_(vocab_size), block_size_(block_size) {
  PYPTO_ASSERT(link_ && link_->size() == 2 && link_->rank() == 0, "a replica link is rank 0 and the replica's leader");
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
