#include "model/test_model_eagle3.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/test_model.h"

namespace pypto {

namespace {

void put(uint8_t* dst, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::F32: reinterpret_cast<float*>(dst)[i] = v; break;
    case DType::F16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
    default: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
  }
}

}  // namespace

void check_eagle3_test_head_kind(const std::string& kind, bool dense_float) {
  if (kind != "random" && kind != "oracle" && kind != "oracle-half")
    fail("--eagle3 must be random, oracle or oracle-half, got \"", kind, "\"");
  if (!dense_float)
    fail("--eagle3 writes a head for an unquantized Qwen3 or Qwen3-MoE preset (tiny, qwen3-0.6b, tiny-moe ...) only");
}

void make_eagle3_test_head(const std::string& target_dir, const std::string& out_dir, const std::string& kind,
                           uint64_t seed) {
  namespace fs = std::filesystem;
  using test_model_detail::fill_uniform;
  using test_model_detail::name_seed;
  check_eagle3_test_head_kind(kind, true);
  const ModelConfig c = read_model_config(target_dir);
  const std::string target_file = target_dir + "/model.safetensors";
  if (!fs::exists(target_file)) fail("an EAGLE-3 test head needs the target in one file (", target_file, ")");
  const std::shared_ptr<SafetensorsFile> target(SafetensorsFile::open(target_file).release());
  const SafetensorInfo* emb = target->find("model.embed_tokens.weight");
  if (!emb) fail(target_file, ": no model.embed_tokens.weight");
  const DType dt = emb->dtype;
  const bool oracle = kind != "random", half = kind != "oracle";
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, Vd = half ? V / 2 : V;
  const int32_t hd = c.head_dim;
  // The oracle's heads cover the hidden channels one to one (q = k = v channels = H).
  if (oracle && H % hd != 0) fail("the oracle EAGLE-3 head needs hidden_size divisible by head_dim");
  const int32_t nh = oracle ? int32_t(H / hd) : c.num_attention_heads;
  const int32_t nkv = oracle ? nh : c.num_key_value_heads;
  const int64_t q = int64_t(nh) * hd, kv = int64_t(nkv) * hd;
  const float sqrt3 = std::sqrt(3.0f), gamma_a = 0.2f;
  std::vector<SafetensorWrite> t;
  auto random = [&](const std::string& name, Shape shape, float center, float a) {
    const int64_t n = shape_numel(shape);
    const uint64_t s = name_seed(seed ^ 0xe3e3e3e3ull, name);
    t.push_back({name, dt, shape, [=](uint8_t* dst) { fill_uniform(dst, dt, n, s, center, a); }});
  };
  auto proj = [&](const std::string& name, int64_t out, int64_t in) {
    random(name, {out, in}, 0.0f, sqrt3 / std::sqrt(float(in)));
  };
  // value · [I | 0]: output channel r reads input channel r (of `in` inputs).
  auto eye = [&](const std::string& name, int64_t out, int64_t in, float value) {
    t.push_back({name, dt, {out, in}, [=](uint8_t* dst) {
                   std::memset(dst, 0, size_t(out * in) * dtype_size(dt));
                   for (int64_t r = 0; r < out; ++r) put(dst, dt, r * in + r, value);
                 }});
  };
  auto constant = [&](const std::string& name, Shape shape, float value) {
    random(name, shape, value, 0.0f);
  };
  // Rows of the target's tensor `from` ([rows, H]): every row, or the even ones.
  auto copy_rows = [&](const std::string& name, const std::string& from, int64_t rows, bool even) {
    const SafetensorInfo* src = target->find(from);
    if (!src || src->dtype != dt || src->shape != Shape{even ? 2 * rows : rows, H})
      fail(target_file, ": tensor ", from, " is missing or not [", even ? 2 * rows : rows, ", ", H, "] ", dtype_name(dt));
    const size_t row_bytes = size_t(H) * dtype_size(dt);
    t.push_back({name, dt, {rows, H}, [=](uint8_t* dst) {
                   const uint8_t* p = target->data(*src);
                   for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * row_bytes, p + (even ? 2 * r : r) * row_bytes, row_bytes);
                 }});
  };
  const std::string L = "midlayer.";
  if (oracle) {
    eye(L + "self_attn.q_proj.weight", q, 2 * H, 32.0f);
    eye(L + "self_attn.k_proj.weight", kv, 2 * H, 32.0f);
    eye(L + "self_attn.v_proj.weight", kv, 2 * H, 1.0f);
    eye(L + "self_attn.o_proj.weight", H, q, 1.0f);
    proj(L + "mlp.gate_proj.weight", I, H);
    proj(L + "mlp.up_proj.weight", I, H);
    constant(L + "mlp.down_proj.weight", {H, I}, 0.0f);
    constant(L + "input_layernorm.weight", {H}, 1.0f);
    constant(L + "hidden_norm.weight", {H}, 0.0f);
    constant(L + "post_attention_layernorm.weight", {H}, 1.0f);
    constant("fc.weight", {H, 3 * H}, 0.0f);
    const SafetensorInfo* norm = target->find("model.norm.weight");
    if (!norm || norm->dtype != dt) fail(target_file, ": tensor model.norm.weight is missing or not ", dtype_name(dt));
    t.push_back({"norm.weight", dt, {H}, [=](uint8_t* dst) {
                   std::memcpy(dst, target->data(*norm), size_t(H) * dtype_size(dt));
                 }});
    copy_rows("lm_head.weight", "lm_head.weight", Vd, half);
  } else {
    proj(L + "self_attn.q_proj.weight", q, 2 * H);
    proj(L + "self_attn.k_proj.weight", kv, 2 * H);
    proj(L + "self_attn.v_proj.weight", kv, 2 * H);
    proj(L + "self_attn.o_proj.weight", H, q);
    proj(L + "mlp.gate_proj.weight", I, H);
    proj(L + "mlp.up_proj.weight", I, H);
    proj(L + "mlp.down_proj.weight", H, I);
    random(L + "input_layernorm.weight", {H}, 1.0f, gamma_a);
    random(L + "hidden_norm.weight", {H}, 1.0f, gamma_a);
    random(L + "post_attention_layernorm.weight", {H}, 1.0f, gamma_a);
    proj("fc.weight", H, 3 * H);
    random("norm.weight", {H}, 1.0f, gamma_a);
    random("lm_head.weight", {Vd, H}, 0.0f, 2.0f * sqrt3 / std::sqrt(float(H)));
    random("embed_tokens.weight", {V, H}, 0.0f, 2.0f * sqrt3 / std::sqrt(float(H)));
  }
  // d2t: target id = draft id + d2t[draft id] (2i for the even-id vocabularies).
  t.push_back({"d2t", DType::I64, {Vd}, [=](uint8_t* dst) {
                 for (int64_t i = 0; i < Vd; ++i) reinterpret_cast<int64_t*>(dst)[i] = half ? i : 0;
               }});
  fs::create_directories(out_dir);
  write_safetensors(out_dir + "/model.safetensors", t);
  nlohmann::ordered_json cfg = {
      {"architectures", {"LlamaForCausalLMEagle3"}},
      {"model_type", "llama"},
      {"hidden_size", H},
      {"intermediate_size", I},
      {"num_hidden_layers", 1},
      {"num_attention_heads", nh},
      {"num_key_value_heads", nkv},
      {"head_dim", hd},
      {"hidden_act", "silu"},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"vocab_size", V},
      {"draft_vocab_size", Vd},
      {"tie_word_embeddings", false},
      {"torch_dtype", dt == DType::F32 ? "float32" : dt == DType::F16 ? "float16" : "bfloat16"},
  };
  if (oracle) cfg["norm_before_residual"] = true;
  else cfg["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {0, c.num_hidden_layers / 2, c.num_hidden_layers - 1}},
                              {"use_aux_hidden_state", true}};
  std::ofstream(out_dir + "/config.json") << cfg.dump(2) << "\n";
}

}  // namespace pypto
