#include "model/hybrid_checkpoint_check.h"

#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/tensor.h"
#include "model/hybrid_prequant.h"
#include "model/qwen3_next_layout.h"

namespace pypto {

std::string hybrid_layer_tensor(const ModelConfig& c, int i, const std::string& suffix) {
  return str_cat(c.tensor_prefix, "layers.", i, ".", suffix);
}

// The MTP layer's FFN kind: vLLM builds it as a decoder layer whose index is the one in its name
// "mtp.layers.0", so the rule of ModelConfig::sparse_layer at layer 0 (for Qwen3-Next with dense
// layers it can be dense; always sparse on Qwen3.5-MoE, dense on dense Qwen3.5).
bool hybrid_mtp_layer_sparse(const ModelConfig& c) { return c.sparse_layer(0); }

namespace {

struct Expected {
  std::string name;
  Shape shape;
  bool matrix;  // a projection: the checkpoint's weight dtype; otherwise any float dtype
};

// The experts of layer i are stored fused (3-D) when its gate_up_proj tensor exists.
bool fused_experts(const Checkpoint& ck, int i) {
  return ck.find(hybrid_layer_tensor(ck.config(), i, "mlp.experts.gate_up_proj")) != nullptr;
}

// The tensors of one decoder layer whose names start with `p` (a main-stack layer, or the MTP
// head's "mtp.layers.0."); `sparse`: routed experts (ModelConfig::sparse_layer) in place of the
// dense MLP; `fused`: its experts are stored fused (3-D).
void add_layer_tensors(const ModelConfig& c, const std::string& p, bool full, bool sparse, bool fused,
                       std::vector<Expected>& v) {
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t C = c.gdn_conv_dim(), Vd = c.gdn_value_dim(), nv = c.linear_num_value_heads;
  auto add = [&](const std::string& s, Shape shape, bool matrix) { v.push_back({p + s, shape, matrix}); };
  add("input_layernorm.weight", {H}, false);
  add("post_attention_layernorm.weight", {H}, false);
  if (full) {
    add("self_attn.q_proj.weight", {2 * c.q_size(), H}, true);
    add("self_attn.k_proj.weight", {c.kv_size(), H}, true);
    add("self_attn.v_proj.weight", {c.kv_size(), H}, true);
    add("self_attn.o_proj.weight", {H, c.q_size()}, true);
    add("self_attn.q_norm.weight", {hd}, false);
    add("self_attn.k_norm.weight", {hd}, false);
  } else {
    if (gdn_grouped_projections(c)) {  // Qwen3-Next (model/qwen3_next_layout.h)
      add("linear_attn.in_proj_qkvz.weight", {C + Vd, H}, true);
      add("linear_attn.in_proj_ba.weight", {2 * nv, H}, true);
    } else {
      add("linear_attn.in_proj_qkv.weight", {C, H}, true);
      add("linear_attn.in_proj_z.weight", {Vd, H}, true);
      add("linear_attn.in_proj_b.weight", {nv, H}, true);
      add("linear_attn.in_proj_a.weight", {nv, H}, true);
    }
    add("linear_attn.conv1d.weight", {C, 1, c.linear_conv_kernel_dim}, false);
    add("linear_attn.dt_bias", {nv}, false);
    add("linear_attn.A_log", {nv}, false);
    add("linear_attn.norm.weight", {c.linear_value_head_dim}, false);
    add("linear_attn.out_proj.weight", {H, Vd}, true);
  }
  if (!sparse) {
    add("mlp.gate_proj.weight", {c.intermediate_size, H}, true);
    add("mlp.up_proj.weight", {c.intermediate_size, H}, true);
    add("mlp.down_proj.weight", {H, c.intermediate_size}, true);
    return;
  }
  const int64_t E = c.num_experts, mI = c.moe_intermediate_size, sI = c.shared_expert_intermediate_size;
  add("mlp.gate.weight", {E, H}, true);
  if (fused) {
    add("mlp.experts.gate_up_proj", {E, 2 * mI, H}, true);
    add("mlp.experts.down_proj", {E, H, mI}, true);
  } else {
    for (int64_t e = 0; e < E; ++e) {
      add(str_cat("mlp.experts.", e, ".gate_proj.weight"), {mI, H}, true);
      add(str_cat("mlp.experts.", e, ".up_proj.weight"), {mI, H}, true);
      add(str_cat("mlp.experts.", e, ".down_proj.weight"), {H, mI}, true);
    }
  }
  add("mlp.shared_expert.gate_proj.weight", {sI, H}, true);
  add("mlp.shared_expert.up_proj.weight", {sI, H}, true);
  add("mlp.shared_expert.down_proj.weight", {H, sI}, true);
  add("mlp.shared_expert_gate.weight", {1, H}, true);
}

std::vector<Expected> expected_tensors(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const int64_t H = c.hidden_size, V = c.vocab_size;
  std::vector<Expected> v;
  v.push_back({c.tensor_prefix + "embed_tokens.weight", {V, H}, true});
  v.push_back({c.tensor_prefix + "norm.weight", {H}, false});
  if (!c.tie_word_embeddings) v.push_back({"lm_head.weight", {V, H}, true});
  for (int i = 0; i < c.num_hidden_layers; ++i)
    add_layer_tensors(c, hybrid_layer_tensor(c, i, ""), c.full_attention_layer(i), c.sparse_layer(i), fused_experts(ck, i), v);
  return v;
}

// The MTP head's tensors (fact sheet §3.6): two [H] norms, fc [H, 2H], one full-attention layer
// with a dense FFN or experts (mtp_layer_sparse; per expert or fused), mtp.norm [H].
std::vector<Expected> mtp_expected_tensors(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const int64_t H = c.hidden_size;
  std::vector<Expected> v = {{"mtp.pre_fc_norm_embedding.weight", {H}, false},
                             {"mtp.pre_fc_norm_hidden.weight", {H}, false},
                             {"mtp.fc.weight", {H, 2 * H}, true},
                             {"mtp.norm.weight", {H}, false}};
  add_layer_tensors(c, "mtp.layers.0.", true, hybrid_mtp_layer_sparse(c), ck.find("mtp.layers.0.mlp.experts.gate_up_proj") != nullptr,
                    v);
  return v;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Each expected tensor present with its shape and a float dtype (a projection: the checkpoint's
// weight dtype, or pre-quantized as stored); what is wrong goes to `problems`.
void check_expected(const Checkpoint& ck, const std::vector<Expected>& expected, DType wdt,
                    std::vector<std::string>& problems, std::set<std::string>& known) {
  for (const Expected& e : expected) {
    known.insert(e.name);
    if (e.matrix) {  // float, or pre-quantized as stored (model/hybrid_prequant.h)
      check_hybrid_projection(ck, e.name, e.shape, wdt, problems, known);
      continue;
    }
    const TensorRef* r = ck.find(e.name);
    if (!r) {
      problems.push_back(str_cat(e.name, ": missing (expected ", shape_str(e.shape), ")"));
      continue;
    }
    if (r->info->shape != e.shape)
      problems.push_back(str_cat(e.name, ": shape ", shape_str(r->info->shape), ", expected ", shape_str(e.shape)));
    const DType dt = r->info->dtype;
    if (dt != DType::F32 && dt != DType::BF16 && dt != DType::F16)
      problems.push_back(str_cat(e.name, ": dtype ", dtype_name(dt), " (allowed: F32, BF16, F16)"));
  }
}

void throw_problems(const Checkpoint& ck, const std::string& what, const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string msg = str_cat(ck.dir(), ": ", what, " (", problems.size(), " tensor", problems.size() == 1 ? "" : "s", "):");
  for (const auto& p : problems) msg += "\n  " + p;
  throw Error(msg);
}

}  // namespace

// The MTP head's tensors, when --speculative-config method mtp stages it.
void validate_hybrid_mtp_tensors(const Checkpoint& ck) {
  const TensorRef& embed = ck.get(ck.config().tensor_prefix + "embed_tokens.weight");
  std::vector<std::string> problems;
  std::set<std::string> known;
  check_expected(ck, mtp_expected_tensors(ck), embed.info->dtype, problems, known);
  throw_problems(ck, "the MTP head (mtp.*) does not match config.json", problems);
}

void validate_hybrid_checkpoint(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  PYPTO_ASSERT(c.hybrid(), c.architecture);
  if (c.linear_conv_kernel_dim > 16)
    fail(ck.dir(), ": linear_conv_kernel_dim ", c.linear_conv_kernel_dim, " is larger than the supported 16");
  const TensorRef* embed = ck.find(c.tensor_prefix + "embed_tokens.weight");
  const DType wdt = embed ? embed->info->dtype : c.torch_dtype;
  std::vector<std::string> problems;
  std::set<std::string> known;
  check_expected(ck, expected_tensors(ck), wdt, problems, known);
  if (wdt != DType::BF16 && wdt != DType::F16 && wdt != DType::F32)
    problems.push_back(str_cat(c.tensor_prefix, "embed_tokens.weight: dtype ", dtype_name(wdt), " (allowed: BF16, F16, F32)"));
  // Every other tensor of the text model must be explained by the config: one left over means
  // layer_types, num_hidden_layers or the MLP kind disagree with the checkpoint.
  int64_t visual = 0, mtp = 0;
  for (const std::string& name : ck.tensor_names()) {
    if (starts_with(name, "model.visual.")) {
      ++visual;
      continue;
    }
    if (starts_with(name, "mtp.")) {
      ++mtp;
      continue;
    }
    if (known.count(name)) continue;
    if (starts_with(name, c.tensor_prefix) || name == "lm_head.weight")
      problems.push_back(str_cat(name, ": not part of the model config.json describes (check layer_types, ",
                                 "num_hidden_layers, decoder_sparse_step, mlp_only_layers and tie_word_embeddings)"));
  }
  throw_problems(ck, "checkpoint does not match config.json", problems);
  if (visual > 0) log_info(ck.dir(), ": skipping ", visual, " model.visual.* tensors (the vision tower; text only)");
  if (mtp > 0) log_info(ck.dir(), ": skipping ", mtp, " mtp.* tensors (the MTP head: staged only for --speculative-config method mtp)");
}

}  // namespace pypto
