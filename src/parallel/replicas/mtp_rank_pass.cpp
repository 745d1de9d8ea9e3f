#include "parallel/replicas/mtp_rank_pass.h"

#include <cstring>

#include "core/error.h"
#include "parallel/replicas/batch_codec.h"
#include "parallel/replicas/rank_worker.h"
#include "parallel/replicas/replica_link.h"

namespace pypto {

MtpRankPart::MtpRankPart(const Qwen3Weights& weights, Backend& backend, Communicator& replica, Communicator* tp_group,
                         StagePosition pos, int64_t mtp_blocks, int32_t block_size, DType kv_dtype)
    : weights_(weights), backend_(backend), replica_(replica), tp_group_(tp_group), pos_(pos) {
  PYPTO_ASSERT(replica_.size() == pos_.pp * pos_.tp && replica_.rank() == pos_.rank(), "MTP rank ", pos_.rank(),
               " of ", pos_.pp, " x ", pos_.tp, " without its replica's communicator");
  PYPTO_ASSERT(pos_.tp == 1 || (tp_group_ && tp_group_->size() == pos_.tp && tp_group_->rank() == pos_.tp_rank),
               "MTP rank ", pos_.rank(), " without its TP group");
  if (!pos_.last()) return;
  // The last stage holds lm_head and the MTP layer; with one stage it holds the embedding too.
  head_ = std::make_unique<MtpHead>(weights_, pos_.first() ? &weights_ : nullptr, backend_, tp_group_);
  cache_ = std::make_unique<KvCache>(head_->kv_cache_spec(mtp_blocks, block_size, kv_dtype));
}

void MtpRankPart::run(const ForwardBatch& batch, const float* hidden, float* logits, float* out) {
  const int64_t T = batch.num_tokens(), H = weights_.config.hidden_size, V = weights_.config.vocab_size;
  const int64_t n = batch.num_logits();
  // Before any message: every rank refuses the same pass (the ids are rank 0's drafts and
  // verified tokens, so this guards the protocol, not user input).
  for (const int32_t id : batch.token_ids)
    if (id < 0 || id >= V) fail("MTP pass: token id ", id, " is outside the vocabulary [0, ", V, ")");
  if (T == 0) return;
  const int last0 = (pos_.pp - 1) * pos_.tp;  // the last stage's TP rank 0
  const int64_t row_bytes = int64_t(sizeof(float)) * T * H;
  if (pos_.pp > 1 && pos_.first()) {  // the embedding rows, to the last stage's rank of this TP index
    e_.resize(size_t(T * H));
    MtpHead::lookup_embedding(weights_, backend_, tp_group_, batch.token_ids.data(), T, e_.data(), local_ids_);
    replica_.send(e_.data(), row_bytes, last0 + pos_.tp_rank);
  }
  if (pos_.last()) {
    const float* e = nullptr;
    if (pos_.pp > 1) {
      e_.resize(size_t(T * H));
      replica_.recv(e_.data(), row_bytes, pos_.tp_rank);
      e = e_.data();
    }
    if (n == 0) {  // rows no pass reads (MtpProposer::run_kv): their KV only, nothing comes back
      head_->store_kv(batch, hidden, *cache_, e);
      return;
    }
    const bool gathers = pos_.tp_rank == Qwen3Model::kLogitsRank;  // the logits and outputs land here
    float* lg = nullptr;
    float* o = nullptr;
    if (gathers && pos_.rank() == 0) {
      lg = logits;
      o = out;
    } else if (gathers) {
      logits_.resize(size_t(n * V));
      out_.resize(size_t(T * H));
      lg = logits_.data();
      o = out_.data();
    }
    head_->forward(batch, hidden, *cache_, lg, o, e);
    if (gathers && pos_.rank() != 0) {
      if (n > 0) replica_.send(logits_.data(), int64_t(sizeof(float)) * n * V, 0);
      replica_.send(out_.data(), row_bytes, 0);
    }
  }
  if (pos_.rank() == 0 && !pos_.last() && n > 0) {
    replica_.recv(logits, int64_t(sizeof(float)) * n * V, last0);
    replica_.recv(out, row_bytes, last0);
  }
}

void encode_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<uint8_t>& message) {
  std::vector<uint8_t> encoded;
  encode_batch(batch, encoded);
  const int64_t batch_bytes = int64_t(encoded.size());
  message.resize(sizeof batch_bytes + encoded.size() + hidden.size() * sizeof(float));
  uint8_t* p = message.data();
  std::memcpy(p, &batch_bytes, sizeof batch_bytes);
  std::memcpy(p + sizeof batch_bytes, encoded.data(), encoded.size());
  std::memcpy(p + sizeof batch_bytes + encoded.size(), hidden.data(), hidden.size() * sizeof(float));
}

void decode_mtp_pass(const std::vector<uint8_t>& message, int64_t H, ForwardBatch& batch, std::vector<float>& hidden) {
  int64_t batch_bytes = 0;
  if (message.size() < sizeof batch_bytes) fail("MTP pass message of ", message.size(), " bytes is truncated");
  std::memcpy(&batch_bytes, message.data(), sizeof batch_bytes);
  if (batch_bytes < 0 || size_t(batch_bytes) > message.size() - sizeof batch_bytes)
    fail("MTP pass message: its batch of ", batch_bytes, " bytes overruns the ", message.size(), "-byte message");
  decode_batch(message.data() + sizeof batch_bytes, size_t(batch_bytes), batch);
  const size_t hidden_bytes = message.size() - sizeof batch_bytes - size_t(batch_bytes);
  if (hidden_bytes != sizeof(float) * size_t(batch.num_tokens() * H))
    fail("MTP pass message: ", hidden_bytes, " bytes of hidden rows for ", batch.num_tokens(), " rows of ", H);
  hidden.resize(size_t(batch.num_tokens() * H));
  if (hidden_bytes > 0)
    std::memcpy(hidden.data(), message.data() + sizeof batch_bytes + size_t(batch_bytes), hidden_bytes);
}

void MtpRankPart::drive(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
                        std::vector<float>& out) {
  PYPTO_ASSERT(pos_.rank() == 0, "rank 0 drives the MTP passes");
  const int64_t T = batch.num_tokens(), H = weights_.config.hidden_size;
  PYPTO_ASSERT(int64_t(hidden.size()) == T * H && int64_t(out.size()) == T * H &&
                   int64_t(logits.size()) == batch.num_logits() * weights_.config.vocab_size,
               "MTP pass buffers");
  encode_mtp_pass(batch, hidden, message_);
  StepHeader h{kMtpPassMessage, int64_t(message_.size())};
  replica_.broadcast(&h, sizeof h, 0);
  replica_.broadcast(message_.data(), h.bytes, 0);
  run(batch, hidden.data(), logits.data(), out.data());
}

void MtpRankPart::serve(const std::vector<uint8_t>& message) {
  const int64_t H = weights_.config.hidden_size;
  decode_mtp_pass(message, H, batch_, hidden_);
  if (pos_.rank() != 0) return run(batch_, hidden_.data(), nullptr, nullptr);
  // A --dp replica's leader: head rank 0's results land here (as in rank 0's drive()).
  link_logits_.assign(size_t(batch_.num_logits() * weights_.config.vocab_size), 0.0f);
  link_out_.assign(batch_.num_logits() > 0 ? size_t(batch_.num_tokens() * H) : 0, 0.0f);  // KV-only: no rows back
  run(batch_, hidden_.data(), link_logits_.data(), link_out_.data());
}

void MtpRankPart::reply_over_link(Communicator& link, const std::string& refused) {
  PYPTO_ASSERT(pos_.rank() == 0, "a replica's leader answers rank 0's MTP passes");
  LinkReply reply{int64_t(refused.size())};
  link.send(&reply, sizeof reply, 0);
  if (!refused.empty()) return link.send(refused.data(), reply.error_bytes, 0);
  if (!link_logits_.empty()) link.send(link_logits_.data(), int64_t(sizeof(float) * link_logits_.size()), 0);
  if (!link_out_.empty()) link.send(link_out_.data(), int64_t(sizeof(float) * link_out_.size()), 0);
}

void MtpRankPart::drive_over_link(Communicator& link, const ForwardBatch& batch, const std::vector<float>& hidden,
                                  std::vector<float>& logits, std::vector<float>& out, std::vector<uint8_t>& message) {
  encode_mtp_pass(batch, hidden, message);
  StepHeader h{kMtpPassMessage, int64_t(message.size())};
  link.send(&h, sizeof h, 1);
  link.send(message.data(), h.bytes, 1);
  LinkReply reply{};
  link.recv(&reply, sizeof reply, 1);
  if (reply.error_bytes > 0) {
    std::string what(size_t(reply.error_bytes), '\0');
    link.recv(what.data(), reply.error_bytes, 1);
    fail(what);
  }
  if (!logits.empty()) link.recv(logits.data(), int64_t(sizeof(float) * logits.size()), 1);
  if (batch.num_logits() > 0) link.recv(out.data(), int64_t(sizeof(float) * out.size()), 1);  // none: KV only
}

void MtpRankPart::exchange_step_hidden(int64_t rows, std::vector<float>& hidden) {
  if (pos_.pp == 1 || rows == 0) return;
  const int64_t H = weights_.config.hidden_size, bytes = int64_t(sizeof(float)) * rows * H;
  if (captures_step_hidden()) {
    PYPTO_ASSERT(int64_t(hidden.size()) >= rows * H, "captured ", hidden.size(), " floats for ", rows, " rows");
    replica_.send(hidden.data(), bytes, 0);
  } else if (pos_.rank() == 0) {
    hidden.resize(size_t(rows * H));
    replica_.recv(hidden.data(), bytes, (pos_.pp - 1) * pos_.tp);
  }
}

namespace {

class MtpProcessExecutor : public ModelExecutor {
 public:
  MtpProcessExecutor(std::shared_ptr<ProcessTpExecutor> inner, std::shared_ptr<MtpRankPart> part,
                     std::shared_ptr<MtpProposer> mtp, int pp, int64_t hidden_size)
      : inner_(std::move(inner)), part_(std::move(part)), mtp_(std::move(mtp)), pp_(pp), H_(hidden_size) {}

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    if (pp_ == 1) inner_->capture_normed_hidden(&hidden_);  // rank 0 is the last stage
    try {
      inner_->execute(so, out);
    } catch (...) {
      inner_->capture_normed_hidden(nullptr);
      throw;
    }
    inner_->capture_normed_hidden(nullptr);
    const ForwardBatch& batch = inner_->last_batch();
    if (batch.num_tokens() == 0) return;
    part_->exchange_step_hidden(batch.num_tokens(), hidden_);  // --pp: from the last stage
    PYPTO_ASSERT(int64_t(hidden_.size()) >= batch.num_tokens() * H_, "captured hidden rows");
    mtp_->observe(so, batch, hidden_.data());
  }
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { inner_->parallel_rows(n, fn); }

 private:
  std::shared_ptr<ProcessTpExecutor> inner_;
  std::shared_ptr<MtpRankPart> part_;
  std::shared_ptr<MtpProposer> mtp_;
  int pp_;
  int64_t H_;
  std::vector<float> hidden_;  // [T, hidden] of the step
};

// Replica i > 0 (--dp): the step over the link, then the leader's hidden rows over it too.
class MtpLinkExecutor : public ModelExecutor {
 public:
  MtpLinkExecutor(std::unique_ptr<RemoteReplicaExecutor> inner, std::shared_ptr<Communicator> link,
                  std::shared_ptr<MtpProposer> mtp, int64_t hidden_size)
      : inner_(std::move(inner)), link_(std::move(link)), mtp_(std::move(mtp)), H_(hidden_size) {}

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    inner_->execute(so, out);  // throws when the replica refused the step: then no hidden rows follow
    const ForwardBatch& batch = inner_->last_batch();
    if (batch.num_tokens() == 0) return;
    hidden_.resize(size_t(batch.num_tokens() * H_));
    link_->recv(hidden_.data(), int64_t(sizeof(float) * hidden_.size()), 1);
    mtp_->observe(so, batch, hidden_.data());
  }

 private:
  std::unique_ptr<RemoteReplicaExecutor> inner_;
  std::shared_ptr<Communicator> link_;
  std::shared_ptr<MtpProposer> mtp_;
  int64_t H_;
  std::vector<float> hidden_;  // [T, hidden] of the step
};

}  // namespace

std::unique_ptr<ModelExecutor> make_mtp_link_executor(std::unique_ptr<RemoteReplicaExecutor> inner,
                                                      std::shared_ptr<Communicator> link, const ModelConfig& config,
                                                      int64_t mtp_blocks, int32_t block_size,
                                                      std::shared_ptr<DraftProposer>* drafter) {
  // The pass runs on the replica's engine thread, as its steps do: the link is never used by two
  // threads at once.
  auto message = std::make_shared<std::vector<uint8_t>>();
  Communicator* l = link.get();
  auto mtp = std::make_shared<MtpProposer>(
      config,
      [l, message](const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
                   std::vector<float>& out) { MtpRankPart::drive_over_link(*l, batch, hidden, logits, out, *message); },
      mtp_blocks, block_size);
  mtp->keep_alive({std::shared_ptr<const void>(link)});
  *drafter = mtp;
  return std::make_unique<MtpLinkExecutor>(std::move(inner), std::move(link), std::move(mtp), config.hidden_size);
}

std::unique_ptr<ModelExecutor> make_mtp_process_executor(std::unique_ptr<ProcessTpExecutor> inner,
                                                         std::shared_ptr<MtpRankPart> part, const ModelConfig& config,
                                                         int pp, int64_t mtp_blocks, int32_t block_size,
                                                         std::shared_ptr<DraftProposer>* drafter) {
  std::shared_ptr<ProcessTpExecutor> exec(std::move(inner));
  MtpRankPart* p = part.get();
  auto mtp = std::make_shared<MtpProposer>(
      config,
      [p](const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
          std::vector<float>& out) { p->drive(batch, hidden, logits, out); },
      mtp_blocks, block_size);
  // The scheduler holds the drafter too: its passes use rank 0's backend and communicators, which
  // the executor owns, so the proposer keeps both alive.
  mtp->keep_alive({std::shared_ptr<const void>(part), std::shared_ptr<const void>(exec)});  // part first out
  *drafter = mtp;
  return std::make_unique<MtpProcessExecutor>(std::move(exec), std::move(part), std::move(mtp), pp, config.hidden_size);
}

}  // namespace pypto
