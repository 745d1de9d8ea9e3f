#include "model/eagle3_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "core/error.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/mtp_head.h"

namespace pypto {

namespace {

// The head's tensors by canonical name (midlayer.* → layers.0.*, model. prefix dropped).
struct Tensors {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorInfo*>> by_name;
};

std::string canonical(std::string name) {
  if (name.rfind("model.", 0) == 0) name = name.substr(6);
  if (name.rfind("midlayer.", 0) == 0) name = "layers.0." + name.substr(9);
  return name;
}

Tensors open_tensors(const std::string& dir) {
  namespace fs = std::filesystem;
  Tensors t;
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".safetensors") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  if (paths.empty())
    fail("EAGLE-3 head ", dir, " has no .safetensors file",
         fs::exists(dir + "/pytorch_model.bin") ? " (pytorch_model.bin is not read: convert it to safetensors)" : "");
  for (const std::string& p : paths) {
    t.files.push_back(SafetensorsFile::open(p));
    for (const SafetensorInfo& i : t.files.back()->tensors()) {
      const std::string name = canonical(i.name);
      if (!t.by_name.emplace(name, std::make_pair(t.files.back().get(), &i)).second)
        fail(p, ": tensor '", i.name, "' appears twice in the EAGLE-3 head (as ", name, ")");
    }
  }
  return t;
}

}  // namespace

std::shared_ptr<const Eagle3Weights> load_eagle3_weights(const Eagle3Config& c, const ModelConfig& target,
                                                         Backend& backend) {
  check_eagle3_target(c, target);
  auto w = std::make_shared<Eagle3Weights>();
  w->config = c;
  w->aux_layers = eagle3_aux_layers(c, target);
  const Tensors t = open_tensors(c.dir);
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = c.q_size(), kv = c.kv_size();
  const int64_t Vd = c.draft_vocab_size, V = c.vocab_size;
  struct Expected {
    const char* name;
    Shape shape;
    bool optional = false;
  };
  const std::vector<Expected> expected = {
      {"layers.0.self_attn.q_proj.weight", {q, 2 * H}},
      {"layers.0.self_attn.k_proj.weight", {kv, 2 * H}},
      {"layers.0.self_attn.v_proj.weight", {kv, 2 * H}},
      {"layers.0.self_attn.o_proj.weight", {H, q}},
      {"layers.0.mlp.gate_proj.weight", {I, H}},
      {"layers.0.mlp.up_proj.weight", {I, H}},
      {"layers.0.mlp.down_proj.weight", {H, I}},
      {"layers.0.input_layernorm.weight", {H}},
      {"layers.0.hidden_norm.weight", {H}},
      {"layers.0.post_attention_layernorm.weight", {H}},
      {"fc.weight", {H, 3 * c.target_hidden_size}},
      {"norm.weight", {H}},
      {"lm_head.weight", {Vd, H}},
      {"d2t", {Vd}, true},
      {"t2d", {V}, true},  // the target → draft mask: not needed to draft, never read
      {"embed_tokens.weight", {V, H}, true},
  };
  for (const auto& [name, ref] : t.by_name) {
    const auto e = std::find_if(expected.begin(), expected.end(), [&](const Expected& x) { return name == x.name; });
    if (e == expected.end())
      fail(ref.first->path(), ": tensor '", ref.second->name, "' is not part of an EAGLE-3 head (expected: midlayer.* ",
           "self_attn q/k/v/o_proj, mlp gate/up/down_proj, input_layernorm, hidden_norm, post_attention_layernorm; fc, ",
           "norm, lm_head, d2t, t2d, embed_tokens)");
  }
  auto find = [&](const std::string& name) -> const SafetensorInfo* {
    auto it = t.by_name.find(name);
    return it == t.by_name.end() ? nullptr : it->second.second;
  };
  auto file_of = [&](const std::string& name) { return t.by_name.at(name).first; };
  for (const Expected& e : expected) {
    const SafetensorInfo* i = find(e.name);
    if (!i) {
      if (!e.optional) fail("EAGLE-3 head ", c.dir, ": tensor '", e.name, "' (midlayer.* for layers.0.*) is missing");
      continue;
    }
    if (i->shape != e.shape)
      fail(file_of(e.name)->path(), ": tensor '", i->name, "' has shape ", shape_str(i->shape), ", expected ",
           shape_str(e.shape), " (from config.json)");
    const bool ints = std::string(e.name) == "d2t";
    const bool mask = std::string(e.name) == "t2d";
    if (ints && i->dtype != DType::I64 && i->dtype != DType::I32)
      fail(file_of(e.name)->path(), ": tensor '", i->name, "' has dtype ", dtype_name(i->dtype), ", expected I64 (or I32)");
    if (!ints && !mask && i->dtype != DType::BF16 && i->dtype != DType::F16 && i->dtype != DType::F32)
      fail(file_of(e.name)->path(), ": tensor '", i->name, "' has dtype ", dtype_name(i->dtype),
           ", expected BF16, F16 or F32 (quantized EAGLE-3 heads are not supported)");
  }
  if (Vd < V && !find("d2t"))
    fail("EAGLE-3 head ", c.dir, ": draft_vocab_size ", Vd, " < vocab_size ", V,
         " but tensor 'd2t' (draft id → target id offsets) is missing");

  // Linear weights, several checkpoint tensors stacked by rows (q | k | v, gate | up), packed.
  auto linear = [&](std::vector<std::string> names) {
    const SafetensorInfo* first = find(names[0]);
    const DType dt = first->dtype;
    const int64_t k_in = first->shape[1];
    int64_t n = 0;
    for (const std::string& nm : names) {
      if (find(nm)->dtype != dt)
        fail(file_of(nm)->path(), ": tensor '", find(nm)->name, "' has dtype ", dtype_name(find(nm)->dtype), ", ",
             find(names[0])->name, " ", dtype_name(dt), ": the fused projection needs one dtype");
      n += find(nm)->shape[0];
    }
    std::vector<uint8_t> src;
    src.reserve(size_t(n * k_in) * dtype_size(dt));
    for (const std::string& nm : names) {
      const uint8_t* p = file_of(nm)->data(*find(nm));
      src.insert(src.end(), p, p + (find(nm)->end - find(nm)->begin));
    }
    AlignedBuffer buf(backend.packed_weight_bytes(dt, n, k_in));
    backend.pack_weight(src.data(), dt, n, k_in, buf.data());
    LinearWeight lw;
    lw.data = buf.data();
    lw.dtype = dt;
    lw.n_out = n;
    lw.k_in = k_in;
    w->bytes += buf.size();
    w->buffers.push_back(std::move(buf));
    return lw;
  };
  auto vec = [&](const std::string& name) {
    const SafetensorInfo* i = find(name);
    std::vector<float> v(size_t(shape_numel(i->shape)));
    const uint8_t* p = file_of(name)->data(*i);
    for (size_t j = 0; j < v.size(); ++j) v[j] = load_as_f32(p, i->dtype, j);
    w->bytes += v.size() * sizeof(float);
    return v;
  };
  const std::string L = "layers.0.";
  w->qkv = linear({L + "self_attn.q_proj.weight", L + "self_attn.k_proj.weight", L + "self_attn.v_proj.weight"});
  w->kv = linear({L + "self_attn.k_proj.weight", L + "self_attn.v_proj.weight"});
  w->o_proj = linear({L + "self_attn.o_proj.weight"});
  w->gate_up = linear({L + "mlp.gate_proj.weight", L + "mlp.up_proj.weight"});
  w->down = linear({L + "mlp.down_proj.weight"});
  w->fc = linear({"fc.weight"});
  w->lm_head = linear({"lm_head.weight"});
  w->input_norm = vec(L + "input_layernorm.weight");
  w->hidden_norm = vec(L + "hidden_norm.weight");
  w->post_norm = vec(L + "post_attention_layernorm.weight");
  w->norm = vec("norm.weight");

  // d2t: target id = draft id + d2t[draft id] (absent: the identity, draft vocabulary = target's).
  w->draft_to_target.resize(size_t(Vd));
  std::vector<int32_t> owner(size_t(V), -1);
  const SafetensorInfo* d2t = find("d2t");
  for (int64_t i = 0; i < Vd; ++i) {
    int64_t off = 0;
    if (d2t) {
      const uint8_t* p = file_of("d2t")->data(*d2t);
      off = d2t->dtype == DType::I64 ? reinterpret_cast<const int64_t*>(p)[i] : reinterpret_cast<const int32_t*>(p)[i];
    }
    const int64_t tid = i + off;
    if (tid < 0 || tid >= V)
      fail(file_of("d2t")->path(), ": tensor 'd2t' maps draft id ", i, " to target id ", tid, ", outside [0, ", V, ")");
    if (owner[size_t(tid)] >= 0)
      fail(file_of("d2t")->path(), ": tensor 'd2t' maps draft ids ", owner[size_t(tid)], " and ", i, " to target id ", tid);
    owner[size_t(tid)] = int32_t(i);
    w->draft_to_target[size_t(i)] = int32_t(tid);
  }
  if (const SafetensorInfo* e = find("embed_tokens.weight")) {
    AlignedBuffer buf(e->end - e->begin);
    std::memcpy(buf.data(), file_of("embed_tokens.weight")->data(*e), buf.size());
    w->own_embed = true;
    w->embed_dtype = e->dtype;
    w->embed = buf.data();
    w->bytes += buf.size();
    w->buffers.push_back(std::move(buf));
  }
  return w;
}

Eagle3Head::Eagle3Head(std::shared_ptr<const Eagle3Weights> weights, const Qwen3Weights& target, Backend& backend)
    : Eagle3Head(std::move(weights), EmbeddingLookup{}, backend) {
  PYPTO_ASSERT(target.tp_size == 1, "the EAGLE-3 head reads a one-rank target's embedding here");
  PYPTO_ASSERT(w_->own_embed || target.has_embed, "the EAGLE-3 head without embed_tokens needs the target's");
  const Qwen3Weights* t = &target;
  target_embedding_ = [this, t](const int32_t* ids, int64_t T, float* e) {
    MtpHead::lookup_embedding(*t, backend_, nullptr, ids, T, e, local_ids_);
  };
}

Eagle3Head::Eagle3Head(std::shared_ptr<const Eagle3Weights> weights, EmbeddingLookup target_embedding, Backend& backend)
    : w_(std::move(weights)),
      target_embedding_(std::move(target_embedding)),
      backend_(backend),
      rope_(RopeSpec::plain(w_->config.rope_theta)) {}

KvCacheSpec Eagle3Head::kv_cache_spec(int64_t num_blocks, int32_t block_size, DType dtype) const {
  KvCacheSpec s;
  s.num_layers = 1;
  s.num_blocks = num_blocks;
  s.block_size = block_size;
  s.n_kv_heads = w_->config.num_key_value_heads;
  s.head_dim = w_->config.head_dim;
  s.dtype = dtype;
  return s;
}

void Eagle3Head::fuse(const float* aux, int64_t T, float* out) {
  if (T == 0) return;
  fused_rows_ += T;
  backend_.linear(aux, T, w_->fc, nullptr, out);  // [T, H] = [T, 3H] · fcᵀ
  backend_.synchronize();
}

void Eagle3Head::input_rows(const ForwardBatch& batch, const float* hidden, const KvCache& cache) {
  const Eagle3Config& c = w_->config;
  const int64_t T = batch.num_tokens(), H = c.hidden_size, V = c.vocab_size;
  PYPTO_ASSERT(cache.num_layers() == 1 && cache.spec().n_kv_heads == c.num_key_value_heads &&
                   cache.spec().head_dim == c.head_dim,
               "the EAGLE-3 head's KV cache shape");
  batch.validate(cache.num_blocks(), cache.block_size());
  for (int64_t t = 0; t < T; ++t)
    if (batch.token_ids[size_t(t)] < 0 || batch.token_ids[size_t(t)] >= V)
      fail("token id ", batch.token_ids[size_t(t)], " is outside the vocabulary [0, ", V, ")");
  Backend& be = backend_;
  const float eps = float(c.rms_norm_eps);
  e_.resize(size_t(T * H));
  g_.resize(size_t(T * H));
  cat_.resize(size_t(T * 2 * H));
  // e [T, H]: the embedding rows of the tokens (the head's table or the target's).
  if (w_->own_embed) be.embedding(batch.token_ids.data(), T, w_->embed, w_->embed_dtype, H, e_.data());
  else {
    PYPTO_ASSERT(target_embedding_ != nullptr, "the EAGLE-3 head without embed_tokens needs the target's embedding");
    target_embedding_(batch.token_ids.data(), T, e_.data());
  }
  be.rms_norm(e_.data(), w_->input_norm.data(), T, H, eps, e_.data());
  be.rms_norm(hidden, w_->hidden_norm.data(), T, H, eps, g_.data());
  be.synchronize();
  // cat [T, 2H] = [e | g].
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(cat_.data() + t * 2 * H, e_.data() + t * H, sizeof(float) * size_t(H));
    std::memcpy(cat_.data() + t * 2 * H + H, g_.data() + t * H, sizeof(float) * size_t(H));
  }
}

void Eagle3Head::store_kv(const ForwardBatch& batch, const float* hidden, KvCache& cache) {
  const Eagle3Config& c = w_->config;
  const int64_t T = batch.num_tokens(), kv = c.kv_size();
  if (T == 0) return;
  PYPTO_ASSERT(batch.num_logits() == 0, "store_kv computes no logits (", batch.num_logits(), " rows asked)");
  input_rows(batch, hidden, cache);
  Backend& be = backend_;
  // As forward() computes them: the k | v rows (the same packed rows as in qkv, batch-invariant
  // kernels), RoPE on k at the rows' positions.
  qkv_.resize(size_t(T * 2 * kv));
  k_.resize(size_t(T * kv));
  v_.resize(size_t(T * kv));
  be.linear(cat_.data(), T, w_->kv, nullptr, qkv_.data());  // [T, k | v]
  be.synchronize();
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(k_.data() + t * kv, qkv_.data() + t * 2 * kv, sizeof(float) * size_t(kv));
    std::memcpy(v_.data() + t * kv, qkv_.data() + t * 2 * kv + kv, sizeof(float) * size_t(kv));
  }
  be.rope(k_.data(), batch.positions.data(), T, c.num_key_value_heads, c.head_dim, rope_);
  be.kv_store(k_.data(), v_.data(), batch.slot_mapping.data(), T, cache.layer(0));
  be.synchronize();
}

void Eagle3Head::forward(const ForwardBatch& batch, const float* hidden, KvCache& cache, float* logits_out,
                         float* prenorm) {
  const Eagle3Config& c = w_->config;
  const int64_t T = batch.num_tokens(), H = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.q_size(), kv = c.kv_size(), qkv = q + 2 * kv, V = c.vocab_size, Vd = c.draft_vocab_size;
  if (T == 0) return;
  input_rows(batch, hidden, cache);
  Backend& be = backend_;
  const float eps = float(c.rms_norm_eps);
  for (auto* v : {&r_, &tmp_}) v->resize(size_t(T * H));
  qkv_.resize(size_t(T * qkv));
  q_.resize(size_t(T * q));
  attn_.resize(size_t(T * q));
  k_.resize(size_t(T * kv));
  v_.resize(size_t(T * kv));
  gate_up_.resize(size_t(T * 2 * I));
  act_.resize(size_t(T * I));
  // r [T, H]: the residual stream.
  std::memcpy(r_.data(), c.norm_before_residual ? g_.data() : hidden, sizeof(float) * size_t(T * H));

  // Attention: qkv [T, q | kv | kv] → q [T, nh, hd], k, v [T, nkv, hd] (RoPE on q, k), paged.
  be.linear(cat_.data(), T, w_->qkv, nullptr, qkv_.data());
  be.synchronize();
  for (int64_t t = 0; t < T; ++t) {
    const float* row = qkv_.data() + t * qkv;
    std::memcpy(q_.data() + t * q, row, sizeof(float) * size_t(q));
    std::memcpy(k_.data() + t * kv, row + q, sizeof(float) * size_t(kv));
    std::memcpy(v_.data() + t * kv, row + q + kv, sizeof(float) * size_t(kv));
  }
  be.rope(q_.data(), batch.positions.data(), T, c.num_attention_heads, c.head_dim, rope_);
  be.rope(k_.data(), batch.positions.data(), T, c.num_key_value_heads, c.head_dim, rope_);
  const KvCacheLayer& layer = cache.layer(0);
  be.kv_store(k_.data(), v_.data(), batch.slot_mapping.data(), T, layer);
  be.paged_attention(q_.data(), T, c.num_attention_heads, layer, batch.attention(), attn_.data());
  be.linear(attn_.data(), T, w_->o_proj, nullptr, tmp_.data());  // [T, H]
  be.add_inplace(r_.data(), tmp_.data(), T * H);

  // MLP.
  be.rms_norm(r_.data(), w_->post_norm.data(), T, H, eps, tmp_.data());
  be.linear(tmp_.data(), T, w_->gate_up, nullptr, gate_up_.data());
  be.silu_mul(gate_up_.data(), T, I, act_.data());
  be.linear(act_.data(), T, w_->down, nullptr, tmp_.data());
  be.add_inplace(r_.data(), tmp_.data(), T * H);
  be.synchronize();
  if (prenorm) std::memcpy(prenorm, r_.data(), sizeof(float) * size_t(T * H));

  // Logits of the wanted rows, scattered from the draft vocabulary into the target's.
  const int64_t n = batch.num_logits();
  if (n == 0) return;
  rows_.resize(size_t(n * H));
  draft_logits_.resize(size_t(n * Vd));
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(rows_.data() + i * H, r_.data() + int64_t(batch.logits_indices[size_t(i)]) * H, sizeof(float) * size_t(H));
  be.rms_norm(rows_.data(), w_->norm.data(), n, H, eps, rows_.data());
  be.linear(rows_.data(), n, w_->lm_head, nullptr, draft_logits_.data());
  be.synchronize();
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    float* out = logits_out + i * V;
    if (Vd < V) std::fill(out, out + V, ninf);
    const float* d = draft_logits_.data() + i * Vd;
    for (int64_t j = 0; j < Vd; ++j) out[w_->draft_to_target[size_t(j)]] = d[j];
  }
}

}  // namespace pypto
