#include "model/weight_staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/progress.h"
#include "model/compile_cache.h"

namespace pypto {
namespace {

std::string layer_name(int i, const char* suffix) { return str_cat("model.layers.", i, ".", suffix); }

// The tensors one layer must hold, with expected shapes; `optional` ones may be absent.
struct ExpectedTensor {
  std::string name;
  Shape shape;
  bool matrix;    // a projection: must have the checkpoint's weight dtype
  bool optional;  // q_norm / k_norm
};

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> v;
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  v.push_back({"model.embed_tokens.weight", {c.vocab_size, H}, true, false});
  v.push_back({"model.norm.weight", {H}, false, false});
  if (!c.tie_word_embeddings) v.push_back({"lm_head.weight", {c.vocab_size, H}, true, false});
  for (int i = 0; i < c.num_hidden_layers; i++) {
    v.push_back({layer_name(i, "input_layernorm.weight"), {H}, false, false});
    v.push_back({layer_name(i, "self_attn.q_proj.weight"), {c.q_size(), H}, true, false});
    v.push_back({layer_name(i, "self_attn.k_proj.weight"), {c.kv_size(), H}, true, false});
    v.push_back({layer_name(i, "self_attn.v_proj.weight"), {c.kv_size(), H}, true, false});
    if (c.attention_bias) {
      v.push_back({layer_name(i, "self_attn.q_proj.bias"), {c.q_size()}, false, false});
      v.push_back({layer_name(i, "self_attn.k_proj.bias"), {c.kv_size()}, false, false});
      v.push_back({layer_name(i, "self_attn.v_proj.bias"), {c.kv_size()}, false, false});
    }
    if (c.qk_norm) {
      v.push_back({layer_name(i, "self_attn.q_norm.weight"), {hd}, false, true});
      v.push_back({layer_name(i, "self_attn.k_norm.weight"), {hd}, false, true});
    }
    v.push_back({layer_name(i, "self_attn.o_proj.weight"), {H, c.q_size()}, true, false});
    v.push_back({layer_name(i, "post_attention_layernorm.weight"), {H}, false, false});
    v.push_back({layer_name(i, "mlp.gate_proj.weight"), {I, H}, true, false});
    v.push_back({layer_name(i, "mlp.up_proj.weight"), {I, H}, true, false});
    v.push_back({layer_name(i, "mlp.down_proj.weight"), {H, I}, true, false});
  }
  return v;
}

// ---- slab layout ------------------------------------------------------------------------------

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

// Bump layout over the slab: first pass measures, second pass hands out pointers.
struct SlabCursor {
  uint8_t* base = nullptr;  // null while measuring
  size_t offset = 0;
  uint8_t* take(size_t bytes) {
    uint8_t* p = base ? base + offset : nullptr;
    offset += align_up(bytes);
    return p;
  }
};

// One TP rank's shapes: what the slab plan needs to know about the checkpoint.
struct RankShapes {
  int64_t H = 0, hd = 0, V = 0, q_rows = 0, kv_rows = 0, qkv_rows = 0, inter = 0;
  int layers = 0;
  bool attention_bias = false, tied = false;
  DType wdt = DType::BF16;
};

RankShapes rank_shapes(const Checkpoint& ck, int rank, int tp) {
  const ModelConfig& c = ck.config();
  RankShapes r;
  r.H = c.hidden_size;
  r.hd = c.head_dim;
  const VocabSlice vs = vocab_slice(c.vocab_size, tp, rank);
  r.V = vs.end - vs.begin;
  r.q_rows = int64_t(c.num_attention_heads / tp) * r.hd;
  r.kv_rows = int64_t(c.num_key_value_heads / tp) * r.hd;
  r.qkv_rows = r.q_rows + 2 * r.kv_rows;
  r.inter = c.intermediate_size / tp;
  r.layers = c.num_hidden_layers;
  r.attention_bias = c.attention_bias;
  r.tied = c.tie_word_embeddings;
  r.wdt = ck.get("model.embed_tokens.weight").info->dtype;
  return r;
}

struct LayerSlots {
  uint8_t *input_norm, *qkv, *qkv_bias, *q_norm, *k_norm, *o_proj, *post_norm, *gate_up, *down;
};

// The slab's layout, in order. A tied model stages its table once, in the lm_head's run-time
// layout (the embedding lookup reads its rows there: Backend::weight_rows).
void plan_slab(const RankShapes& r, const Backend& backend, SlabCursor& s, std::vector<LayerSlots>& layers,
               uint8_t*& embed, uint8_t*& norm, uint8_t*& lm) {
  const DType wdt = r.wdt;
  const int64_t H = r.H;
  if (r.tied) {
    lm = embed = s.take(backend.packed_weight_bytes(wdt, r.V, H));
    norm = s.take(H * 4);
  } else {
    embed = s.take(static_cast<size_t>(r.V * H) * dtype_size(wdt));
    norm = s.take(H * 4);
    lm = s.take(backend.packed_weight_bytes(wdt, r.V, H));
  }
  layers.resize(size_t(r.layers));
  for (auto& l : layers) {
    l.input_norm = s.take(H * 4);
    l.qkv = s.take(backend.packed_weight_bytes(wdt, r.qkv_rows, H));
    l.qkv_bias = r.attention_bias ? s.take(r.qkv_rows * 4) : nullptr;
    l.q_norm = s.take(r.hd * 4);
    l.k_norm = s.take(r.hd * 4);
    l.o_proj = s.take(backend.packed_weight_bytes(wdt, H, r.q_rows));
    l.post_norm = s.take(H * 4);
    l.gate_up = s.take(backend.packed_weight_bytes(wdt, 2 * r.inter, H));
    l.down = s.take(backend.packed_weight_bytes(wdt, H, r.inter));
  }
}

// ---- conversions ------------------------------------------------------------------------------

void to_f32(const uint8_t* src, DType dt, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i++) dst[i] = load_as_f32(src, dt, static_cast<size_t>(i));
}

// Copies rows [r0, r1) × columns [c0, c1) of a row-major [rows, cols] matrix into dst
// (row-major [r1-r0, c1-c0]). Reads only the slice's bytes from the mapped file.
void copy_block(const uint8_t* src, size_t esz, int64_t cols, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                uint8_t* dst) {
  const size_t row_bytes = static_cast<size_t>(c1 - c0) * esz;
  for (int64_t r = r0; r < r1; r++)
    std::memcpy(dst + static_cast<size_t>(r - r0) * row_bytes, src + (static_cast<size_t>(r) * cols + c0) * esz,
                row_bytes);
}

// Drops the resident pages of [p, p+n) of a read-only file mapping (whole pages inside only).
void release_range(const uint8_t* p, size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + n;
  uintptr_t pb = (b + page - 1) & ~(page - 1), pe = e & ~(page - 1);
  if (pe > pb) madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);
}

}  // namespace

size_t staged_slab_bytes(const Checkpoint& ck, const Backend& backend, int tp_rank, int tp_size, int num_layers) {
  RankShapes shapes = rank_shapes(ck, tp_rank, tp_size);
  if (num_layers >= 0) shapes.layers = num_layers;
  SlabCursor measure;
  std::vector<LayerSlots> slots;
  uint8_t *embed, *norm, *lm;
  plan_slab(shapes, backend, measure, slots, embed, norm, lm);
  return measure.offset;
}

VocabSlice vocab_slice(int64_t vocab, int tp_size, int tp_rank) {
  PYPTO_ASSERT(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, "rank ", tp_rank, " of ", tp_size);
  return {vocab * tp_rank / tp_size, vocab * (tp_rank + 1) / tp_size};
}

void validate_qwen3_checkpoint(const Checkpoint& ck) {
  const ModelConfig& c = ck.config();
  const TensorRef* embed = ck.find("model.embed_tokens.weight");
  DType wdt = embed ? embed->info->dtype : c.torch_dtype;
  std::vector<std::string> problems;
  for (const auto& e : expected_tensors(c)) {
    const TensorRef* r = ck.find(e.name);
    if (!r) {
      if (!e.optional) problems.push_back(str_cat(e.name, ": missing (expected ", shape_str(e.shape), ")"));
      continue;
    }
    if (r->info->shape != e.shape)
      problems.push_back(str_cat(e.name, ": shape ", shape_str(r->info->shape), ", expected ", shape_str(e.shape)));
    if (e.matrix && r->info->dtype != wdt)
      problems.push_back(str_cat(e.name, ": dtype ", dtype_name(r->info->dtype), ", expected ", dtype_name(wdt),
                                 " like model.embed_tokens.weight"));
  }
  if (!problems.empty()) {
    std::string msg = str_cat(ck.dir(), ": checkpoint does not match config.json (", problems.size(), " tensor",
                              problems.size() == 1 ? "" : "s", "):");
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
}

Qwen3Weights stage_qwen3_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt) {
  validate_qwen3_checkpoint(ck);
  const ModelConfig& c = ck.config();
  const int tp = opt.tp_size, rank = opt.tp_rank;
  PYPTO_ASSERT(tp >= 1 && rank >= 0 && rank < tp);
  if (c.num_attention_heads % tp) fail("--tp ", tp, ": num_attention_heads (", c.num_attention_heads, ") is not divisible by it");
  if (c.num_key_value_heads % tp)
    fail("--tp ", tp, ": num_key_value_heads (", c.num_key_value_heads, ") is not divisible by it");
  if (c.intermediate_size % tp)
    fail("--tp ", tp, ": intermediate_size (", c.intermediate_size, ") is not divisible by it");
  if (c.vocab_size < tp) fail("--tp ", tp, ": exceeds vocab_size (", c.vocab_size, ")");

  Qwen3Weights w;
  w.config = c;
  w.tp_rank = rank;
  w.tp_size = tp;
  w.n_heads = c.num_attention_heads / tp;
  w.n_kv_heads = c.num_key_value_heads / tp;
  w.inter = c.intermediate_size / tp;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  // This rank's vocabulary rows of the embedding table and lm_head: [v0, v0 + V).
  const VocabSlice vs = vocab_slice(c.vocab_size, tp, rank);
  const int64_t v0 = vs.begin, V = vs.end - vs.begin;
  w.vocab_begin = v0;
  w.vocab_rows = V;
  const RankShapes shapes = rank_shapes(ck, rank, tp);
  const int64_t q_rows = shapes.q_rows, kv_rows = shapes.kv_rows, qkv_rows = shapes.qkv_rows;
  const DType wdt = shapes.wdt;
  const size_t esz = dtype_size(wdt);
  w.embed_dtype = wdt;
  const bool tied = shapes.tied;
  const bool plain = backend.weight_layout_is_plain(wdt);

  // Pass 1 measures the slab, pass 2 assigns pointers; both walk the same order.
  SlabCursor measure;
  std::vector<LayerSlots> slots;
  uint8_t *embed_p, *norm_p, *lm_p;
  plan_slab(shapes, backend, measure, slots, embed_p, norm_p, lm_p);
  auto slab = std::make_shared<AlignedBuffer>(measure.offset);
  SlabCursor cur{slab->data(), 0};
  plan_slab(shapes, backend, cur, slots, embed_p, norm_p, lm_p);
  PYPTO_ASSERT(cur.offset == measure.offset);

  // Every pointer of the result is known from the plan alone, so a compile-cache hit only has
  // to bring the slab's bytes back.
  for (const LayerSlots& s : slots) {
    Qwen3LayerWeights& L = w.layers.emplace_back();
    L.input_norm = reinterpret_cast<const float*>(s.input_norm);
    L.qkv = LinearWeight{s.qkv, wdt, qkv_rows, H};
    L.qkv_bias = c.attention_bias ? reinterpret_cast<const float*>(s.qkv_bias) : nullptr;
    L.q_norm = reinterpret_cast<const float*>(s.q_norm);
    L.k_norm = reinterpret_cast<const float*>(s.k_norm);
    L.o_proj = LinearWeight{s.o_proj, wdt, H, q_rows};
    L.post_norm = reinterpret_cast<const float*>(s.post_norm);
    L.gate_up = LinearWeight{s.gate_up, wdt, 2 * w.inter, H};
    L.down = LinearWeight{s.down, wdt, H, w.inter};
  }
  w.embed = embed_p;
  w.embed_in_lm_head = tied;
  w.final_norm = reinterpret_cast<const float*>(norm_p);
  w.lm_head = LinearWeight{lm_p, wdt, V, H};
  w.resident_bytes = slab->size();
  w.storage = slab;

  std::string cache_key;
  if (!opt.compile_cache_dir.empty()) {
    cache_key = staging_fingerprint(ck, backend, rank, tp);
    if (compile_cache_load(opt.compile_cache_dir, cache_key, slab->data(), slab->size())) {
      log_info("compile cache: hit ", compile_cache_path(opt.compile_cache_dir, cache_key));
      w.from_compile_cache = true;
      return w;
    }
  }

  // One scratch buffer for the largest per-rank fused matrix before packing.
  size_t scratch_bytes = std::max({static_cast<size_t>(qkv_rows * H), static_cast<size_t>(H * q_rows),
                                   static_cast<size_t>(2 * w.inter * H), static_cast<size_t>(H * w.inter)}) * esz;
  AlignedBuffer scratch(scratch_bytes);

  size_t total_bytes = ck.total_tensor_bytes();
  Progress progress(str_cat("staging ", ck.dir()), c.num_hidden_layers + 2, opt.show_progress ? total_bytes : 0);
  if (!opt.show_progress) progress.finish();

  auto src = [&](const std::string& name) -> const TensorRef& { return ck.get(name); };
  auto release = [&](const TensorRef& r) { r.file->release(*r.info); };
  auto norm_to_f32 = [&](const std::string& name, int64_t n, uint8_t* dst, bool optional_ones) {
    const TensorRef* r = ck.find(name);
    float* out = reinterpret_cast<float*>(dst);
    if (!r) {
      PYPTO_ASSERT(optional_ones, name);
      std::fill(out, out + n, 1.0f);  // QK-norm absent → identity gammas
      return;
    }
    to_f32(r->data(), r->info->dtype, n, out);
    release(*r);
  };

  // Embedding: this rank's rows [v0, v0 + V) (a contiguous row range of [vocab, H]). Plain rows
  // are copied in chunks whose source pages are released as we go (it is the largest tensor:
  // 311 MB for qwen3-0.6b, half of it per rank at TP=2); a tied table on a packing backend is
  // packed straight from the checkpoint as the lm_head, and that is its only copy.
  {
    const TensorRef& e = src("model.embed_tokens.weight");
    const uint8_t* rows = e.data() + static_cast<size_t>(v0 * H) * esz;
    const size_t bytes = static_cast<size_t>(V * H) * esz, chunk = 16u << 20;
    if (tied && !plain) {
      backend.pack_weight(rows, wdt, V, H, lm_p);
      release(e);
    } else {
      for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = std::min(chunk, bytes - off);
        std::memcpy(embed_p + off, rows + off, n);
        release_range(rows + off, n);
      }
    }
    norm_to_f32("model.norm.weight", H, norm_p, false);
    if (!tied) {
      const TensorRef& lm = src("lm_head.weight");
      backend.pack_weight(lm.data() + static_cast<size_t>(v0 * H) * esz, wdt, V, H, lm_p);
      release(lm);
    }
    progress.advance(2, bytes * (tied ? 1 : 2));
  }

  for (int i = 0; i < c.num_hidden_layers; i++) {
    const LayerSlots& s = slots[i];
    size_t layer_bytes = 0;
    auto note = [&](const TensorRef& r) { layer_bytes += r.info->end - r.info->begin; };

    norm_to_f32(layer_name(i, "input_layernorm.weight"), H, s.input_norm, false);
    norm_to_f32(layer_name(i, "post_attention_layernorm.weight"), H, s.post_norm, false);
    norm_to_f32(layer_name(i, "self_attn.q_norm.weight"), hd, s.q_norm, true);
    norm_to_f32(layer_name(i, "self_attn.k_norm.weight"), hd, s.k_norm, true);

    // qkv: this rank's head rows of q, k and v stacked → [qkv_rows, H]
    const TensorRef& q = src(layer_name(i, "self_attn.q_proj.weight"));
    const TensorRef& k = src(layer_name(i, "self_attn.k_proj.weight"));
    const TensorRef& v = src(layer_name(i, "self_attn.v_proj.weight"));
    uint8_t* t = scratch.data();
    copy_block(q.data(), esz, H, rank * q_rows, (rank + 1) * q_rows, 0, H, t);
    copy_block(k.data(), esz, H, rank * kv_rows, (rank + 1) * kv_rows, 0, H, t + q_rows * H * esz);
    copy_block(v.data(), esz, H, rank * kv_rows, (rank + 1) * kv_rows, 0, H, t + (q_rows + kv_rows) * H * esz);
    backend.pack_weight(t, wdt, qkv_rows, H, s.qkv);
    for (const TensorRef* r : {&q, &k, &v}) note(*r), release(*r);
    if (c.attention_bias) {
      float* b = reinterpret_cast<float*>(s.qkv_bias);
      const TensorRef& qb = src(layer_name(i, "self_attn.q_proj.bias"));
      const TensorRef& kb = src(layer_name(i, "self_attn.k_proj.bias"));
      const TensorRef& vb = src(layer_name(i, "self_attn.v_proj.bias"));
      const size_t qesz = dtype_size(qb.info->dtype), kesz = dtype_size(kb.info->dtype), vesz = dtype_size(vb.info->dtype);
      to_f32(qb.data() + rank * q_rows * qesz, qb.info->dtype, q_rows, b);
      to_f32(kb.data() + rank * kv_rows * kesz, kb.info->dtype, kv_rows, b + q_rows);
      to_f32(vb.data() + rank * kv_rows * vesz, vb.info->dtype, kv_rows, b + q_rows + kv_rows);
    }

    // o_proj is row-parallel: this rank's input columns [H, q_rows].
    const TensorRef& o = src(layer_name(i, "self_attn.o_proj.weight"));
    copy_block(o.data(), esz, c.q_size(), 0, H, rank * q_rows, (rank + 1) * q_rows, t);
    backend.pack_weight(t, wdt, H, q_rows, s.o_proj);
    note(o), release(o);

    // gate_up: this rank's intermediate rows of gate then up → [2*inter_r, H]
    const TensorRef& g = src(layer_name(i, "mlp.gate_proj.weight"));
    const TensorRef& u = src(layer_name(i, "mlp.up_proj.weight"));
    copy_block(g.data(), esz, H, rank * w.inter, (rank + 1) * w.inter, 0, H, t);
    copy_block(u.data(), esz, H, rank * w.inter, (rank + 1) * w.inter, 0, H, t + w.inter * H * esz);
    backend.pack_weight(t, wdt, 2 * w.inter, H, s.gate_up);
    note(g), release(g), note(u), release(u);

    // down is row-parallel: this rank's input columns [H, inter_r].
    const TensorRef& d = src(layer_name(i, "mlp.down_proj.weight"));
    copy_block(d.data(), esz, c.intermediate_size, 0, H, rank * w.inter, (rank + 1) * w.inter, t);
    backend.pack_weight(t, wdt, H, w.inter, s.down);
    note(d), release(d);

    progress.advance(1, layer_bytes);
  }
  progress.finish();

  if (!cache_key.empty()) {
    compile_cache_store(opt.compile_cache_dir, cache_key, slab->data(), slab->size());
    log_info("compile cache: stored ", compile_cache_path(opt.compile_cache_dir, cache_key));
  }
  return w;
}

}  // namespace pypto
