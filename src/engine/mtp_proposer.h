#pragma once
// The MTP drafter (--speculative-config '{"method": "mtp", "num_speculative_tokens": k}'): the
// target checkpoint's own multi-token-prediction head (model/mtp_head.h) drafts from the
// target's final normed hidden states, one MTP layer reused for each of the k draft positions.
//
// Data flow. The MTP row at position t pairs the target's hidden state h_t with token x_{t+1}
// and lives in the MTP's paged KV cache, which is indexed by the target's block ids: row t sits in
// the target block holding position t, at its slot t % block_size (one more layer of the target's
// KV blocks; the pool's ids past the target's are private lookahead blocks for draft rows beyond
// the request's target blocks). A request's MTP context covers rows [base, base + valid); base is
// 0 unless the context had to restart (see below), and MTP positions are t - base.
//  - observe() (MtpExecutor, after every target step): the step's hidden rows h_t for positions
//    [s, s + n) of each request. Rows t in [s - 1, s + n - 1) whose x_{t+1} the step holds are
//    computed right away (prompt chunks and verify rows alike); the n hidden rows are kept until
//    the next step, because after a verify the last accepted row is not known yet.
//  - prepare() (the scheduler, before the next step): for a request whose verified tokens end at
//    p (the token at p, just sampled, not yet computed), MTP rows past p - 1 are dropped (they
//    held rejected drafts: the rollback, as the target's KV past num_computed_tokens), row p - 1 is
//    computed from h_{p-1} and x_p and gives draft 1; draft j + 1 comes from the row pairing the
//    previous MTP row's output (RMSNorm1p(m; mtp.norm), what its lm_head read) with draft j at the
//    next position. Requests are batched in each pass: k batched MTP forwards per step.
// Prefix caching (the MTP context survives a prefix-cache hit). Once every row of a target block
// is verified (rows of rejected drafts rolled back and recomputed) in a context with base 0, the
// block is tagged with the token x_{t+1} its last row paired with: rows at slots 0 .. bs - 2 are
// a function of the block's hash chain alone, the last one also of the next block's first token.
// A request admitted with a hit of h tokens (h = kh * bs) restores rows [0, h) as its context
// (base 0) when each hit block j is tagged with the request's own token at (j + 1) * bs (for
// j < kh - 1 the first token of hit block j + 1, recorded when it was scheduled; for the last,
// the request's token at h): then it drafts as it would have on a cold run, attending to the whole
// prefix, and it never writes a hit block (its rows start at h). Otherwise its context starts at
// the hit, as the target's rows do. A hybrid resumes only at a GDN state snapshot (the hit ends
// there), so the MTP context resumes at the same place or earlier.
// Speculation off (set_context_needed(false): the cost model's plain stretches) computes no MTP
// rows but keeps the target's hidden rows; the first step or prepare() with context fills the
// missed rows in one pass, so the context stays whole through the stretch. A context restarts
// (base > 0, rows at MTP positions t - base in the request's own blocks, never tagged) only after
// a gap the kept hidden rows cannot fill: a stretch beyond the kept-rows budget, a failed pass.
// finish() tags what a finished or preempted request verified last (rows < num_computed - 1).
// Drafts are chosen as DraftModelProposer chooses (greedy: argmax; sampled: a draw from the
// processed distribution q, kept for rejection sampling).
//
// Tensor parallelism (--tp, thread ranks): one MtpHead per rank over the rank's slice, each with
// its share of the MTP KV cache (its KV heads, the same block ids on every rank); the proposer's
// bookkeeping runs on the engine thread and each head pass is run by every rank at once through
// the executor's `fanout` (parallel/replicas/mtp_tp_executor.h), logits and outputs landing in
// this proposer's buffers from head rank 0 (MtpHead's class comment). Under --pp the heads are
// the last stage's TP ranks. With rank processes (--distributed-executor-backend mp) the heads
// live in the ranks' processes: each pass is handed to a RemotePass
// (parallel/replicas/mtp_rank_pass.h), which runs it there and returns head rank 0's logits and
// outputs; the bookkeeping here is the same.
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/draft_proposer.h"
#include "engine/scheduler_output.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/mtp_head.h"

namespace pypto {

class MtpProposer final : public DraftProposer {
 public:
  // `target` (staged with its MTP head, one rank) and `backend` (the target's: the MTP runs on
  // the engine thread between and inside the target's steps) must outlive the proposer.
  // num_blocks of block_size tokens: the MTP layer's KV pool, at least the target's blocks (the
  // same ids, set_target_kv_blocks()) plus the private lookahead blocks of the draft rows.
  MtpProposer(const Qwen3Weights& target, Backend& backend, int64_t num_blocks, int32_t block_size, DType kv_dtype);

  // Tensor parallel: rank r's slice (its last pipeline stage's), backend and communicator; under
  // --pp `embed` is the first stage's slice of the same TP rank (null: `target` holds the embedding).
  struct Rank {
    const Qwen3Weights* target;
    Backend* backend;
    Communicator* comm;
    const Qwen3Weights* embed = nullptr;
  };
  // Runs fn(r) for every rank r at once, each on its rank's thread, and returns when all are
  // done, rethrowing a rank's error.
  using Fanout = std::function<void(const std::function<void(int)>& fn)>;
  // `ranks` (and what they point to) and what `fanout` uses must outlive the proposer.
  MtpProposer(std::vector<Rank> ranks, Fanout fanout, int64_t num_blocks, int32_t block_size, DType kv_dtype);
  // Rank processes: runs one pass of the heads, which hold the MTP KV pool (num_blocks of
  // block_size, every rank its share), over `batch` with hidden rows [T, H]; fills logits
  // [batch.num_logits(), vocab] and out [T, H] (sized by the caller), or throws. A batch without
  // logits rows (run_kv) may write only its rows' KV and leave `out` as it is.
  using RemotePass = std::function<void(const ForwardBatch& batch, const std::vector<float>& hidden,
                                        std::vector<float>& logits, std::vector<float>& out)>;
  // `config`: the target's (hidden size, vocabulary).
  MtpProposer(const ModelConfig& config, RemotePass pass, int64_t num_blocks, int32_t block_size);

  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override;
  void prepare(std::span<const Query> queries) override;
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override;
  void forget(const std::string& req_id) override;
  const DraftDistribution* distribution(const std::string& req_id) const override;
  // False: observe() computes no MTP rows (speculation is off: a plain step then costs what it
  // costs without MTP) and keeps the step's hidden rows instead; when the context is needed again
  // (a step with it, or prepare()) the rows missed meanwhile are computed in one pass from the kept
  // rows, so the context stays whole (base 0, its blocks tagged as any). Kept rows beyond
  // set_kept_hidden_limit() restart the context instead.
  void set_context_needed(bool needed) override { context_needed_ = needed; }
  // Bytes of hidden rows ([rows, H] f32) all requests may keep over stretches without context
  // (default kKeptHiddenBytes: 6,553 rows of the 27B shape's H = 5120, 16,384 of the 35B-A3B's 2048).
  static constexpr int64_t kKeptHiddenBytes = int64_t(128) << 20;
  void set_kept_hidden_limit(int64_t bytes) { kept_limit_bytes_ = bytes; }
  void finish(const Request& req) override;
  void set_target_kv_blocks(int64_t num_blocks) override;

  // Prefix-cache hits seen by the MTP context (admitted or resumed requests with a hit), how many
  // of them restored it (base 0 rather than the hit), and the rows restored.
  struct ContextStats {
    int64_t hits = 0, restored = 0, restored_rows = 0;
    int64_t restarts = 0;     // contexts restarted because the kept rows of a stretch without context ran out
    int64_t filled_rows = 0;  // MTP rows computed after a stretch without context from its kept rows
  };
  const ContextStats& context_stats() const { return context_stats_; }
  // False: a request admitted with a prefix-cache hit starts its MTP context at the hit, as before
  // the context was shared (bench_mtp_prefix compares the two); set before any request.
  void set_restore_on_hit(bool restore) { restore_on_hit_ = restore; }
  // The first target position of request `req_id`'s MTP context (its base), -1: no context.
  int64_t context_start(const std::string& req_id) const;

  // hidden [n, H] ← captured [n, width]: what the head reads of n captured target rows.
  using Fuse = std::function<void(const float* captured, int64_t n, float* hidden)>;
  // observe() is handed rows of `width` floats (an EAGLE-3 head's three aux states, width 3H)
  // that `fuse` (its fc) turns into the hidden rows its passes read. The proposer keeps the
  // captured rows and fuses only those a pass computes, in one call per pass: a step without
  // context (speculation off) fuses nothing, and the rows it missed are fused with the fill when
  // the context is needed again. Set before any request; kept rows count `width` floats against
  // set_kept_hidden_limit().
  void set_fuse(int64_t width, Fuse fuse);

  // After the target's step `so` (its batch `batch`): hidden [batch.num_tokens(), H], the final
  // normed hidden state of every row ([T, width] captured rows with set_fuse()).
  void observe(const SchedulerOutput& so, const ForwardBatch& batch, const float* hidden);

  const MtpHead& head() const { return *heads_.at(0); }  // not with a RemotePass
  int tp_size() const { return int(heads_.size()); }
  // Parts the proposer keeps alive (the loader's weights and backend).
  void keep_alive(std::vector<std::shared_ptr<const void>> parts) { parts_ = std::move(parts); }
  int64_t free_blocks() const { return int64_t(free_.size()); }  // private lookahead blocks

 private:
  struct State {
    int64_t base = 0;               // target position of MTP position 0
    int64_t valid = 0;              // MTP rows [0, valid) hold verified (h_t, x_{t+1}) pairs
    int64_t prepared = -1;          // prepare() computed row p - 1 from the verified x_p (p), this step
    std::vector<int32_t> table;     // the target's block table (last observed), + lookahead in prepare()
    size_t own_first = 0;           // first block index this request computed (the hit's end)
    size_t tagged = 0;              // blocks below are tagged or hit (tag())
    int64_t hidden_start = -1;      // target position of hidden row 0 (-1: none)
    std::vector<float> hidden;      // [rows, C] the last step's hidden rows (captured rows, width C,
                                    // with set_fuse()), after a stretch without context also those
                                    // of its steps from row base + valid on
    std::vector<int32_t> kept_tokens;  // the tokens at the kept rows' positions (the steps' tokens)
    std::vector<int32_t> drafts;    // this step's proposal
    std::vector<float> out;         // [H] the last MTP row's output (fed to the next pass)
    DraftDistribution dist;         // sampled requests: q of each draft
  };
  // Appends private lookahead blocks so st.table covers MTP rows up to target position `last`.
  bool lookahead(State& st, int64_t last, std::vector<int32_t>& taken);
  // The request's hit blocks [0, start / bs) carry verified MTP rows for its tokens: restores.
  void restore(State& st, const ScheduledRequest& s);
  // Tags the request's own blocks whose rows are now all verified (base 0).
  void tag(State& st);
  // The block holding MTP row t, and the bookkeeping of a row written there with x_{t+1}.
  int32_t row_block(const State& st, int64_t t) const;
  // The kept hidden rows hold h_t for every t in [from, to).
  bool kept_covers(const State& st, int64_t from, int64_t to) const;
  void wrote_row(const State& st, int64_t t, int32_t next_token);
  int32_t choose(const Request& req, State& st, std::span<float> logits);
  void run(const std::vector<float>& hidden_rows);  // the heads over batch_ → logits_, out_ (rank 0's)
  // The heads over batch_ (no logits rows) writing only the rows' KV (MtpHead::store_kv).
  void run_kv(const std::vector<float>& hidden_rows);
  // Where a pass gathers rows of width C_ (rows_hidden_ itself without a fuse), and the pass's
  // [T, H] hidden rows once gathered (fused from the gathered rows with a fuse).
  std::vector<float>& gathered() { return fuse_ ? captured_ : rows_hidden_; }
  const std::vector<float>& pass_hidden();

  std::vector<std::shared_ptr<const void>> parts_;  // destroyed last
  int64_t H_, V_;  // hidden size, vocabulary
  int64_t C_;      // floats per row observe() is handed: H_, or set_fuse()'s width
  Fuse fuse_;      // null: observe() is handed the hidden rows themselves
  std::vector<std::unique_ptr<MtpHead>> heads_;  // per TP rank
  std::vector<std::unique_ptr<KvCache>> caches_;  // per TP rank: its KV heads of the MTP layer
  Fanout fanout_;                                 // null on one rank
  RemotePass remote_;                             // rank processes: instead of heads_
  int32_t block_size_;
  int64_t num_blocks_;             // the MTP pool's blocks
  int64_t target_blocks_;          // ids below are the target's blocks, the rest private
  std::vector<int32_t> free_;      // private lookahead blocks, free
  // Per target block id: the x_{t+1} its last row paired with once all its rows are verified
  // (-1: not shareable), the token the latest write of its last row used, its first token.
  std::vector<int32_t> tag_, last_written_, first_token_;
  ContextStats context_stats_;
  std::unordered_map<std::string, State> states_;
  ForwardBatch batch_;
  std::vector<float> rows_hidden_, logits_, out_;  // per pass: [T, H] input, [T, V], [T, H]
  std::vector<float> captured_;                    // per pass with a fuse: [T, C] gathered rows
  bool warned_short_ = false;
  bool context_needed_ = true;
  bool restore_on_hit_ = true;
  int64_t kept_limit_bytes_ = kKeptHiddenBytes;
};

}  // namespace pypto
