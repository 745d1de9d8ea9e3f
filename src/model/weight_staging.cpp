#include "model/weight_staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <span>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/progress.h"
#include "model/compile_cache.h"
#include "model/moe_staging.h"
#include "model/hybrid_checkpoint_check.h"
#include "model/hybrid_split.h"
#include "model/hybrid_staging.h"
#include "model/quant_rows.h"
#include "model/quantized_source.h"

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
    if (!c.sparse_layer(i)) {
      v.push_back({layer_name(i, "mlp.gate_proj.weight"), {I, H}, true, false});
      v.push_back({layer_name(i, "mlp.up_proj.weight"), {I, H}, true, false});
      v.push_back({layer_name(i, "mlp.down_proj.weight"), {H, I}, true, false});
      continue;
    }
    // Qwen3-MoE sparse layer, as Qwen publishes it: the router and per-expert 2-D projections.
    v.push_back({layer_name(i, "mlp.gate.weight"), {c.num_experts, H}, true, false});
    for (const MoeProjection& p : moe_expert_projections(c))
      v.push_back({layer_name(i, (p.name + ".weight").c_str()), {p.out, p.in}, true, false});
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
  // Qwen3-MoE: layer first_layer + i of the plan is sparse iff config->sparse_layer says so; its
  // MLP is then a router [experts, H] and this rank's shard.count experts, each gate_up
  // [2 moe_inter, H] and down [H, moe_inter] (moe_inter = shard.inter, this rank's columns).
  const ModelConfig* config = nullptr;
  int first_layer = 0;
  int64_t experts = 0, moe_inter = 0;
  ExpertShard shard;
  bool sparse(int i) const { return experts > 0 && config->sparse_layer(first_layer + i); }
  bool embed = true, head = true;  // this pipeline stage holds the embedding / final norm + lm_head
  bool attention_bias = false, tied = false;
  DType wdt = DType::BF16;
  StagedFormats fmt;
};


RankShapes rank_shapes(const Checkpoint& ck, int rank, int tp, const StagedFormats& fmt, LayerRange range = {}) {
  const ModelConfig& c = ck.config();
  range = resolve_range(c, range);
  RankShapes r;
  r.H = c.hidden_size;
  r.hd = c.head_dim;
  const VocabSlice vs = vocab_slice(c.vocab_size, tp, rank);
  r.V = vs.end - vs.begin;
  r.q_rows = int64_t(c.num_attention_heads / tp) * r.hd;
  r.kv_rows = int64_t(c.num_key_value_heads / tp) * r.hd;
  r.qkv_rows = r.q_rows + 2 * r.kv_rows;
  r.inter = c.intermediate_size / tp;
  r.layers = range.end - range.begin;
  r.config = &c;
  r.first_layer = range.begin;
  r.experts = c.num_experts;
  if (c.has_sparse_layers()) {
    r.shard = expert_shard(c, rank, tp, fmt.expert_parallel, fmt.layers, fmt.group);
    r.moe_inter = r.shard.inter;
  }
  r.embed = range.begin == 0;
  r.head = range.end == c.num_hidden_layers;
  r.attention_bias = c.attention_bias;
  r.tied = c.tie_word_embeddings;
  r.wdt = ck.get("model.embed_tokens.weight").info->dtype;
  r.fmt = fmt;
  return r;
}

struct LayerSlots {
  uint8_t *input_norm, *qkv, *qkv_bias, *q_norm, *k_norm, *o_proj, *post_norm, *gate_up, *down;
  // A sparse layer: gate_up / down are null, and `moe` holds the router and each expert's pair.
  MoeLayerSlots moe;
};

// The slab's layout, in order. A tied model stages its table once, in the lm_head's run-time
// layout (the embedding lookup reads its rows there: Backend::weight_rows).
void plan_slab(const RankShapes& r, const Backend& backend, SlabCursor& s, std::vector<LayerSlots>& layers,
               uint8_t*& embed, uint8_t*& norm, uint8_t*& lm) {
  const DType wdt = r.wdt;
  const int64_t H = r.H;
  auto bytes = [&](WeightFormat f, int64_t n, int64_t k) {
    return f == WeightFormat::Float ? backend.packed_weight_bytes(wdt, n, k)
                                    : backend.packed_quantized_bytes(f, n, k, f == WeightFormat::Int8 ? 0 : r.fmt.group);
  };
  const WeightFormat hf = r.fmt.head, lf = r.fmt.layers;
  embed = norm = lm = nullptr;  // a pipeline stage without them leaves them null
  if (r.tied) {
    if (r.embed || r.head) lm = embed = s.take(bytes(hf, r.V, H));
    if (r.head) norm = s.take(H * 4);
  } else {
    if (r.embed)
      embed = s.take(hf == WeightFormat::Float ? static_cast<size_t>(r.V * H) * dtype_size(wdt) : bytes(hf, r.V, H));
    if (r.head) {
      norm = s.take(H * 4);
      lm = s.take(bytes(hf, r.V, H));
    }
  }
  layers.resize(size_t(r.layers));
  for (int i = 0; i < r.layers; i++) {
    LayerSlots& l = layers[size_t(i)];
    l.input_norm = s.take(H * 4);
    l.qkv = s.take(bytes(lf, r.qkv_rows, H));
    l.qkv_bias = r.attention_bias ? s.take(r.qkv_rows * 4) : nullptr;
    l.q_norm = s.take(r.hd * 4);
    l.k_norm = s.take(r.hd * 4);
    l.o_proj = s.take(bytes(lf, H, r.q_rows));
    l.post_norm = s.take(H * 4);
    if (!r.sparse(i)) {
      l.gate_up = s.take(bytes(lf, 2 * r.inter, H));
      l.down = s.take(bytes(lf, H, r.inter));
      continue;
    }
    l.gate_up = l.down = nullptr;
    // The router stays in the checkpoint's float dtype whatever the layer format.
    plan_moe_layer(r.shard.count, backend.packed_weight_bytes(wdt, r.experts, H), bytes(lf, 2 * r.moe_inter, H),
                   bytes(lf, H, r.moe_inter), [&](size_t n) { return s.take(n); }, l.moe);
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

// Quantizes a plain [n, k] float table (the embedding or lm_head rows of this rank) row-wise
// into dst in chunks of rows, releasing each chunk's source pages as it goes.
void pack_quantized_rows(const Backend& backend, const uint8_t* src, DType dt, int64_t n, int64_t k, WeightFormat f,
                         int32_t group, uint8_t* dst) {
  constexpr int64_t kChunkRows = 4096;  // a multiple of 16
  const size_t row_bytes = static_cast<size_t>(k) * dtype_size(dt);
  for (int64_t r0 = 0; r0 < n; r0 += kChunkRows) {
    const int64_t r1 = std::min(n, r0 + kChunkRows);
    QuantRows q(f, k, group);
    q.append_quantized(src, dt, r0, r1);
    backend.pack_quantized(q.view(), dst, r0, n);
    release_range(src + static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(r1 - r0) * row_bytes);
  }
}

}  // namespace

LayerRange resolve_range(const ModelConfig& c, LayerRange range) {
  if (range.end < 0) range.end = c.num_hidden_layers;
  if (range.begin < 0 || range.begin >= range.end || range.end > c.num_hidden_layers)
    fail("pipeline stage layers [", range.begin, ", ", range.end, ") are not a non-empty range inside the model's ",
         c.num_hidden_layers, " layers");
  return range;
}

std::string StagedFormats::describe() const {
  if (layers == WeightFormat::Float) return "float";
  std::string s = weight_format_name(layers);
  if (layers != WeightFormat::Int8) s += str_cat(layers == WeightFormat::Fp8 ? "/b" : "/g", group);
  if (head != layers) s += str_cat(" (", weight_format_name(head), " embeddings and lm_head)");
  return s;
}

StagedFormats staged_formats(const Checkpoint& ck, WeightFormat quantization, int32_t int4_group) {
  const QuantConfig& q = ck.config().quant;
  StagedFormats f;
  if (q.method != QuantMethod::None) {
    if (quantization != WeightFormat::Float)
      fail("--quantization ", weight_format_name(quantization), ": ", ck.dir(), " is already quantized (",
           quant_method_name(q.method), " in config.json quantization_config); it runs in that format, drop the option");
    if (q.method == QuantMethod::Fp8) {
      if (q.fp8_block_n % 16 != 0)
        fail(ck.dir(), ": FP8 weight_block_size [", q.fp8_block_n, ", ", q.fp8_block_k, "]: the block rows must be a multiple of 16");
      f.layers = WeightFormat::Fp8;
      f.group = q.fp8_block_k;
    } else {
      f.layers = WeightFormat::Int4;  // AWQ and GPTQ: 4-bit groups with zero points
      f.group = q.int4_group();
    }
    return f;  // embeddings and lm_head stay in the checkpoint's float dtype
  }
  if (quantization == WeightFormat::Int4 && (int4_group < 8 || int4_group % 8 != 0))
    fail("int4 group size ", int4_group, " must be a positive multiple of 8");
  if (quantization == WeightFormat::Fp8) fail("--quantization accepts int8, int4 or none (fp8 comes from FP8 checkpoints)");
  f.layers = f.head = quantization;
  f.group = quantization == WeightFormat::Int4 ? int4_group : 0;
  return f;
}

WeightFormat parse_quantization(const std::string& s) {
  if (s == "none") return WeightFormat::Float;
  if (s == "int8") return WeightFormat::Int8;
  if (s == "int4") return WeightFormat::Int4;
  fail("--quantization must be one of none, int8, int4; got '", s, "'");
}

const char* quantized_activations(WeightFormat layers, const Backend& backend) {
  if (layers == WeightFormat::Float) return "";
  if (layers == WeightFormat::Fp8) return "f32 activations";
  switch (backend.quant_activations()) {
    case QuantActivations::Int8: return "int8 activations";
    case QuantActivations::Bf16Pair: return "bf16x2 activations";
    case QuantActivations::Int16: return "int16 activations";
    case QuantActivations::F32: break;
  }
  return "f32 activations";
}

size_t staged_slab_bytes(const Checkpoint& ck, const Backend& backend, int tp_rank, int tp_size, int num_layers,
                         const StagedFormats* formats, LayerRange range) {
  if (ck.config().hybrid()) return hybrid_staged_bytes(ck, backend, num_layers, formats, tp_rank, tp_size, range);
  RankShapes shapes =
      rank_shapes(ck, tp_rank, tp_size, formats ? *formats : staged_formats(ck, WeightFormat::Float, 64), range);
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
  if (ck.config().hybrid()) return validate_hybrid_checkpoint(ck);
  const ModelConfig& c = ck.config();
  const TensorRef* embed = ck.find("model.embed_tokens.weight");
  DType wdt = embed ? embed->info->dtype : c.torch_dtype;
  std::vector<std::string> problems;
  const bool prequantized = c.quant.method != QuantMethod::None;
  for (const auto& e : expected_tensors(c)) {
    // The projections of a pre-quantized checkpoint have their own tensors (checked below).
    if (prequantized && e.matrix && e.name.rfind("model.layers.", 0) == 0) continue;
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
  if (prequantized) validate_quantized_projections(ck, problems);
  if (!problems.empty()) {
    std::string msg = str_cat(ck.dir(), ": checkpoint does not match config.json (", problems.size(), " tensor",
                              problems.size() == 1 ? "" : "s", "):");
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
}

Qwen3Weights stage_qwen3_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt) {
  if (ck.config().hybrid()) return stage_hybrid_weights(ck, backend, opt);
  if (opt.mtp)
    fail(ck.dir(), ": --speculative-config method mtp needs an MTP head (mtp.* tensors), which only Qwen3.5 / ",
         "Qwen3.6 and Qwen3-Next checkpoints carry; ", ck.config().architecture, " has none: use method ngram or draft_model");
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
  StagedFormats fmt = staged_formats(ck, opt.quantization, opt.int4_group);
  fmt.expert_parallel = opt.expert_parallel;
  const LayerRange range = resolve_range(c, {opt.layer_begin, opt.layer_end});
  const bool whole = range.begin == 0 && range.end == c.num_hidden_layers;
  const RankShapes shapes = rank_shapes(ck, rank, tp, fmt, range);
  w.layer_begin = range.begin;
  w.layer_end = range.end;
  w.has_embed = shapes.embed;
  w.has_head = shapes.head;
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
  const WeightFormat lf = fmt.layers, hf = fmt.head;
  const int32_t lgroup = lf == WeightFormat::Int8 ? 0 : fmt.group, hgroup = hf == WeightFormat::Int8 ? 0 : fmt.group;
  w.moe_inter = shapes.moe_inter;
  for (int i = 0; i < shapes.layers; i++) {
    const LayerSlots& s = slots[size_t(i)];
    Qwen3LayerWeights& L = w.layers.emplace_back();
    L.input_norm = reinterpret_cast<const float*>(s.input_norm);
    L.qkv = LinearWeight{s.qkv, wdt, qkv_rows, H, lf, lgroup};
    L.qkv_bias = c.attention_bias ? reinterpret_cast<const float*>(s.qkv_bias) : nullptr;
    L.q_norm = reinterpret_cast<const float*>(s.q_norm);
    L.k_norm = reinterpret_cast<const float*>(s.k_norm);
    L.o_proj = LinearWeight{s.o_proj, wdt, H, q_rows, lf, lgroup};
    L.post_norm = reinterpret_cast<const float*>(s.post_norm);
    if (!shapes.sparse(i)) {
      L.gate_up = LinearWeight{s.gate_up, wdt, 2 * w.inter, H, lf, lgroup};
      L.down = LinearWeight{s.down, wdt, H, w.inter, lf, lgroup};
      continue;
    }
    bind_moe_layer(s.moe, wdt, shapes.experts, shapes.shard.first, H, shapes.moe_inter, lf, lgroup, L);
  }
  w.embed = embed_p;
  w.embed_in_lm_head = tied;
  if (embed_p && !tied && hf != WeightFormat::Float) w.embed_rows = LinearWeight{embed_p, wdt, V, H, hf, hgroup};
  w.final_norm = reinterpret_cast<const float*>(norm_p);
  if (lm_p) w.lm_head = LinearWeight{lm_p, wdt, V, H, hf, hgroup};
  w.weight_formats = fmt.describe();
  w.layer_format = fmt.layers;
  w.resident_bytes = slab->size();
  w.storage = slab;

  std::string cache_key;
  if (!opt.compile_cache_dir.empty()) {
    // A pipeline stage's slab is keyed by its layer range too (the whole model keeps its old key).
    const std::string layers = whole ? "" : str_cat(" layers [", range.begin, ", ", range.end, ")");
    const char* ep = fmt.expert_parallel && tp > 1 && c.has_sparse_layers() ? " expert-parallel" : "";
    cache_key = staging_fingerprint(ck, backend, rank, tp, fmt.describe() + layers + ep);
    if (compile_cache_load(opt.compile_cache_dir, cache_key, slab->data(), slab->size())) {
      log_info("compile cache: hit ", compile_cache_path(opt.compile_cache_dir, cache_key));
      w.from_compile_cache = true;
      return w;
    }
  }

  // One scratch buffer for the largest per-rank fused matrix before packing.
  size_t scratch_bytes = std::max({static_cast<size_t>(qkv_rows * H), static_cast<size_t>(H * q_rows),
                                   static_cast<size_t>(2 * w.inter * H), static_cast<size_t>(H * w.inter),
                                   static_cast<size_t>(2 * w.moe_inter * H)}) * esz;
  AlignedBuffer scratch(lf == WeightFormat::Float ? scratch_bytes : 64);  // the float path fuses in it

  size_t total_bytes = ck.total_tensor_bytes();
  Progress progress(str_cat("staging ", ck.dir()), shapes.layers + 2, opt.show_progress ? total_bytes : 0);
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
  if (embed_p) {  // the first pipeline stage's table (a tied table: the last stage's lm_head too)
    const TensorRef& e = src("model.embed_tokens.weight");
    const uint8_t* rows = e.data() + static_cast<size_t>(v0 * H) * esz;
    const size_t bytes = static_cast<size_t>(V * H) * esz, chunk = 16u << 20;
    if (hf != WeightFormat::Float) {
      // Quantized table (row-wise): packed in chunks of rows, each chunk's source pages released
      // as it goes, so the quantization buffers stay small.
      pack_quantized_rows(backend, rows, wdt, V, H, hf, hgroup, tied ? lm_p : embed_p);
      release(e);
    } else if (tied && !plain) {
      backend.pack_weight(rows, wdt, V, H, lm_p);
      release(e);
    } else {
      for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = std::min(chunk, bytes - off);
        std::memcpy(embed_p + off, rows + off, n);
        release_range(rows + off, n);
      }
    }
    progress.advance(1, bytes);
  }
  if (norm_p) {  // the last pipeline stage
    norm_to_f32("model.norm.weight", H, norm_p, false);
    if (!tied) {
      const TensorRef& lm = src("lm_head.weight");
      if (hf != WeightFormat::Float)
        pack_quantized_rows(backend, lm.data() + static_cast<size_t>(v0 * H) * esz, wdt, V, H, hf, hgroup, lm_p);
      else
        backend.pack_weight(lm.data() + static_cast<size_t>(v0 * H) * esz, wdt, V, H, lm_p);
      release(lm);
      progress.advance(1, size_t(V * H) * esz);
    }
  }

  // One linear of a layer: rows [r0, r1) and columns [c0, c1) (c1 < 0: all) of each part's tensor,
  // parts stacked by rows into a [n, k] weight packed at dst in the layer format. Quantized
  // online formats quantize whole rows before a column slice (so every rank holds the values a
  // single rank would); pre-quantized ones are read whole, then sliced the same way.
  using Part = ProjectionPart;
  size_t projection_bytes = 0;
  auto stage_projection = [&](int layer, std::span<const Part> parts, int64_t n, int64_t k, uint8_t* dst) {
    if (lf == WeightFormat::Float) {
      uint8_t* t = scratch.data();
      for (const Part& p : parts) {
        const TensorRef& r = src(layer_name(layer, p.proj) + ".weight");
        const int64_t cols = r.info->shape[1], c1 = p.c1 < 0 ? cols : p.c1;
        copy_block(r.data(), esz, cols, p.r0, p.r1, p.c0, c1, t);
        t += static_cast<size_t>((p.r1 - p.r0) * (c1 - p.c0)) * esz;
        projection_bytes += r.info->end - r.info->begin;
        release(r);
      }
      backend.pack_weight(scratch.data(), wdt, n, k, dst);
      return;
    }
    // Rows are appended straight into `all` unless a column slice is taken (row-parallel
    // o_proj / down: one part), so at most one extra copy of a projection is alive at a time.
    QuantRows all(lf, k, lgroup);
    for (const Part& p : parts) {
      const std::string name = layer_name(layer, p.proj);
      const bool sliced = p.c0 != 0 || p.c1 >= 0;
      auto into = [&](int64_t cols, auto&& append_rows) {
        const int64_t c1 = p.c1 < 0 ? cols : p.c1;
        if (!sliced || (p.c0 == 0 && c1 == cols)) return append_rows(all);
        QuantRows whole(lf, cols, lgroup);
        append_rows(whole);
        QuantRows part = whole.slice_cols(p.c0, c1);
        if (all.rows() == 0) all = std::move(part);
        else all.append(part);
      };
      if (lf == WeightFormat::Fp8) {
        const Fp8Source f = read_fp8_projection(ck, name);
        into(f.k, [&](QuantRows& q) { q.append(f, p.r0, p.r1); });
        release_projection(ck, name);
      } else if (c.quant.method == QuantMethod::Awq || c.quant.method == QuantMethod::Gptq) {
        const AwqSource a = read_int4_projection(ck, name);
        into(a.k, [&](QuantRows& q) { q.append(a, p.r0, p.r1); });
        release_projection(ck, name);
      } else {
        const TensorRef& r = src(name + ".weight");
        into(r.info->shape[1], [&](QuantRows& q) { q.append_quantized(r.data(), wdt, p.r0, p.r1); });
        projection_bytes += r.info->end - r.info->begin;
        release(r);
      }
    }
    PYPTO_ASSERT(all.rows() == n && all.k() == k, all.rows(), "x", all.k(), " vs ", n, "x", k);
    backend.pack_quantized(all.view(), dst);
  };

  for (int i = range.begin; i < range.end; i++) {
    const LayerSlots& s = slots[size_t(i - range.begin)];
    size_t layer_bytes = 0;

    norm_to_f32(layer_name(i, "input_layernorm.weight"), H, s.input_norm, false);
    norm_to_f32(layer_name(i, "post_attention_layernorm.weight"), H, s.post_norm, false);
    norm_to_f32(layer_name(i, "self_attn.q_norm.weight"), hd, s.q_norm, true);
    norm_to_f32(layer_name(i, "self_attn.k_norm.weight"), hd, s.k_norm, true);

    // qkv: this rank's head rows of q, k and v stacked → [qkv_rows, H]
    const Part qkv[] = {{"self_attn.q_proj", rank * q_rows, (rank + 1) * q_rows, 0, -1},
                        {"self_attn.k_proj", rank * kv_rows, (rank + 1) * kv_rows, 0, -1},
                        {"self_attn.v_proj", rank * kv_rows, (rank + 1) * kv_rows, 0, -1}};
    stage_projection(i, qkv, qkv_rows, H, s.qkv);
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
    const Part o[] = {{"self_attn.o_proj", 0, H, rank * q_rows, (rank + 1) * q_rows}};
    stage_projection(i, o, H, q_rows, s.o_proj);
    if (s.moe.router) {
      projection_bytes += stage_moe_layer(ck, backend, i, shapes.shard, s.moe, stage_projection);
    } else {
      // gate_up: this rank's intermediate rows of gate then up → [2*inter_r, H]
      const Part gu[] = {{"mlp.gate_proj", rank * w.inter, (rank + 1) * w.inter, 0, -1},
                         {"mlp.up_proj", rank * w.inter, (rank + 1) * w.inter, 0, -1}};
      stage_projection(i, gu, 2 * w.inter, H, s.gate_up);
      // down is row-parallel: this rank's input columns [H, inter_r].
      const Part d[] = {{"mlp.down_proj", 0, H, rank * w.inter, (rank + 1) * w.inter}};
      stage_projection(i, d, H, w.inter, s.down);
    }
    layer_bytes += projection_bytes;
    projection_bytes = 0;

    progress.advance(1, layer_bytes);
  }
  progress.finish();

  if (!cache_key.empty()) {
    if (compile_cache_store(opt.compile_cache_dir, cache_key, slab->data(), slab->size()))
      log_info("compile cache: stored ", compile_cache_path(opt.compile_cache_dir, cache_key));
  }
  return w;
}

}  // namespace pypto
