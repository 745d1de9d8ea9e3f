#pragma once
// make-test-model presets of the Qwen3.5 / Qwen3.6 hybrids (Gated DeltaNet + gated attention):
// random weights with the published tensor names, shapes and dtypes (bf16, A_log in f32), in
// the vision-language wrapper layout Qwen publishes (config.json with text_config, tensors under
// model.language_model.*, one small model.visual.* tensor standing in for the vision tower) or,
// with TestModelOptions::text_only, the Qwen3_5(Moe)ForCausalLM layout. MoE experts are written
// fused as Qwen3.5 stores them: mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
// [E, H, I]. The MTP head (mtp.*) is written as the published checkpoints carry it: its own gated
// attention layer with a dense FFN, or for MoE per-expert 2-D experts.{e}.* tensors and a shared
// expert (TestModelOptions::mtp: random, an always-accepting "oracle" checkpoint or its variants).
//
// Qwen3-Next presets (qwen3-next-80b-a3b, tiny-next, tiny-next-dense) write Qwen3NextForCausalLM as published:
// config.json with Qwen3NextConfig's keys (full_attention_interval, top-level rope_theta and
// partial_rotary_factor, norm_topk_prob, decoder_sparse_step, mlp_only_layers), the GDN input
// projections fused per key head (in_proj_qkvz, in_proj_ba; model/qwen3_next_layout.h), per-expert
// tensors, Qwen3's 151,936-row vocabulary and Qwen3's tokenizer and chat template. Their MTP block
// is the same as Qwen3.5-MoE's (mtp.*, per-expert 2-D experts), as vLLM's Qwen3NextMTP loads it;
// config.json declares no MTP key, as Qwen3NextConfig has none (vLLM reads an optional
// num_nextn_predict_layers, default 1). tiny-next-dense has dense layers (decoder_sparse_step 2,
// mlp_only_layers [3]): those layers, and the MTP layer (the rule at layer 0), write
// mlp.{gate,up,down}_proj instead of experts.
//
// The tokenizer files are Qwen3's (the Qwen3.5 tokenizer is not obtainable here); the vocabulary
// size and the embedding / lm_head shapes are the real models' 248,320 rows, of which the
// tokenizer uses the first 151,669.
#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/test_model.h"

namespace pypto {

std::vector<std::string> hybrid_test_model_presets();  // tiny-hybrid, tiny-hybrid-moe, qwen3.5-0.8b, ...
bool is_hybrid_test_model_preset(const std::string& name);
ModelConfig hybrid_test_model_config(const std::string& preset);
void make_hybrid_test_model(const TestModelOptions& opt);

}  // namespace pypto
