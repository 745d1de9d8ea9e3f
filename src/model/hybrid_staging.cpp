#include "model/hybrid_staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <span>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/tensor.h"
#include "model/hybrid_checkpoint_check.h"
#include "model/hybrid_prequant.h"
#include "model/hybrid_slabs.h"
#include "model/hybrid_split.h"
#include "model/moe_staging.h"
#include "model/quant_rows.h"
#include "model/quantized_source.h"
#include "model/qwen3_next_layout.h"

namespace pypto {
namespace {

// Drops the resident pages of [p, p + n) of a read-only file mapping (whole pages inside only), so
// a large tensor read piece by piece (the embedding, one expert of a fused tensor) never has all
// of its source pages resident at once: the staging peak stays near the staged size.
void release_range(const uint8_t* p, size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(p), e = b + n;
  const uintptr_t pb = (b + page - 1) & ~(page - 1), pe = e & ~(page - 1);
  if (pe > pb) madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);
}

}  // namespace

Qwen3Weights stage_hybrid_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt) {
  const ModelConfig& c = ck.config();
  validate_hybrid_checkpoint(ck);
  // --quantization int8 | int4: the projections of attention, the GDN (in_proj's qkv | z rows and
  // out_proj), the MLP, the experts and the shared expert, plus lm_head and the embedding table,
  // as for Qwen3; the GDN's small b | a projections, the router and the shared expert's gate stay
  // float (they feed sigmoids and softmaxes, and are a few rows each).
  StagedFormats fmt = staged_formats(ck, opt.quantization, opt.int4_group);
  fmt.expert_parallel = opt.expert_parallel;
  const bool quantized = fmt.layers != WeightFormat::Float;
  const int tp = opt.tp_size, rank = opt.tp_rank;
  check_hybrid_tp(c, tp, fmt);
  // --pp: this stage's layers [lb, le); the embedding with layer 0, the final norm and lm_head with
  // the last layer (a tied table is staged by each stage that needs it).
  const LayerRange range = resolve_range(c, {opt.layer_begin, opt.layer_end});
  const int lb = range.begin, le = range.end;
  const bool has_embed = lb == 0, has_head = le == c.num_hidden_layers;

  const std::string& P = c.tensor_prefix;
  const int64_t H = c.hidden_size, hd = c.head_dim, V = c.vocab_size, nv = c.linear_num_value_heads;
  const int64_t C = c.gdn_conv_dim(), Vd = c.gdn_value_dim(), Kc = c.linear_conv_kernel_dim;
  const int64_t q_rows = c.q_size(), kv_rows = c.kv_size();
  const TensorRef& embed = ck.get(P + "embed_tokens.weight");
  const DType wdt = embed.info->dtype;
  const size_t esz = dtype_size(wdt);

  // This rank's share (everything when tp == 1): attention heads [h0, h0 + nh) with KV heads
  // [g0, g0 + nkv); GDN key heads [k0, k0 + nk) with value heads [v0, v0 + nvr); intermediate
  // columns [i0, i0 + I) of the MLP, mI of each expert, sI of the shared expert; vocabulary rows
  // [vs.begin, vs.end) of the embedding and lm_head. Column-parallel weights take their rows,
  // row-parallel ones (o_proj, out_proj, down) their columns, and the model all-reduces.
  const int64_t nh = c.num_attention_heads / tp, h0 = rank * nh, nkv = c.num_key_value_heads / tp, g0 = rank * nkv;
  const int64_t nk = c.linear_num_key_heads / tp, k0 = rank * nk, nvr = nv / tp, v0 = rank * nvr;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, KD = c.gdn_key_dim();
  const int64_t I = c.intermediate_size / tp, i0 = rank * I;
  const VocabSlice vs = vocab_slice(V, tp, rank);
  const int64_t Vr = vs.end - vs.begin;

  // The slab layout (and so a compile-cache entry's bytes) is the same for any pass over the same
  // options: stage_into runs the whole staging over `slabs` in its mode.
  auto stage_into = [&](const std::shared_ptr<HybridSlabs>& slabs) -> Qwen3Weights {
    Qwen3Weights w;
    w.config = c;
    w.tp_rank = rank;
    w.tp_size = tp;
    w.n_heads = int32_t(nh);
    w.n_kv_heads = int32_t(nkv);
    w.inter = I;
    // The routed experts this rank holds: all of them by columns, or whole ones under
    // --enable-expert-parallel (model/moe_staging.h); the shared expert always by columns.
    const ExpertShard shard =
        c.has_sparse_layers() ? expert_shard(c, rank, tp, opt.expert_parallel, fmt.layers, fmt.group) : ExpertShard{};
    w.moe_inter = shard.inter;
    w.vocab_begin = vs.begin;
    w.vocab_rows = Vr;
    w.embed_dtype = wdt;
    w.layer_begin = lb;
    w.layer_end = le;
    w.has_embed = has_embed;
    w.has_head = has_head;
    const bool compute = slabs->compute();  // false: only the pointers are bound (model/hybrid_slabs.h)

    auto release = [&](const TensorRef& r) { r.file->release(*r.info); };
    // A float vector (norm, bias, taps) as f32, plus `offset` (1 for the zero-centred norms).
    auto vec_f32 = [&](const std::string& name, float offset) {
      const TensorRef& r = ck.get(name);
      const int64_t n = shape_numel(r.info->shape);
      float* out = reinterpret_cast<float*>(slabs->take(size_t(n) * sizeof(float)));
      if (compute)
        for (int64_t i = 0; i < n; ++i) out[i] = load_as_f32(r.data(), r.info->dtype, size_t(i)) + offset;
      release(r);
      return static_cast<const float*>(out);
    };
    // Elements [b, e) of each range of a float tensor, concatenated, as f32 (a rank's conv channels
    // and per-head vectors).
    auto vec_f32_ranges = [&](const std::string& name, std::initializer_list<std::pair<int64_t, int64_t>> ranges) {
      const TensorRef& r = ck.get(name);
      int64_t n = 0;
      for (const auto& [b, e] : ranges) n += e - b;
      float* out = reinterpret_cast<float*>(slabs->take(size_t(n) * sizeof(float)));
      float* o = out;
      if (compute)
        for (const auto& [b, e] : ranges)
          for (int64_t i = b; i < e; ++i) *o++ = load_as_f32(r.data(), r.info->dtype, size_t(i));
      release(r);
      return static_cast<const float*>(out);
    };
    // A linear stacked by rows from parts (each a row range of a 2-D tensor, or a pointer to rows).
    // A part of a pre-quantized checkpoint (model/hybrid_prequant.h) is rows [r0, r0 + rows) of the
    // projection `packed` (its stem, without ".weight"), staged in its format as stored.
    struct Rows {
      const uint8_t* data;
      int64_t rows;
      std::string packed = {};
      int64_t r0 = 0;
    };
    std::vector<uint8_t> scratch;
    // True when the parts are pre-quantized (all of them: a linear fused from quantized and float
    // tensors is refused).
    auto packed_parts = [&](std::span<const Rows> parts) {
      size_t n = 0;
      std::string stem;
      for (const Rows& r : parts) {
        n += !r.packed.empty();
        if (!r.packed.empty()) stem = r.packed;
      }
      if (n != 0 && n != parts.size())
        fail(ck.dir(), ": ", stem, " is stored quantized (", quant_method_name(c.quant.method), ") but a tensor fused with ",
             "it into one staged projection is not (", c.architecture, " stages [q | k | v | z], [b | a], gate | up ",
             "together: they must be quantized alike)");
      return n != 0;
    };
    // Pre-quantized parts as stored: each row keeps its own scales (FP8: its tile's; 4-bit: its
    // groups'), so rows of several tensors stack exactly. A 4-bit projection is decoded once for all
    // the row ranges taken from it (Qwen3-Next takes 4 per key head).
    std::string decoded_stem;
    AwqSource decoded;
    auto prequant_rows = [&](std::span<const Rows> parts, int64_t k) {
      QuantRows q(fmt.layers, k, fmt.group);
      for (const Rows& r : parts) {
        if (c.quant.method == QuantMethod::Fp8) {
          q.append(read_fp8_projection(ck, r.packed), r.r0, r.r0 + r.rows);
          continue;
        }
        if (decoded_stem != r.packed) {
          decoded = read_int4_projection(ck, r.packed);
          decoded_stem = r.packed;
        }
        q.append(decoded, r.r0, r.r0 + r.rows);
      }
      return q;
    };
    auto pack_prequant = [&](const QuantRows& q) {
      uint8_t* dst = slabs->take(backend.packed_quantized_bytes(fmt.layers, q.rows(), q.k(), fmt.group));
      backend.pack_quantized(q.view(), dst);
      return LinearWeight{dst, wdt, q.rows(), q.k(), fmt.layers, fmt.group};
    };
    // Without computing (HybridSlabs): the slot pack_prequant would fill for n rows of k inputs.
    auto take_prequant = [&](int64_t n, int64_t k) {
      uint8_t* dst = slabs->take(backend.packed_quantized_bytes(fmt.layers, n, k, fmt.group));
      return LinearWeight{dst, wdt, n, k, fmt.layers, fmt.group};
    };
    auto rows_in = [](std::span<const Rows> parts) {
      int64_t n = 0;
      for (const Rows& r : parts) n += r.rows;
      return n;
    };
    // A projection in float, whatever --quantization says.
    auto pack_float = [&](std::span<const Rows> parts, int64_t k) {
      if (packed_parts(parts))  // as stored
        return compute ? pack_prequant(prequant_rows(parts, k)) : take_prequant(rows_in(parts), k);
      const int64_t n = rows_in(parts);
      if (parts.size() == 1 || !compute) {  // one tensor (or slice): packed straight from the mapping
        uint8_t* dst = slabs->take(backend.packed_weight_bytes(wdt, n, k));
        if (compute) backend.pack_weight(parts[0].data, wdt, n, k, dst);
        return LinearWeight{dst, wdt, n, k, WeightFormat::Float, 0};
      }
      const size_t row_bytes = size_t(k) * esz;
      scratch.resize(size_t(n) * row_bytes);
      uint8_t* t = scratch.data();
      for (const Rows& r : parts) {
        std::memcpy(t, r.data, size_t(r.rows) * row_bytes);
        t += size_t(r.rows) * row_bytes;
      }
      uint8_t* dst = slabs->take(backend.packed_weight_bytes(wdt, n, k));
      backend.pack_weight(scratch.data(), wdt, n, k, dst);
      return LinearWeight{dst, wdt, n, k, WeightFormat::Float, 0};
    };
    // Quantized: each part quantized by rows (scales per row, or per row and group, so stacking
    // parts never changes a value), then packed as one weight.
    auto pack_as = [&](WeightFormat f, std::span<const Rows> parts, int64_t k) {
      if (packed_parts(parts))
        return compute ? pack_prequant(prequant_rows(parts, k)) : take_prequant(rows_in(parts), k);
      if (c.quant.method != QuantMethod::None) return pack_float(parts, k);  // a quantized checkpoint left it float
      const int32_t group = f == WeightFormat::Int8 ? 0 : fmt.group;
      if (!compute)
        return LinearWeight{slabs->take(backend.packed_quantized_bytes(f, rows_in(parts), k, group)), wdt,
                            rows_in(parts), k, f, group};
      QuantRows q(f, k, group);
      for (const Rows& r : parts) q.append_quantized(r.data, wdt, 0, r.rows);
      uint8_t* dst = slabs->take(backend.packed_quantized_bytes(f, q.rows(), k, group));
      backend.pack_quantized(q.view(), dst);
      return LinearWeight{dst, wdt, q.rows(), k, f, group};
    };
    // A projection in the layer format.
    auto pack = [&](std::span<const Rows> parts, int64_t k) {
      return quantized ? pack_as(fmt.layers, parts, k) : pack_float(parts, k);
    };
    // Columns [c0, c1) of a row-major [rows, k] tensor in the layer format (a row-parallel rank's
    // slice). Quantized: whole rows are quantized first, then sliced by whole groups, so the rank
    // holds exactly the values one rank would.
    auto pack_cols = [&](const Rows& r, int64_t k, int64_t c0, int64_t c1) {
      if (c0 == 0 && c1 == k) return pack(std::span<const Rows>(&r, 1), k);
      if (!r.packed.empty())
        return compute ? pack_prequant(prequant_rows(std::span<const Rows>(&r, 1), k).slice_cols(c0, c1))
                       : take_prequant(r.rows, c1 - c0);
      if (quantized && c.quant.method == QuantMethod::None) {
        const int32_t group = fmt.layers == WeightFormat::Int8 ? 0 : fmt.group;
        if (!compute)
          return LinearWeight{slabs->take(backend.packed_quantized_bytes(fmt.layers, r.rows, c1 - c0, group)), wdt,
                              r.rows, c1 - c0, fmt.layers, group};
        QuantRows q(fmt.layers, k, group);
        q.append_quantized(r.data, wdt, 0, r.rows);
        const QuantRows s = q.slice_cols(c0, c1);
        uint8_t* dst = slabs->take(backend.packed_quantized_bytes(fmt.layers, r.rows, c1 - c0, group));
        backend.pack_quantized(s.view(), dst);
        return LinearWeight{dst, wdt, r.rows, c1 - c0, fmt.layers, group};
      }
      if (!compute)
        return LinearWeight{slabs->take(backend.packed_weight_bytes(wdt, r.rows, c1 - c0)), wdt, r.rows, c1 - c0,
                            WeightFormat::Float, 0};
      const size_t row = size_t(c1 - c0) * esz;
      scratch.resize(size_t(r.rows) * row);
      for (int64_t i = 0; i < r.rows; ++i) std::memcpy(scratch.data() + size_t(i) * row, r.data + (size_t(i * k + c0)) * esz, row);
      uint8_t* dst = slabs->take(backend.packed_weight_bytes(wdt, r.rows, c1 - c0));
      backend.pack_weight(scratch.data(), wdt, r.rows, c1 - c0, dst);
      return LinearWeight{dst, wdt, r.rows, c1 - c0, WeightFormat::Float, 0};
    };
    // Rows [b, b + n) of a 2-D tensor.
    auto rows_of = [&](const std::string& name, int64_t b, int64_t n) -> Rows {
      if (std::string stem = prequantized_stem(ck, name); !stem.empty()) return {nullptr, n, stem, b};
      const TensorRef& r = ck.get(name);
      return {r.data() + size_t(b * r.info->shape[1]) * esz, n};
    };
    auto whole = [&](const std::string& name) -> Rows {
      if (std::string stem = prequantized_stem(ck, name); !stem.empty())
        return {nullptr, prequantized_shape(ck, stem)[0], stem, 0};
      const TensorRef& r = ck.get(name);
      return {r.data(), r.info->shape[0]};
    };
    auto release_tensor = [&](const std::string& name) {  // a float tensor, or a projection's packed ones
      if (std::string stem = prequantized_stem(ck, name); !stem.empty()) release_projection(ck, stem);
      else release(ck.get(name));
    };
    auto done = [&](std::initializer_list<std::string> names) {
      for (const std::string& n : names) release_tensor(n);
    };

    // Embedding and lm_head: a tied table is staged once, as the lm_head (looked up through it).
    // A quantized table is quantized 4096 rows at a time, each chunk's source pages released as it
    // goes, so the quantization buffers stay small (the vocabulary is 248,320 rows).
    // `table` is the whole [V, H] tensor; this rank's rows [vs.begin, vs.end) are staged.
    auto pack_head = [&](const uint8_t* table) {
      const uint8_t* rows = table + size_t(vs.begin * H) * esz;
      if (fmt.head == WeightFormat::Float) {
        const Rows r{rows, Vr};
        return pack_float(std::span<const Rows>(&r, 1), H);
      }
      const int32_t group = fmt.head == WeightFormat::Int8 ? 0 : fmt.group;
      uint8_t* dst = slabs->take(backend.packed_quantized_bytes(fmt.head, Vr, H, group));
      constexpr int64_t kChunkRows = 4096;  // a multiple of 16
      for (int64_t r0 = 0; compute && r0 < Vr; r0 += kChunkRows) {
        const int64_t r1 = std::min(Vr, r0 + kChunkRows);
        QuantRows q(fmt.head, H, group);
        q.append_quantized(rows, wdt, r0, r1);
        backend.pack_quantized(q.view(), dst, r0, Vr);
        release_range(rows + size_t(r0 * H) * esz, size_t((r1 - r0) * H) * esz);
      }
      return LinearWeight{dst, wdt, Vr, H, fmt.head, group};
    };
    if (c.tie_word_embeddings) {
      if (has_embed || has_head) {
        w.lm_head = pack_head(embed.data());
        if (has_embed) w.embed = w.lm_head.data;
        w.embed_in_lm_head = has_embed;
      }
    } else if (fmt.head != WeightFormat::Float) {  // a quantized table, looked up by rows
      if (has_embed) {
        w.embed_rows = pack_head(embed.data());
        w.embed = w.embed_rows.data;
      }
      if (has_head) w.lm_head = pack_head(ck.get("lm_head.weight").data());
      done({"lm_head.weight"});
    } else if (!has_embed) {
      if (has_head) w.lm_head = pack_head(ck.get("lm_head.weight").data());
      done({"lm_head.weight"});
    } else {
      uint8_t* table = slabs->take(size_t(Vr * H) * esz);
      const uint8_t* src = embed.data() + size_t(vs.begin * H) * esz;
      const size_t bytes = size_t(Vr * H) * esz, chunk = size_t(16) << 20;
      for (size_t off = 0; compute && off < bytes; off += chunk) {  // plain rows, copied 16 MiB at a time
        const size_t n = std::min(chunk, bytes - off);
        std::memcpy(table + off, src + off, n);
        release_range(src + off, n);
      }
      w.embed = table;
      if (has_head) w.lm_head = pack_head(ck.get("lm_head.weight").data());
      done({"lm_head.weight"});
    }
    release(embed);
    if (has_head) w.final_norm = vec_f32(P + "norm.weight", 1.0f);

    // One decoder layer (a main-stack layer, or the MTP head's): N(suffix) names its tensors.
    auto stage_layer = [&](Qwen3LayerWeights& L, const std::function<std::string(const std::string&)>& N, bool full,
                           bool sparse) {
      L.input_norm = vec_f32(N("input_layernorm.weight"), 1.0f);
      L.post_norm = vec_f32(N("post_attention_layernorm.weight"), 1.0f);
      if (full) {
        // q_proj rows per head h: [h·2hd, h·2hd + hd) query, [h·2hd + hd, (h+1)·2hd) gate.
        L.mixer = LayerMixer::GatedAttention;
        const std::string q = N("self_attn.q_proj.weight");
        std::vector<Rows> parts;
        for (int64_t h = h0; h < h0 + nh; ++h) parts.push_back(rows_of(q, 2 * h * hd, hd));
        parts.push_back(rows_of(N("self_attn.k_proj.weight"), g0 * hd, nkv * hd));
        parts.push_back(rows_of(N("self_attn.v_proj.weight"), g0 * hd, nkv * hd));
        for (int64_t h = h0; h < h0 + nh; ++h) parts.push_back(rows_of(q, (2 * h + 1) * hd, hd));
        L.qkv = pack(parts, H);  // [q (nq hd) | k | v | gate (nq hd)] of this rank's heads
        PYPTO_ASSERT(L.qkv.n_out == (2 * q_rows + 2 * kv_rows) / tp);
        L.o_proj = pack_cols(whole(N("self_attn.o_proj.weight")), q_rows, h0 * hd, (h0 + nh) * hd);
        done({N("self_attn.q_proj.weight"), N("self_attn.k_proj.weight"), N("self_attn.v_proj.weight"),
              N("self_attn.o_proj.weight")});
        L.q_norm = vec_f32(N("self_attn.q_norm.weight"), 1.0f);
        L.k_norm = vec_f32(N("self_attn.k_norm.weight"), 1.0f);
      } else {
        L.mixer = LayerMixer::GatedDeltaNet;
        GdnLayerWeights& G = L.gdn;
        // This rank's q, k (its key heads) and v (their value heads) rows, its z, then its b, a:
        // from Qwen3.5's separate in_proj_qkv / z / b / a, or picked out of Qwen3-Next's per-key-head
        // groups of in_proj_qkvz / in_proj_ba (model/qwen3_next_layout.h).
        std::vector<Rows> qkvz, ba;  // [q | k | v | z], [b | a]
        std::vector<std::string> sources;
        if (gdn_grouped_projections(c)) {
          sources = {N("linear_attn.in_proj_qkvz.weight"), N("linear_attn.in_proj_ba.weight")};
          const GroupedGdnRows g = qwen3_next_gdn_rows(c, k0, nk);
          for (const RowRange& r : g.qkvz) qkvz.push_back(rows_of(sources[0], r.begin, r.rows));
          for (const RowRange& r : g.ba) ba.push_back(rows_of(sources[1], r.begin, r.rows));
        } else {
          sources = {N("linear_attn.in_proj_qkv.weight"), N("linear_attn.in_proj_z.weight"),
                     N("linear_attn.in_proj_b.weight"), N("linear_attn.in_proj_a.weight")};
          qkvz = {rows_of(sources[0], k0 * dk, nk * dk), rows_of(sources[0], KD + k0 * dk, nk * dk),
                  rows_of(sources[0], 2 * KD + v0 * dv, nvr * dv), rows_of(sources[1], v0 * dv, nvr * dv)};
          ba = {rows_of(sources[2], v0, nvr), rows_of(sources[3], v0, nvr)};
        }
        if (!quantized) {
          std::vector<Rows> all = qkvz;
          all.insert(all.end(), ba.begin(), ba.end());
          G.in_proj = pack_float(all, H);  // [qkv (C) | z (Vd) | b (n_v) | a (n_v)]
        } else {
          G.in_proj = pack(qkvz, H);          // [qkv (C) | z (Vd)]
          G.in_proj_ba = pack_float(ba, H);  // [b (n_v) | a (n_v)]
        }
        PYPTO_ASSERT(G.in_proj.n_out + G.in_proj_ba.n_out == (C + Vd + 2 * nv) / tp);
        G.out_proj = pack_cols(whole(N("linear_attn.out_proj.weight")), Vd, v0 * dv, (v0 + nvr) * dv);
        for (const std::string& n : sources) release_tensor(n);
        done({N("linear_attn.out_proj.weight")});
        // [C, 1, K] → [C_rank, K]: the taps of this rank's q, k and v channels, in in_proj's order.
        G.conv = vec_f32_ranges(N("linear_attn.conv1d.weight"), {{k0 * dk * Kc, (k0 + nk) * dk * Kc},
                                                                {(KD + k0 * dk) * Kc, (KD + (k0 + nk) * dk) * Kc},
                                                                {(2 * KD + v0 * dv) * Kc, (2 * KD + (v0 + nvr) * dv) * Kc}});
        G.dt_bias = vec_f32_ranges(N("linear_attn.dt_bias"), {{v0, v0 + nvr}});
        const float* a_log = vec_f32_ranges(N("linear_attn.A_log"), {{v0, v0 + nvr}});
        float* neg = reinterpret_cast<float*>(slabs->take(size_t(nvr) * sizeof(float)));
        for (int64_t h = 0; compute && h < nvr; ++h) neg[h] = -std::exp(a_log[h]);  // as transformers: −A_log.float().exp()
        G.neg_exp_a = neg;
        G.norm = vec_f32(N("linear_attn.norm.weight"), 0.0f);  // the one plain (not 1 + w) norm
      }
      if (!sparse) {  // the dense SwiGLU MLP (dense Qwen3.5; Qwen3-Next's mlp_only_layers / decoder_sparse_step)
        const Rows gu[] = {rows_of(N("mlp.gate_proj.weight"), i0, I), rows_of(N("mlp.up_proj.weight"), i0, I)};
        L.gate_up = pack(gu, H);
        L.down = pack_cols(whole(N("mlp.down_proj.weight")), c.intermediate_size, i0, i0 + I);
        done({N("mlp.gate_proj.weight"), N("mlp.up_proj.weight"), N("mlp.down_proj.weight")});
        return;
      }
      // A sparse layer (every Qwen3.5-MoE layer); the router stays float like the other architectures'.
      L.sparse = true;
      const int64_t mI = c.moe_intermediate_size, sI = c.shared_expert_intermediate_size;
      const int64_t e0 = shard.first, e1 = shard.first + shard.count;  // this rank's experts
      const int64_t mIr = shard.inter, m0 = shard.inter_begin, sIr = sI / tp, s0 = rank * sIr;  // and columns
      L.expert_first = e0;
      const Rows router = whole(N("mlp.gate.weight"));
      L.router = pack_float(std::span<const Rows>(&router, 1), H);
      done({N("mlp.gate.weight")});
      if (ck.find(N("mlp.experts.gate_up_proj")) != nullptr) {  // gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I]
        const TensorRef& gu = ck.get(N("mlp.experts.gate_up_proj"));
        const TensorRef& dn = ck.get(N("mlp.experts.down_proj"));
        for (int64_t e = e0; e < e1; ++e) {
          const uint8_t* ge = gu.data() + size_t(e * 2 * mI * H) * esz;
          const Rows g[] = {{ge + size_t(m0 * H) * esz, mIr}, {ge + size_t((mI + m0) * H) * esz, mIr}};
          const Rows d{dn.data() + size_t(e * H * mI) * esz, H};
          L.experts.push_back({pack(g, H), pack_cols(d, mI, m0, m0 + mIr)});
          release_range(ge, size_t(2 * mI * H) * esz);  // this expert's source pages
          release_range(d.data, size_t(H * mI) * esz);
        }
        release(gu);
        release(dn);
      } else {
        for (int64_t e = 0; e < c.num_experts; ++e) {
          const std::string x = str_cat("mlp.experts.", e, ".");
          if (e < e0 || e >= e1) {  // another rank's expert
            done({N(x + "gate_proj.weight"), N(x + "up_proj.weight"), N(x + "down_proj.weight")});
            continue;
          }
          const Rows g[] = {rows_of(N(x + "gate_proj.weight"), m0, mIr), rows_of(N(x + "up_proj.weight"), m0, mIr)};
          L.experts.push_back({pack(g, H), pack_cols(whole(N(x + "down_proj.weight")), mI, m0, m0 + mIr)});
          done({N(x + "gate_proj.weight"), N(x + "up_proj.weight"), N(x + "down_proj.weight")});
        }
      }
      const Rows sgu[] = {rows_of(N("mlp.shared_expert.gate_proj.weight"), s0, sIr),
                          rows_of(N("mlp.shared_expert.up_proj.weight"), s0, sIr)};
      L.shared_expert.gate_up = pack(sgu, H);
      L.shared_expert.down = pack_cols(whole(N("mlp.shared_expert.down_proj.weight")), sI, s0, s0 + sIr);
      const Rows sg = whole(N("mlp.shared_expert_gate.weight"));
      L.shared_expert.gate = pack_float(std::span<const Rows>(&sg, 1), H);
      done({N("mlp.shared_expert.gate_proj.weight"), N("mlp.shared_expert.up_proj.weight"),
            N("mlp.shared_expert.down_proj.weight"), N("mlp.shared_expert_gate.weight")});
    };
    for (int i = lb; i < le; ++i)
      stage_layer(w.layers.emplace_back(), [&](const std::string& s) { return hybrid_layer_tensor(c, i, s); }, c.full_attention_layer(i),
                  c.sparse_layer(i));
    // The MTP head (speculative decoding, model/mtp_head.h): its norms, fc and one gated-attention
    // layer; embed_tokens and lm_head are the target's (staged above). Qwen3.5 / Qwen3.6 and
    // Qwen3-Next publish the same block (its FFN as mtp_layer_sparse says: Qwen3-Next's published
    // MTP layer is sparse like its main stack, its experts per-expert 2-D tensors as there; its
    // norms (1 + w) too).
    if (opt.mtp) {
      if (ck.find("mtp.fc.weight") == nullptr)
        fail(ck.dir(), ": --speculative-config method mtp needs the checkpoint's MTP head (mtp.* tensors), and it has ",
             "none (mtp.fc.weight is missing): use another method (ngram, draft_model)");
      validate_hybrid_mtp_tensors(ck);
      w.mtp.present = true;
      w.mtp.norm_embed = vec_f32("mtp.pre_fc_norm_embedding.weight", 1.0f);
      w.mtp.norm_hidden = vec_f32("mtp.pre_fc_norm_hidden.weight", 1.0f);
      const Rows fc = whole("mtp.fc.weight");
      w.mtp.fc = pack(std::span<const Rows>(&fc, 1), 2 * H);  // [H, 2H]: [embedding | hidden] inputs
      done({"mtp.fc.weight"});
      // The k | v rows once more, apart (before stage_layer releases their pages): rows whose
      // output no pass reads only write their KV (MtpHead::store_kv). Each output row is staged
      // as in qkv, so it gives the same values.
      const std::string mk = "mtp.layers.0.self_attn.k_proj.weight", mv = "mtp.layers.0.self_attn.v_proj.weight";
      const Rows kv[] = {rows_of(mk, g0 * hd, nkv * hd), rows_of(mv, g0 * hd, nkv * hd)};
      w.mtp.kv = pack(kv, H);
      PYPTO_ASSERT(w.mtp.kv.n_out == 2 * kv_rows / tp);
      stage_layer(w.mtp.layer, [](const std::string& s) { return "mtp.layers.0." + s; }, /*full=*/true,
                  hybrid_mtp_layer_sparse(c));
      w.mtp.norm = vec_f32("mtp.norm.weight", 1.0f);
    }
    w.weight_formats = fmt.describe();
    w.layer_format = fmt.layers;
    w.resident_bytes = slabs->bytes;
    w.storage = slabs;
    return w;
  };
  if (opt.compile_cache_dir.empty()) {
    auto slabs = std::make_shared<HybridSlabs>();
    return stage_into(slabs);
  }
  return stage_hybrid_cached(ck, backend, opt, fmt, lb, le, stage_into);
}

}  // namespace pypto