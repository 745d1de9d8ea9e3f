#pragma once
// The EAGLE-3 draft head (fact sheet speculative.md §4.3; config: model/eagle3_config.h). For a
// row pairing a hidden state h [H] with the next token x (row at position t: h from target
// position t, x = x_{t+1}):
//   first draft step:  h = fc([a_0 | a_1 | a_2])  the target's residual streams entering its
//                      three aux layers at position t (fuse(), [T, 3H] → [T, H], no bias)
//   later steps:       h = the previous step's `prenorm` (below), fed back as is
//   e = input_layernorm(embed(x))                          [H]   (the head's embed_tokens, else the target's)
//   g = hidden_norm(h)                                     [H]
//   r = norm_before_residual ? g : h                       [H]   the residual stream
//   r += o_proj(attention(qkv_proj([e | g])))              qkv_proj reads 2H; Llama attention
//                                                          (RoPE, no q/k norm) over the head's own KV
//   r += down(silu(gate(n)) · up(n)),  n = post_attention_layernorm(r)
//   prenorm = r;   draft logits = lm_head(norm(r))         lm_head [draft_vocab, H]
//   target logit of token d2t_id(i) = draft logit i, with d2t_id(i) = i + d2t[i]; every other
//   target token -inf.
// The head runs unsharded on one rank; the weights are packed for the backend that runs it. Under
// --tp / --pp (parallel/replicas/eagle3_tp_executor.h) the target's embedding, when the head has
// none, may be vocab-parallel: the head is then given a lookup that gathers it (EmbeddingLookup).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "kernels/backend.h"
#include "model/eagle3_config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_weights.h"

namespace pypto {

struct Eagle3Weights {
  Eagle3Config config;
  std::vector<int32_t> aux_layers;  // the target layers fused (eagle3_aux_layers)
  LinearWeight qkv;                 // [q + 2 kv, 2H]: rows q | k | v
  LinearWeight kv;                  // [2 kv, 2H]: the k | v rows again, for KV-only rows (Eagle3Head::store_kv)
  LinearWeight o_proj;              // [H, q]
  LinearWeight gate_up;             // [2 I, H]: rows gate | up
  LinearWeight down;                // [H, I]
  LinearWeight fc;                  // [H, 3H]
  LinearWeight lm_head;             // [draft_vocab, H]
  std::vector<float> input_norm, hidden_norm, post_norm, norm;  // [H] each
  std::vector<int32_t> draft_to_target;  // [draft_vocab] target id of draft id i (i + d2t[i])
  bool own_embed = false;                // embed_tokens in the head; else the target's is used
  DType embed_dtype = DType::BF16;
  std::vector<AlignedBuffer> buffers;    // the packed weights and the embedding table
  const void* embed = nullptr;           // [vocab, H] in embed_dtype (own_embed)
  size_t bytes = 0;                      // resident bytes
};

// Reads and packs the head in `c.dir` (every *.safetensors file there) for `backend`'s layout.
// Tensor names as published (midlayer.* or layers.0.*, an optional model. prefix). Throws Error
// naming the file and tensor: a missing or misshapen tensor, an unknown one, a dtype other than
// BF16 / F16 / F32 (I64 for d2t), d2t missing while draft_vocab_size < vocab_size, a d2t mapping
// outside the vocabulary or two draft ids onto one target id.
std::shared_ptr<const Eagle3Weights> load_eagle3_weights(const Eagle3Config& c, const ModelConfig& target,
                                                         Backend& backend);

class Eagle3Head {
 public:
  // e [T, H] ← the target's embedding rows of ids[T] (ids inside the vocabulary).
  using EmbeddingLookup = std::function<void(const int32_t* ids, int64_t T, float* e)>;

  // `weights`, `target` (its embedding, when the head has none; one rank) and `backend` must
  // outlive the head.
  Eagle3Head(std::shared_ptr<const Eagle3Weights> weights, const Qwen3Weights& target, Backend& backend);
  // The same with the target's embedding read through `target_embedding` (called only when the
  // head has no embed_tokens; what it reads must outlive the head).
  Eagle3Head(std::shared_ptr<const Eagle3Weights> weights, EmbeddingLookup target_embedding, Backend& backend);
  Eagle3Head(const Eagle3Head&) = delete;  // the one-rank lookup refers to this head's scratch
  Eagle3Head& operator=(const Eagle3Head&) = delete;

  // The head's KV cache: one layer of its attention shape.
  KvCacheSpec kv_cache_spec(int64_t num_blocks, int32_t block_size, DType dtype) const;
  const std::vector<int32_t>& aux_layers() const { return w_->aux_layers; }
  int64_t hidden_size() const { return w_->config.hidden_size; }

  // out [T, H] = fc(aux [T, 3H]): the fused first-step hidden state of each target row.
  void fuse(const float* aux, int64_t T, float* out);
  // Rows fuse() has fused so far (tests: a step that drafts nothing fuses nothing).
  int64_t fused_rows() const { return fused_rows_; }

  // batch: the head's rows (token ids x_{t+1}, positions, slots in `cache`, logits rows).
  // hidden [T, H]; logits_out [num_logits, vocab] (the target's vocabulary, -inf outside the
  // draft vocabulary); prenorm (may be null) [T, H]. Throws Error for a token outside the vocabulary.
  void forward(const ForwardBatch& batch, const float* hidden, KvCache& cache, float* logits_out, float* prenorm);
  // What forward() writes to the head's KV cache for `batch`'s rows, bitwise (the k | v rows of
  // qkv, RoPE on k), without their queries, attention, MLP and outputs: rows whose prenorm and
  // logits no pass reads. batch: no logits rows.
  void store_kv(const ForwardBatch& batch, const float* hidden, KvCache& cache);

 private:
  // Checks the batch and the cache; cat_ [T, 2H] ← [input_norm(embed(ids)) | hidden_norm(hidden)],
  // g_ [T, H] the normed hidden rows.
  void input_rows(const ForwardBatch& batch, const float* hidden, const KvCache& cache);
  std::shared_ptr<const Eagle3Weights> w_;
  EmbeddingLookup target_embedding_;
  Backend& backend_;
  RopeSpec rope_;
  std::vector<int32_t> local_ids_;
  // Per-call scratch: e, g, r, tmp, n [T, H]; cat [T, 2H]; qkv [T, q + 2kv]; q, attn [T, q];
  // k, v [T, kv]; gate_up [T, 2I]; act [T, I]; logit rows [n, H] and [n, draft_vocab].
  std::vector<float> e_, g_, r_, tmp_, cat_, qkv_, q_, k_, v_, attn_, gate_up_, act_, rows_, draft_logits_;
  int64_t fused_rows_ = 0;
};

}  // namespace pypto
