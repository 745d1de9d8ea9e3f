// pypto-serving inspect: what a checkpoint directory holds and what serving it will need.
#include <CLI/CLI.hpp>
#include <map>

#include "cli/commands.h"
#include "cli/npy_writer.h"
#include "core/error.h"
#include "core/memory.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/quantized_source.h"
#include "model/gdn_state.h"
#include "model/weight_staging.h"

namespace pypto::cli {

namespace {

// The projection as the staging decoders see it (model/quantized_source.h), written as .npy.
int dump_dequantized(const Checkpoint& ck, const std::string& proj, const std::string& out) {
  const QuantMethod m = ck.config().quant.method;
  std::vector<float> w;
  int64_t n = 0, k = 0;
  if (m == QuantMethod::Fp8) {
    Fp8Source s = read_fp8_projection(ck, proj);
    n = s.n, k = s.k;
    w.resize(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; r++)
      for (int64_t c = 0; c < k; c++) w[static_cast<size_t>(r * k + c)] = s.at(r, c);
  } else if (m == QuantMethod::Awq || m == QuantMethod::Gptq) {
    AwqSource s = read_int4_projection(ck, proj);
    n = s.n, k = s.k;
    w.resize(static_cast<size_t>(n * k));
    for (int64_t r = 0; r < n; r++)
      for (int64_t c = 0; c < k; c++) w[static_cast<size_t>(r * k + c)] = s.at(r, c);
  } else {
    fail("--dequantize: ", ck.dir(), " is not a pre-quantized checkpoint (config.json has no quantization_config)");
  }
  write_npy_f32(out, w.data(), n, k);
  std::printf("wrote %s: %s %s dequantized, float32 [%lld, %lld]\n", out.c_str(), proj.c_str(),
              quant_method_name(m), static_cast<long long>(n), static_cast<long long>(k));
  return 0;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  CLI::App app{"Print a checkpoint's config summary, tensor count, sizes, dtypes and the memory needed."};
  std::string model, dequantize, out;
  app.add_option("--model", model, "checkpoint directory")->required();
  app.add_option("--dequantize", dequantize,
                 "instead of the summary, write one projection of a pre-quantized (fp8 / awq / gptq) checkpoint, decoded to "
                 "float32 W[out, in], e.g. model.layers.0.mlp.down_proj");
  app.add_option("--out", out, "the .npy file --dequantize writes");
  CLI11_PARSE(app, argc, argv);

  auto ck = Checkpoint::open(model);
  if (!dequantize.empty() || !out.empty()) {
    if (dequantize.empty() || out.empty()) fail("--dequantize PROJECTION and --out FILE.npy go together");
    return dump_dequantized(*ck, dequantize, out);
  }
  const ModelConfig& c = ck->config();
  char b1[32], b2[32], b3[32], b4[32];
  std::printf("model:            %s\n", ck->dir().c_str());
  std::printf("architecture:     %s\n", c.architecture.c_str());
  std::printf("layers:           %d\n", c.num_hidden_layers);
  std::printf("hidden_size:      %lld\n", static_cast<long long>(c.hidden_size));
  std::printf("intermediate:     %lld\n", static_cast<long long>(c.intermediate_size));
  std::printf("heads:            %d query, %d key/value, head_dim %d\n", c.num_attention_heads, c.num_key_value_heads,
              c.head_dim);
  if (c.num_experts > 0) {
    int sparse = 0;
    for (int32_t i = 0; i < c.num_hidden_layers; ++i) sparse += c.sparse_layer(i);
    std::printf("experts:          %d routed, top-%d, width %lld, %s; sparse layers %d of %d\n", c.num_experts,
                c.num_experts_per_tok, static_cast<long long>(c.moe_intermediate_size),
                c.norm_topk_prob ? "renormalised" : "not renormalised", sparse, c.num_hidden_layers);
  }
  if (c.hybrid()) {  // Qwen3.5 / Qwen3.6: Gated DeltaNet layers beside gated full attention
    const int32_t full = c.num_full_attention_layers();
    std::printf("hybrid:           %d Gated DeltaNet + %d full-attention layers; GDN %d key / %d value heads, d_k %d, "
                "d_v %d, conv %d; rotary %d of head_dim %d; state %s per sequence (f32)\n",
                c.num_hidden_layers - full, full, c.linear_num_key_heads, c.linear_num_value_heads,
                c.linear_key_head_dim, c.linear_value_head_dim, c.linear_conv_kernel_dim, c.rotary_dim, c.head_dim,
                format_bytes(GdnStatePool::bytes_per_slot(c, c.num_hidden_layers - full), b1, sizeof b1));
    if (c.shared_expert_intermediate_size > 0)
      std::printf("shared expert:    width %lld, sigmoid-gated\n", static_cast<long long>(c.shared_expert_intermediate_size));
  }
  std::printf("vocab_size:       %lld\n", static_cast<long long>(c.vocab_size));
  std::printf("rope_theta:       %g\n", c.rope_theta);
  std::printf("rms_norm_eps:     %g\n", c.rms_norm_eps);
  std::printf("max_positions:    %lld\n", static_cast<long long>(c.max_position_embeddings));
  std::printf("tied embeddings:  %s\n", c.tie_word_embeddings ? "yes" : "no");
  std::printf("q/k/v bias:       %s\n", c.attention_bias ? "yes" : "no");
  std::printf("torch_dtype:      %s\n", dtype_name(c.torch_dtype));
  if (c.quant.method == QuantMethod::Fp8)
    std::printf("quantization:     fp8, E4M3 projections with a scale per %d x %d tile\n", c.quant.fp8_block_n,
                c.quant.fp8_block_k);
  if (c.quant.method == QuantMethod::Awq)
    std::printf("quantization:     awq, 4-bit projections with a scale and zero point per %d inputs\n",
                c.quant.awq_group);
  if (c.quant.method == QuantMethod::Gptq)
    std::printf("quantization:     gptq, 4-bit projections with a scale and zero point per %d inputs (%s, %s zeros)\n",
                c.quant.gptq_group, c.quant.gptq_sym ? "symmetric" : "asymmetric",
                c.quant.gptq_v1_zeros ? "v1" : "v2");
  std::string eos;
  for (int32_t e : c.eos_token_ids) eos += (eos.empty() ? "" : ", ") + std::to_string(e);
  std::printf("eos ids:          %s\n", eos.empty() ? "(none)" : eos.c_str());

  // Tensors by dtype, then a check that they match the config (same check as loading).
  std::map<std::string, std::pair<size_t, size_t>> by_dtype;  // dtype -> (count, bytes)
  size_t n_tensors = 0;
  for (const auto& name : ck->tensor_names()) {
    const TensorRef& r = ck->get(name);
    auto& e = by_dtype[dtype_name(r.info->dtype)];
    e.first++;
    e.second += r.info->end - r.info->begin;
    n_tensors++;
  }
  std::printf("files:            %zu safetensors file%s\n", ck->files().size(), ck->files().size() == 1 ? "" : "s");
  std::printf("tensors:          %zu, %s\n", n_tensors, format_bytes(ck->total_tensor_bytes(), b1, sizeof b1));
  for (const auto& [dt, e] : by_dtype)
    std::printf("  %-7s         %zu tensors, %s\n", dt.c_str(), e.first, format_bytes(e.second, b1, sizeof b1));
  bool has_qk = ck->find("model.layers.0.self_attn.q_norm.weight") != nullptr;
  if (!c.hybrid() && c.qk_norm && !has_qk) std::printf("q_norm/k_norm:    absent (loaded as ones)\n");
  validate_qwen3_checkpoint(*ck);
  std::printf("config match:     ok (every tensor present with the expected shape and dtype)\n");

  // Memory: weights as staged on this CPU at the default precision (the same plan as staging:
  // f32 norms, fused projections in the backend's layout, a tied table once), and KV cache per
  // token for both cache dtypes.
  const int64_t L = c.num_hidden_layers;
  auto backend = make_cpu_backend(1);
  const size_t staged = staged_slab_bytes(*ck, *backend, 0, 1);
  const size_t per_layer = L > 0 ? (staged - staged_slab_bytes(*ck, *backend, 0, 1, 0)) / size_t(L) : 0;
  const size_t ck_bytes = ck->total_tensor_bytes();
  const int64_t kv_layers = c.num_full_attention_layers();  // a hybrid caches its full-attention layers only
  size_t kv_tok_bf16 = 2 * kv_layers * c.kv_size() * 2, kv_tok_f32 = 2 * kv_layers * c.kv_size() * 4;
  std::printf("memory needed:    weights %s (per layer %s); KV cache %s/token bf16, %s/token fp32\n",
              format_bytes(staged, b1, sizeof b1), format_bytes(per_layer, b2, sizeof b2),
              format_bytes(kv_tok_bf16, b3, sizeof b3), format_bytes(kv_tok_f32, b4, sizeof b4));
  std::printf("staged bytes:     %zu on %s (checkpoint tensors %zu, %+.2f%%)\n", staged, backend->name(), ck_bytes,
              ck_bytes ? 100.0 * (double(staged) - double(ck_bytes)) / double(ck_bytes) : 0.0);
  std::printf("                  at max_positions, one sequence's KV: %s (bf16)\n",
              format_bytes(kv_tok_bf16 * c.max_position_embeddings, b1, sizeof b1));
  return 0;
}

}  // namespace pypto::cli
