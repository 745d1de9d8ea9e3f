#include "model/hybrid_split.h"

#include <algorithm>

#include "core/error.h"
#include "core/tensor.h"
#include "model/moe_staging.h"

namespace pypto {
namespace {

// Byte sizes of everything staged, in the order stage_hybrid_weights takes them.
// `lin` is a projection in the layer format, `flin` one that stays float (router, the GDN's b | a,
// the shared expert's gate), `head` the lm_head (and embedding table) in the head format.
// Layers [first, first + layers); the embedding with layer 0, lm_head and the final norm with the
// last layer.
template <typename Take>
void walk_sizes(const ModelConfig& c, const Backend& be, DType wdt, const StagedFormats& f, int first, int layers,
                bool embed, bool head, int tp_rank, int tp, Take&& take) {
  const VocabSlice vs = vocab_slice(c.vocab_size, tp, tp_rank);
  const int64_t H = c.hidden_size, hd = c.head_dim, V = vs.end - vs.begin, nv = c.linear_num_value_heads / tp;
  const int64_t C = c.gdn_conv_dim() / tp, Vd = c.gdn_value_dim() / tp;
  auto packed = [&](WeightFormat fm, int64_t n, int64_t k) {
    return fm == WeightFormat::Float ? be.packed_weight_bytes(wdt, n, k)
                                     : be.packed_quantized_bytes(fm, n, k, fm == WeightFormat::Int8 ? 0 : f.group);
  };
  auto lin = [&](int64_t n, int64_t k) { take(packed(f.layers, n, k)); };
  auto flin = [&](int64_t n, int64_t k) { take(be.packed_weight_bytes(wdt, n, k)); };
  auto vec = [&](int64_t n) { take(size_t(n) * sizeof(float)); };
  if (c.tie_word_embeddings) {
    if (embed || head) take(packed(f.head, V, H));  // one table: the lm_head, looked up by rows
  } else {
    if (embed) take(f.head == WeightFormat::Float ? size_t(V * H) * dtype_size(wdt) : packed(f.head, V, H));
    if (head) take(packed(f.head, V, H));
  }
  if (head) vec(H);
  // One decoder layer (`sparse`: routed experts in place of the dense MLP); the MTP head's layer
  // is a full-attention one with the FFN of the config's rule at layer 0 (hybrid_staging.cpp).
  auto layer = [&](bool full, bool sparse) {
    vec(H);
    vec(H);
    if (full) {
      lin((2 * c.q_size() + 2 * c.kv_size()) / tp, H);
      lin(H, c.q_size() / tp);
      vec(hd);
      vec(hd);
    } else {
      if (f.layers == WeightFormat::Float) {
        lin(C + Vd + 2 * nv, H);
      } else {
        lin(C + Vd, H);
        flin(2 * nv, H);
      }
      lin(H, Vd);
      vec(C * c.linear_conv_kernel_dim);
      vec(nv);  // dt_bias
      vec(nv);  // A_log as read
      vec(nv);  // -exp(A_log)
      vec(c.linear_value_head_dim);
    }
    if (!sparse) {
      lin(2 * c.intermediate_size / tp, H);
      lin(H, c.intermediate_size / tp);
      return;
    }
    flin(c.num_experts, H);
    const ExpertShard es = expert_shard(c, tp_rank, tp, f.expert_parallel, f.layers, f.group);
    for (int64_t e = 0; e < es.count; ++e) {
      lin(2 * es.inter, H);
      lin(H, es.inter);
    }
    lin(2 * c.shared_expert_intermediate_size / tp, H);
    lin(H, c.shared_expert_intermediate_size / tp);
    flin(1, H);
  };
  for (int i = first; i < first + layers; ++i) layer(c.full_attention_layer(i), c.sparse_layer(i));
  // The MTP head (staged after the layers): its two input norms, fc [H, 2H], its layer's k | v
  // rows apart (MtpHeadWeights::kv), one full-attention layer and its final norm.
  if (f.mtp && head) {
    vec(H);
    vec(H);
    lin(H, 2 * H);
    lin(2 * c.kv_size() / tp, H);
    layer(true, c.sparse_layer(0));
    vec(H);
  }
}

}  // namespace

void check_hybrid_tp(const ModelConfig& c, int tp, const StagedFormats& f) {
  if (tp == 1) return;
  auto divides = [&](int64_t n, const char* field) {
    if (n % tp != 0) fail("--tp ", tp, ": ", c.architecture, " has ", field, " = ", n, ", not a multiple of ", tp);
  };
  divides(c.num_attention_heads, "num_attention_heads");
  divides(c.num_key_value_heads, "num_key_value_heads");
  divides(c.linear_num_key_heads, "linear_num_key_heads");
  divides(c.linear_num_value_heads, "linear_num_value_heads");
  // The MTP layer follows the rule at layer 0, which the main stack has too.
  if (c.has_dense_layers()) divides(c.intermediate_size, "intermediate_size");
  if (c.has_sparse_layers()) {
    // The routed experts: their columns (moe_staging.h expert_shard checks them, or whole
    // experts under --enable-expert-parallel); the shared expert is split by columns either way.
    (void)expert_shard(c, 0, tp, f.expert_parallel, f.layers, f.group);
    divides(c.shared_expert_intermediate_size, "shared_expert_intermediate_size");
  }
  if (f.layers != WeightFormat::Int4) return;
  auto whole_groups = [&](int64_t cols, const char* what) {
    if (cols % f.group != 0)
      fail("--tp ", tp, ": a rank's ", what, " columns (", cols, ") are not whole int4 groups of ", f.group,
           "; use a --quantization-group that divides them, or fewer ranks");
  };
  whole_groups(c.q_size() / tp, "o_proj");
  whole_groups(c.gdn_value_dim() / tp, "linear_attn.out_proj");
  if (c.has_sparse_layers()) whole_groups(c.shared_expert_intermediate_size / tp, "shared_expert.down_proj");
  if (c.has_dense_layers()) whole_groups(c.intermediate_size / tp, "mlp.down_proj");
}

size_t hybrid_staged_bytes(const Checkpoint& ck, const Backend& backend, int num_layers, const StagedFormats* formats,
                           int tp_rank, int tp_size, LayerRange range) {
  const ModelConfig& c = ck.config();
  range = resolve_range(c, range);
  const TensorRef* embed = ck.find(c.tensor_prefix + "embed_tokens.weight");
  const DType wdt = embed ? embed->info->dtype : c.torch_dtype;
  const StagedFormats f = formats ? *formats : StagedFormats{};
  size_t total = 0;
  const int layers = num_layers >= 0 ? std::min(num_layers, range.end - range.begin) : range.end - range.begin;
  walk_sizes(c, backend, wdt, f, range.begin, layers, range.begin == 0, range.end == c.num_hidden_layers, tp_rank,
             tp_size, [&](size_t n) { total += (std::max<size_t>(n, 64) + 63) / 64 * 64; });
  return total;
}

}  // namespace pypto
