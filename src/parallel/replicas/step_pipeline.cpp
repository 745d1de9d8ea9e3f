#include "parallel/replicas/step_pipeline.h"

#include "core/error.h"
#include "core/log.h"
#include "core/profiler.h"
#include "parallel/rank_health.h"
#include "model/mtp_head.h"
#include "parallel/replicas/batch_codec.h"
#include "parallel/replicas/mtp_rank_pass.h"
#include "parallel/replicas/replica_link.h"
#include "parallel/shm_communicator.h"

namespace pypto {

StepPipeline::StepPipeline(std::unique_ptr<Backend> backend, std::shared_ptr<const Qwen3Weights> weights,
                           std::shared_ptr<Communicator> world, std::shared_ptr<Communicator> stage_comm,
                           std::shared_ptr<Communicator> back, int pp, int64_t num_blocks, int32_t block_size,
                           DType kv_dtype)
    : backend_(std::move(backend)),
      weights_(std::move(weights)),
      world_(std::move(world)),
      stage_comm_(std::move(stage_comm)),
      back_(std::move(back)) {
  PYPTO_ASSERT(pp > 1 && world_ && world_->rank() == 0 && world_->size() % pp == 0, "a step pipeline needs pp > 1");
  pos_ = StagePosition::of_rank(0, pp, world_->size() / pp);
  PYPTO_ASSERT(back_ && back_->size() == 2 && back_->rank() == 0, "the return link is rank 0 and the last stage");
  PYPTO_ASSERT(pos_.tp == 1 || (stage_comm_ && stage_comm_->size() == pos_.tp), "stage 0's TP group");
  model_ = std::make_unique<Qwen3Model>(*weights_, *backend_, pos_.tp > 1 ? stage_comm_.get() : nullptr);
  cache_ = std::make_unique<KvCache>(model_->kv_cache_spec(num_blocks, block_size, kv_dtype));
  thread_ = std::thread([this] { thread_main(); });
}

StepPipeline::~StepPipeline() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StepPipeline::send_step(const ForwardBatch& batch) {
  encode_batch(batch, message_);
  StepHeader h{kStepMessage, static_cast<int64_t>(message_.size())};
  if (stage_comm_) {  // stage 0's other TP ranks run the same batch
    stage_comm_->broadcast(&h, sizeof h, 0);
    stage_comm_->broadcast(message_.data(), h.bytes, 0);
  }
  const int64_t T = batch.num_tokens(), H = model_->hidden_size();
  hidden_.resize(size_t(T * H));
  const bool aux = !aux_layers_.empty();
  if (aux) {
    aux_.assign(size_t(T * int64_t(aux_layers_.size()) * H), 0.0f);  // the later stages' columns stay 0 here
    model_->set_aux_hidden_out(aux_layers_, aux_.data());
  }
  try {
    PYPTO_PROF_OP("pipeline.stage0");
    model_->forward_stage(batch, *cache_, nullptr, hidden_.data(), nullptr);
  } catch (...) {
    model_->set_aux_hidden_out({}, nullptr);
    throw;
  }
  model_->set_aux_hidden_out({}, nullptr);
  const int next = pos_.tp;  // stage 1's TP rank 0
  PYPTO_PROF_OP("pipeline.send");
  world_->send(&h, sizeof h, next);
  world_->send(message_.data(), h.bytes, next);
  world_->send(hidden_.data(), int64_t(sizeof(float) * hidden_.size()), next);
  if (aux) world_->send(aux_.data(), int64_t(sizeof(float) * aux_.size()), next);
}

void StepPipeline::send_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden) {
  encode_mtp_pass(batch, hidden, message_);
  StepHeader h{kMtpPassMessage, static_cast<int64_t>(message_.size())};
  if (stage_comm_) {
    stage_comm_->broadcast(&h, sizeof h, 0);
    stage_comm_->broadcast(message_.data(), h.bytes, 0);
  }
  const int64_t T = batch.num_tokens(), H = model_->hidden_size();
  mtp_e_.resize(size_t(T * H));
  {
    PYPTO_PROF_OP("pipeline.mtp_embedding");
    MtpHead::lookup_embedding(*weights_, *backend_, stage_comm_.get(), batch.token_ids.data(), T, mtp_e_.data(),
                              mtp_local_ids_);
  }
  const int next = pos_.tp;
  world_->send(&h, sizeof h, next);
  world_->send(message_.data(), h.bytes, next);
  world_->send(mtp_e_.data(), int64_t(sizeof(float) * mtp_e_.size()), next);
}

void StepPipeline::send_stop() {
  StepHeader h{kStopMessage, 0};
  if (stage_comm_) stage_comm_->broadcast(&h, sizeof h, 0);
  world_->send(&h, sizeof h, pos_.tp);
}

void StepPipeline::thread_main() {
  prof::name_this_thread("pp stage 0 tp rank 0 (pipeline)");
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stop_, nothing left to send
      job = queue_.front();
      queue_.pop_front();
    }
    try {
      if (job->local) {
        PYPTO_PROF_OP("pipeline.draft");
        (*job->local)();
      } else if (job->mtp_hidden)
        send_mtp_pass(*job->batch, *job->mtp_hidden);
      else
        send_step(*job->batch);
    } catch (...) {
      job->error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      job->sent = true;
    }
    cv_.notify_all();
  }
  if (rank_fault()) return;  // the group is broken: nobody is listening
  mark_ranks_stopping();
  try {
    send_stop();
  } catch (const std::exception& e) {
    log_warn("stopping the pipeline stages: ", e.what());
  }
}

void StepPipeline::submit_and_collect(Job& job, const std::function<void()>& collect) {
  {
    std::lock_guard lock(mu_);
    job.ticket = next_ticket_++;
    queue_.push_back(&job);
  }
  cv_.notify_all();
  // Wait until the job is on its way and it is this job's turn to take its results.
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return job.sent && next_collect_ == job.ticket; });
  lock.unlock();
  std::exception_ptr error = job.error;
  if (!error) {
    try {
      collect();
    } catch (...) {
      error = std::current_exception();
    }
  }
  lock.lock();
  ++next_collect_;
  lock.unlock();
  cv_.notify_all();
  if (error) std::rethrow_exception(error);
}

void StepPipeline::run_on_stage0(const std::function<void()>& fn) {
  Job job;  // no ticket: nothing comes back over the return link
  job.local = &fn;
  {
    std::lock_guard lock(mu_);
    queue_.push_back(&job);
  }
  cv_.notify_all();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return job.sent; });
  lock.unlock();
  if (job.error) std::rethrow_exception(job.error);
}

void StepPipeline::run(const ForwardBatch& batch, float* logits_out, float* hidden_out) {
  if (batch.num_tokens() == 0) return;
  model_->check_batch(batch, *cache_);  // a bad batch fails this engine's step, nothing is sent
  PYPTO_ASSERT((!mtp_ && aux_layers_.empty()) || hidden_out, "a step with the MTP / EAGLE-3 drafter needs its rows' buffer");
  Job job;
  job.batch = &batch;
  submit_and_collect(job, [&] {
    PYPTO_PROF_OP("pipeline.recv_logits");
    const int64_t n = batch.num_logits();
    if (n > 0) back_->recv(logits_out, int64_t(sizeof(float) * size_t(n * model_->vocab_size())), 1);
    if (mtp_) back_->recv(hidden_out, int64_t(sizeof(float)) * batch.num_tokens() * model_->hidden_size(), 1);
    if (!aux_layers_.empty())
      back_->recv(hidden_out, int64_t(sizeof(float)) * batch.num_tokens() * int64_t(aux_layers_.size()) * model_->hidden_size(), 1);
  });
}

void StepPipeline::run_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
                                std::vector<float>& out) {
  PYPTO_ASSERT(mtp_, "an MTP pass on a pipeline without the MTP drafter");
  const int64_t T = batch.num_tokens(), H = model_->hidden_size(), V = model_->vocab_size();
  PYPTO_ASSERT(int64_t(hidden.size()) == T * H && int64_t(out.size()) == T * H &&
                   int64_t(logits.size()) == batch.num_logits() * V,
               "MTP pass buffers");
  for (const int32_t id : batch.token_ids)  // before anything is sent: no stage is left waiting
    if (id < 0 || id >= V) fail("MTP pass: token id ", id, " is outside the vocabulary [0, ", V, ")");
  if (T == 0) return;
  Job job;
  job.batch = &batch;
  job.mtp_hidden = &hidden;
  submit_and_collect(job, [&] {
    if (batch.num_logits() == 0) return;  // a KV-only pass (pipelined_mtp_pass): nothing comes back
    PYPTO_PROF_OP("pipeline.recv_mtp");
    back_->recv(logits.data(), int64_t(sizeof(float) * logits.size()), 1);
    back_->recv(out.data(), int64_t(sizeof(float) * out.size()), 1);
  });
}

VirtualEngineExecutor::VirtualEngineExecutor(std::shared_ptr<StepPipeline> pipeline, const VirtualEngineShare& share,
                                             int32_t block_size)
    : pipeline_(std::move(pipeline)), share_(share), block_size_(block_size) {
  PYPTO_ASSERT(share_.block_offset >= 0 && share_.state_slots >= 0 && share_.state_slot_offset >= 0 &&
                   share_.snapshot_offset >= 0,
               "virtual engine share");
  if (share_.state_slots > 0) tables_.enable_state_slots(share_.state_slots);  // this engine's own slots 0 .. n-1
}

void VirtualEngineExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  build_forward_batch(so, tables_, block_size_, batch_, share_.block_offset);
  // The engine numbers its state slots and snapshot entries from 0 (its BlockTables and its
  // KvCacheManager); the stages' pools hold every engine's, this one's from its offsets.
  for (int32_t& slot : batch_.state_slots) slot += share_.state_slot_offset;
  for (int32_t& e : batch_.state_restore)
    if (e >= 0) e += share_.snapshot_offset;
  for (ForwardBatch::StateSave& v : batch_.state_saves) v.entry += share_.snapshot_offset;
  out.vocab_size = pipeline_->vocab_size();
  out.logits.resize(static_cast<size_t>(batch_.num_logits() * out.vocab_size));
  if (!observe_) return pipeline_->run(batch_, out.logits.data());
  if (batch_.num_tokens() == 0) return;
  hidden_.resize(size_t(batch_.num_tokens() * hidden_size_));
  pipeline_->run(batch_, out.logits.data(), hidden_.data());
  observe_(so, batch_, hidden_.data());  // the drafter reads positions and tokens, not the shifted ids
}

namespace {

// The threads backend's stage ranks 1 .. n-1 and rank 0's pipeline. The pipeline goes first (its
// Stop travels down the stages), then the threads are joined; the ranks' models, caches and
// communicators outlive them (members are destroyed after the destructor's body).
struct ThreadedStages {
  struct Rank {
    TpRankParts parts;
    std::unique_ptr<Qwen3Model> model;
    std::unique_ptr<KvCache> cache;
  };
  std::vector<Rank> ranks;  // [0] unused: rank 0 lives in the pipeline
  std::shared_ptr<Communicator> back_end;  // the last stage's end of the return link
  std::vector<std::thread> threads;
  std::shared_ptr<StepPipeline> pipeline;
  ~ThreadedStages() {
    pipeline.reset();
    for (std::thread& t : threads) t.join();
  }
};

}  // namespace

std::shared_ptr<StepPipeline> make_threaded_step_pipeline(std::vector<TpRankParts> ranks, int pp, int64_t num_blocks,
                                                          int32_t block_size, DType kv_dtype,
                                                          const std::string& track_prefix, int64_t mtp_blocks,
                                                          std::vector<int32_t> aux_layers) {
  const int n = static_cast<int>(ranks.size());
  PYPTO_ASSERT(pp > 1 && n % pp == 0, n, " ranks for ", pp, " pipeline stages");
  const int tp = n / pp;
  auto back = make_shm_communicators(2);
  auto owner = std::make_shared<ThreadedStages>();
  owner->back_end = std::move(back[1]);
  owner->ranks.resize(size_t(n));
  for (int r = 1; r < n; ++r) {
    ThreadedStages::Rank& rk = owner->ranks[size_t(r)];
    rk.parts = std::move(ranks[size_t(r)]);
    rk.model = std::make_unique<Qwen3Model>(*rk.parts.weights, *rk.parts.backend, tp > 1 ? rk.parts.comm.get() : nullptr);
    rk.cache = std::make_unique<KvCache>(rk.model->kv_cache_spec(num_blocks, block_size, kv_dtype));
  }
  TpRankParts& r0 = ranks[0];
  owner->pipeline = std::make_shared<StepPipeline>(
      std::move(r0.backend), r0.weights, std::shared_ptr<Communicator>(std::move(r0.world)),
      tp > 1 ? std::shared_ptr<Communicator>(std::move(r0.comm)) : nullptr, std::shared_ptr<Communicator>(std::move(back[0])),
      pp, num_blocks, block_size, kv_dtype);
  if (mtp_blocks > 0) owner->pipeline->enable_mtp();
  if (!aux_layers.empty()) owner->pipeline->enable_aux_capture(aux_layers);
  for (int r = 1; r < n; ++r) {
    ThreadedStages::Rank* rk = &owner->ranks[size_t(r)];
    const StagePosition pos = StagePosition::of_rank(r, pp, tp);
    Communicator* back_end = r == (pp - 1) * tp ? owner->back_end.get() : nullptr;
    PipelinedMtp mtp;
    if (mtp_blocks > 0) mtp = {rk->parts.weights.get(), mtp_blocks, block_size, kv_dtype};
    owner->threads.emplace_back([rk, pos, back_end, tp, track_prefix, mtp, aux_layers] {
      prof::name_this_thread(str_cat(track_prefix, "pp stage ", pos.stage, " tp rank ", pos.tp_rank));
      try {
        run_pipelined_stage(*rk->model, *rk->cache, *rk->parts.world, tp > 1 ? rk->parts.comm.get() : nullptr, back_end,
                            pos, mtp, aux_layers);
      } catch (const std::exception& e) {
        log_error("pipeline stage ", pos.stage, " tensor-parallel rank ", pos.tp_rank, ": ", e.what());
      }
    });
  }
  return std::shared_ptr<StepPipeline>(owner, owner->pipeline.get());
}

namespace {

// An MTP pass on a stage rank (the header's message already here, on every rank of the stage):
// stage 0 looks the embedding rows up, the stages between pass them on, the last runs the head.
void pipelined_mtp_pass(const StepHeader& h, const std::vector<uint8_t>& message, Communicator& world,
                        Communicator* stage_comm, Communicator* back, StagePosition pos, const Qwen3Weights& w,
                        Backend& backend, MtpHead* head, KvCache* mtp_cache, ForwardBatch& batch,
                        std::vector<float>& hidden, std::vector<float>& e, std::vector<float>& logits,
                        std::vector<float>& out, std::vector<int32_t>& local_ids) {
  const int64_t H = w.config.hidden_size, V = w.config.vocab_size;
  decode_mtp_pass(message, H, batch, hidden);  // rank 0 encoded it: this guards the protocol
  const int64_t T = batch.num_tokens(), n = batch.num_logits();
  e.resize(size_t(T * H));
  if (pos.first())
    MtpHead::lookup_embedding(w, backend, stage_comm, batch.token_ids.data(), T, e.data(), local_ids);
  else
    world.recv(e.data(), int64_t(sizeof(float) * e.size()), pos.rank() - pos.tp);
  if (!pos.last()) {
    if (pos.tp_rank == 0) {
      world.send(&h, sizeof h, (pos.stage + 1) * pos.tp);
      world.send(message.data(), h.bytes, (pos.stage + 1) * pos.tp);
    }
    world.send(e.data(), int64_t(sizeof(float) * e.size()), pos.rank() + pos.tp);
    return;
  }
  if (n == 0) {  // rows no pass reads (MtpProposer::run_kv): their KV only, nothing goes back
    PYPTO_PROF_OP("pipeline.mtp_kv");
    head->store_kv(batch, hidden.data(), *mtp_cache, e.data());
    return;
  }
  const bool gathers = pos.tp_rank == Qwen3Model::kLogitsRank;
  if (gathers) {
    logits.resize(size_t(n * V));
    out.resize(size_t(T * H));
  }
  PYPTO_PROF_OP("pipeline.mtp_head");
  head->forward(batch, hidden.data(), *mtp_cache, gathers ? logits.data() : nullptr, gathers ? out.data() : nullptr,
                e.data());
  if (!gathers) return;
  if (n > 0) back->send(logits.data(), int64_t(sizeof(float) * logits.size()), 0);
  back->send(out.data(), int64_t(sizeof(float) * out.size()), 0);
}

}  // namespace

int run_pipelined_stage(Qwen3Model& model, KvCache& cache, Communicator& world, Communicator* stage_comm,
                        Communicator* back, StagePosition pos, const PipelinedMtp& mtp,
                        const std::vector<int32_t>& aux_layers) {
  PYPTO_ASSERT(pos.pp > 1 && pos.rank() > 0, "rank 0 runs StepPipeline");
  PYPTO_ASSERT(pos.tp == 1 || stage_comm, "a stage of ", pos.tp, " TP ranks without its group");
  const bool lead = pos.tp_rank == 0;  // receives and passes on the step's header and batch
  const int prev0 = (pos.stage - 1) * pos.tp, next0 = (pos.stage + 1) * pos.tp;
  const int prev = pos.rank() - pos.tp, next = pos.rank() + pos.tp;  // same TP index
  const bool keeps_logits = pos.last() && pos.tp_rank == Qwen3Model::kLogitsRank;
  PYPTO_ASSERT(!keeps_logits || (back && back->rank() == 1), "the last stage's TP rank 0 needs the return link");
  const int64_t H = model.hidden_size(), V = model.vocab_size();
  // The MTP drafter (PipelinedMtp): the last stage's ranks hold the head and its KV pool, and its
  // TP rank 0 sends each step's final normed hidden rows after the logits.
  std::unique_ptr<MtpHead> mtp_head;
  std::unique_ptr<KvCache> mtp_cache;
  if (mtp.weights && pos.last()) {
    mtp_head = std::make_unique<MtpHead>(*mtp.weights, nullptr, model.backend(), stage_comm);
    mtp_cache = std::make_unique<KvCache>(mtp_head->kv_cache_spec(mtp.blocks, mtp.block_size, mtp.kv_dtype));
  }
  const bool sends_hidden = mtp.weights && keeps_logits;
  // EAGLE-3: TP rank 0 of a later stage receives the step's aux rows after its hidden states,
  // writes the columns of the aux layers it holds and passes them on (the last: back to rank 0).
  const bool carries_aux = !aux_layers.empty() && lead && !pos.first();
  PYPTO_ASSERT(!carries_aux || !mtp.weights, "EAGLE-3 and MTP drafters at once");
  std::vector<float> aux;
  ForwardBatch batch;
  std::vector<uint8_t> message;
  std::vector<float> hidden_in, hidden_out, logits, normed;
  std::vector<float> mtp_hidden, mtp_e, mtp_out;
  std::vector<int32_t> local_ids;
  for (;;) {
    StepHeader h{};
    if (lead && !pos.first()) world.recv(&h, sizeof h, prev0);
    if (stage_comm) stage_comm->broadcast(&h, sizeof h, 0);
    if (h.kind == kStopMessage) {
      if (lead && !pos.last()) world.send(&h, sizeof h, next0);
      return 0;
    }
    PYPTO_ASSERT((h.kind == kStepMessage || (h.kind == kMtpPassMessage && mtp.weights)) && h.bytes > 0,
                 "step message kind ", h.kind, " of ", h.bytes, " bytes");
    message.resize(size_t(h.bytes));
    if (lead && !pos.first()) world.recv(message.data(), h.bytes, prev0);
    if (stage_comm) stage_comm->broadcast(message.data(), h.bytes, 0);
    if (h.kind == kMtpPassMessage) {
      pipelined_mtp_pass(h, message, world, stage_comm, back, pos, *mtp.weights, model.backend(), mtp_head.get(),
                         mtp_cache.get(), batch, mtp_hidden, mtp_e, logits, mtp_out, local_ids);
      continue;
    }
    decode_batch(message.data(), message.size(), batch);
    const int64_t T = batch.num_tokens(), n = batch.num_logits();
    if (!pos.first()) {
      PYPTO_PROF_OP("pipeline.recv");
      hidden_in.resize(size_t(T * H));
      world.recv(hidden_in.data(), int64_t(sizeof(float) * hidden_in.size()), prev);
      if (carries_aux) {
        aux.resize(size_t(T * int64_t(aux_layers.size()) * H));
        world.recv(aux.data(), int64_t(sizeof(float) * aux.size()), prev0);
      }
    }
    if (!pos.last()) hidden_out.resize(size_t(T * H));
    if (keeps_logits) logits.resize(size_t(n * V));
    // Rank 0 checked the batch before sending it: nothing here can refuse it.
    if (sends_hidden) {
      normed.resize(size_t(T * H));
      model.set_normed_hidden_out(normed.data());
    }
    if (carries_aux) model.set_aux_hidden_out(aux_layers, aux.data());
    try {
      model.forward_stage(batch, cache, pos.first() ? nullptr : hidden_in.data(),
                          pos.last() ? nullptr : hidden_out.data(), keeps_logits ? logits.data() : nullptr);
    } catch (...) {
      model.set_normed_hidden_out(nullptr);
      model.set_aux_hidden_out({}, nullptr);
      throw;
    }
    model.set_normed_hidden_out(nullptr);
    model.set_aux_hidden_out({}, nullptr);
    if (!pos.last()) {
      PYPTO_PROF_OP("pipeline.send");
      if (lead) {
        world.send(&h, sizeof h, next0);
        world.send(message.data(), h.bytes, next0);
      }
      world.send(hidden_out.data(), int64_t(sizeof(float) * hidden_out.size()), next);
      if (carries_aux) world.send(aux.data(), int64_t(sizeof(float) * aux.size()), next0);
    } else if (keeps_logits) {
      if (n > 0) back->send(logits.data(), int64_t(sizeof(float) * logits.size()), 0);
      if (sends_hidden) back->send(normed.data(), int64_t(sizeof(float) * normed.size()), 0);
      if (carries_aux) back->send(aux.data(), int64_t(sizeof(float) * aux.size()), 0);
    }
  }
}

}  // namespace pypto
