#include "model/quantized_source.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.h"
#include "io/quant_config.h"
#include "model/moe_staging.h"

namespace pypto {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The tensor `name` with the given dtype(s) and 2-D shape, or an Error naming what differs.
const TensorRef& get_checked(const Checkpoint& ck, const std::string& name, std::initializer_list<DType> dtypes,
                             const Shape& shape) {
  const TensorRef& t = ck.get(name);
  bool dtype_ok = false;
  std::string allowed;
  for (DType d : dtypes) {
    dtype_ok |= t.info->dtype == d;
    allowed += std::string(allowed.empty() ? "" : " or ") + dtype_name(d);
  }
  if (!dtype_ok || t.info->shape != shape)
    fail(ck.dir(), ": tensor '", name, "' is ", dtype_name(t.info->dtype), " ", shape_str(t.info->shape),
         ", expected ", allowed, " ", shape_str(shape));
  return t;
}

// Resolves r1 = -1 / c1 = -1 to the full extent and checks 0 <= r0 < r1 <= rows (same for columns).
void resolve_slice(const std::string& proj, int64_t rows, int64_t cols, int64_t r0, int64_t& r1, int64_t c0,
                   int64_t& c1) {
  if (r1 < 0) r1 = rows;
  if (c1 < 0) c1 = cols;
  if (r0 < 0 || r0 >= r1 || r1 > rows || c0 < 0 || c0 >= c1 || c1 > cols)
    fail(proj, ": slice rows [", r0, ", ", r1, ") x columns [", c0, ", ", c1, ") is not inside W [", rows, ", ",
         cols, "]");
}

// The [out, in] of each quantized projection of layer i: attention, then the dense MLP or (a
// Qwen3-MoE sparse layer) every expert's.
std::vector<MoeProjection> layer_projections(const ModelConfig& c, int i) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  std::vector<MoeProjection> v = {{"self_attn.q_proj", c.q_size(), H}, {"self_attn.k_proj", c.kv_size(), H},
                                  {"self_attn.v_proj", c.kv_size(), H}, {"self_attn.o_proj", H, c.q_size()}};
  if (!c.sparse_layer(i)) {
    v.push_back({"mlp.gate_proj", I, H});
    v.push_back({"mlp.up_proj", I, H});
    v.push_back({"mlp.down_proj", H, I});
    return v;
  }
  for (MoeProjection& p : moe_expert_projections(c)) v.push_back(std::move(p));
  return v;
}

}  // namespace

Fp8Source read_fp8_projection(const Checkpoint& ck, const std::string& proj, int64_t r0, int64_t r1, int64_t c0,
                              int64_t c1) {
  const QuantConfig& qc = ck.config().quant;
  PYPTO_ASSERT(qc.method == QuantMethod::Fp8, "read_fp8_projection on a ", quant_method_name(qc.method),
               " checkpoint");
  const TensorRef& w = ck.get(proj + ".weight");
  if (w.info->dtype != DType::F8_E4M3 || w.info->shape.size() != 2)
    fail(ck.dir(), ": tensor '", proj, ".weight' is ", dtype_name(w.info->dtype), " ", shape_str(w.info->shape),
         ", expected a 2-D F8_E4M3 [out, in] weight (quant_method fp8)");
  const int64_t N = w.info->shape[0], K = w.info->shape[1];
  const int64_t bn = qc.fp8_block_n, bk = qc.fp8_block_k;
  const int64_t GN = ceil_div(N, bn), GK = ceil_div(K, bk);
  const TensorRef& s =
      get_checked(ck, proj + ".weight_scale_inv", {DType::BF16, DType::F16, DType::F32}, Shape{GN, GK});
  resolve_slice(proj, N, K, r0, r1, c0, c1);

  Fp8Source src;
  src.n = r1 - r0;
  src.k = c1 - c0;
  src.ld = K;
  src.e4m3 = w.data() + r0 * K + c0;
  src.block_n = static_cast<int32_t>(bn);
  src.block_k = static_cast<int32_t>(bk);
  src.row_phase = static_cast<int32_t>(r0 % bn);
  src.col_phase = static_cast<int32_t>(c0 % bk);
  src.grid_n = ceil_div(src.n + src.row_phase, bn);
  src.grid_k = ceil_div(src.k + src.col_phase, bk);
  src.scale.resize(static_cast<size_t>(src.grid_n * src.grid_k));
  const int64_t gr0 = r0 / bn, gc0 = c0 / bk;
  for (int64_t i = 0; i < src.grid_n; i++)
    for (int64_t j = 0; j < src.grid_k; j++)
      src.scale[static_cast<size_t>(i * src.grid_k + j)] =
          load_as_f32(s.data(), s.info->dtype, static_cast<size_t>((gr0 + i) * GK + gc0 + j));
  return src;
}

AwqSource read_awq_projection(const Checkpoint& ck, const std::string& proj, int64_t r0, int64_t r1, int64_t c0,
                              int64_t c1) {
  const QuantConfig& qc = ck.config().quant;
  PYPTO_ASSERT(qc.method == QuantMethod::Awq, "read_awq_projection on a ", quant_method_name(qc.method),
               " checkpoint");
  const int64_t G = qc.awq_group;
  // qweight [in, out / 8] fixes the shape; qzeros and scales must agree with it.
  const TensorRef& qw = ck.get(proj + ".qweight");
  if (qw.info->dtype != DType::I32 || qw.info->shape.size() != 2)
    fail(ck.dir(), ": tensor '", proj, ".qweight' is ", dtype_name(qw.info->dtype), " ", shape_str(qw.info->shape),
         ", expected a 2-D I32 [in, out / 8] (quant_method awq)");
  const int64_t K = qw.info->shape[0], N8 = qw.info->shape[1], N = N8 * 8;
  if (K % G != 0)
    fail(ck.dir(), ": tensor '", proj, ".qweight' has ", K, " input rows, not a multiple of the AWQ group_size ", G);
  const TensorRef& qz = get_checked(ck, proj + ".qzeros", {DType::I32}, Shape{K / G, N8});
  const TensorRef& sc = get_checked(ck, proj + ".scales", {DType::F16, DType::BF16}, Shape{K / G, N});
  resolve_slice(proj, N, K, r0, r1, c0, c1);
  if (r0 % 8 || r1 % 8 || c0 % G || c1 % G)
    fail(proj, ": slice rows [", r0, ", ", r1, ") x columns [", c0, ", ", c1,
         ") does not align with the AWQ packing: rows must be multiples of 8 (one int32 packs 8 output "
         "features) and columns multiples of group_size ",
         G);

  AwqSource src;
  src.n = r1 - r0;
  src.k = c1 - c0;
  src.group = static_cast<int32_t>(G);
  src.groups = src.k / G;
  src.q.resize(static_cast<size_t>(src.n * src.k));
  src.zero.resize(static_cast<size_t>(src.n * src.groups));
  src.scale.resize(static_cast<size_t>(src.n * src.groups));
  const auto* qwp = reinterpret_cast<const uint32_t*>(qw.data());
  const auto* qzp = reinterpret_cast<const uint32_t*>(qz.data());
  const int64_t j0 = r0 / 8, j1 = r1 / 8, g0 = c0 / G;

  // qweight row `kk` (an input feature), word j holds out features 8j + kAwqOrder[s] in nibble s.
  // Transposing to [n, k]: tiles of 64 input rows keep the scattered writes within a few lines,
  // and 8 input rows at a time make each output row's 8 bytes one store.
  constexpr int64_t kTile = 64;
  static_assert(std::endian::native == std::endian::little, "the 8-byte stores put byte i at address + i");
  for (int64_t kt = c0; kt < c1; kt += kTile) {
    const int64_t kend = std::min(c1, kt + kTile);
    for (int64_t j = j0; j < j1; j++) {
      uint8_t* rows[8];  // output row of nibble slot s; column kk - c0
      for (int s = 0; s < 8; s++) rows[s] = src.q.data() + (8 * j + kAwqOrder[s] - r0) * src.k;
      int64_t kk = kt;
      for (; kk + 8 <= kend; kk += 8) {
        uint32_t w[8];
        for (int i = 0; i < 8; i++) w[i] = qwp[(kk + i) * N8 + j];
        for (int s = 0; s < 8; s++) {
          uint64_t v = 0;  // byte i = nibble s of input row kk + i (little-endian store)
          for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>((w[i] >> (4 * s)) & 15u) << (8 * i);
          std::memcpy(rows[s] + (kk - c0), &v, 8);
        }
      }
      for (; kk < kend; kk++)
        for (int s = 0; s < 8; s++) rows[s][kk - c0] = static_cast<uint8_t>((qwp[kk * N8 + j] >> (4 * s)) & 15u);
    }
  }
  for (int64_t g = 0; g < src.groups; g++) {
    for (int64_t j = j0; j < j1; j++) {
      const uint32_t word = qzp[(g0 + g) * N8 + j];
      for (int s = 0; s < 8; s++) {
        const int64_t r = 8 * j + kAwqOrder[s] - r0;
        src.zero[static_cast<size_t>(r * src.groups + g)] = static_cast<uint8_t>((word >> (4 * s)) & 15u);
      }
    }
    for (int64_t r = 0; r < src.n; r++)
      src.scale[static_cast<size_t>(r * src.groups + g)] =
          load_as_f32(sc.data(), sc.info->dtype, static_cast<size_t>((g0 + g) * N + r0 + r));
  }
  return src;
}

AwqSource read_gptq_projection(const Checkpoint& ck, const std::string& proj, int64_t r0, int64_t r1, int64_t c0,
                               int64_t c1) {
  const QuantConfig& qc = ck.config().quant;
  PYPTO_ASSERT(qc.method == QuantMethod::Gptq, "read_gptq_projection on a ", quant_method_name(qc.method),
               " checkpoint");
  const int64_t G = qc.gptq_group;
  // qweight [in / 8, out] fixes the shape; qzeros, scales and g_idx must agree with it.
  const TensorRef& qw = ck.get(proj + ".qweight");
  if (qw.info->dtype != DType::I32 || qw.info->shape.size() != 2)
    fail(ck.dir(), ": tensor '", proj, ".qweight' is ", dtype_name(qw.info->dtype), " ", shape_str(qw.info->shape),
         ", expected a 2-D I32 [in / 8, out] (quant_method gptq)");
  const int64_t K8 = qw.info->shape[0], K = K8 * 8, N = qw.info->shape[1];
  if (K % G != 0 || N % 8 != 0)
    fail(ck.dir(), ": tensor '", proj, ".qweight' [", K8, ", ", N, "] holds W [", N, ", ", K,
         "]: in must be a multiple of the GPTQ group_size ", G, " and out a multiple of 8 (qzeros packs 8 per int32)");
  const int64_t N8 = N / 8, groups_all = K / G;
  const TensorRef& qz = get_checked(ck, proj + ".qzeros", {DType::I32}, Shape{groups_all, N8});
  const TensorRef& sc = get_checked(ck, proj + ".scales", {DType::F16, DType::BF16}, Shape{groups_all, N});
  resolve_slice(proj, N, K, r0, r1, c0, c1);
  if (r0 % 8 || r1 % 8 || c0 % G || c1 % G || c0 % 8 || c1 % 8)
    fail(proj, ": slice rows [", r0, ", ", r1, ") x columns [", c0, ", ", c1,
         ") does not align with the GPTQ packing: rows must be multiples of 8 (qzeros packs 8 output features per "
         "int32) and columns multiples of 8 and of group_size ",
         G);
  // g_idx maps each input row to its group. Sequential (desc_act false) it is k / group; an
  // act-order checkpoint permutes it, which would need the inputs reordered: not served.
  if (const TensorRef* gi = ck.find(proj + ".g_idx")) {
    get_checked(ck, proj + ".g_idx", {DType::I32}, Shape{K});
    const auto* g = reinterpret_cast<const int32_t*>(gi->data());
    for (int64_t k = 0; k < K; k++)
      if (g[k] != k / G)
        fail(ck.dir(), ": tensor '", proj, ".g_idx' gives input ", k, " group ", g[k], ", not ", k / G,
             " = input / group_size: act-order GPTQ (quantization_config.desc_act ",
             qc.gptq_desc_act ? "true" : "false", ") is not supported; only g_idx[k] = k / group_size");
  }

  AwqSource src;
  src.n = r1 - r0;
  src.k = c1 - c0;
  src.group = static_cast<int32_t>(G);
  src.groups = src.k / G;
  src.q.resize(static_cast<size_t>(src.n * src.k));
  src.zero.resize(static_cast<size_t>(src.n * src.groups));
  src.scale.resize(static_cast<size_t>(src.n * src.groups));
  const auto* qwp = reinterpret_cast<const uint32_t*>(qw.data());
  const auto* qzp = reinterpret_cast<const uint32_t*>(qz.data());
  const int64_t g0 = c0 / G;

  // qweight word [kr][n] holds inputs 8kr..8kr+7 of output n, nibble s = input 8kr + s: one
  // word is 8 consecutive bytes of output row n. Rows in tiles of 64 outputs keep the reads of
  // a qweight row contiguous and the writes within 64 rows' lines.
  constexpr int64_t kTile = 64;
  static_assert(std::endian::native == std::endian::little, "the 8-byte stores put byte i at address + i");
  for (int64_t nt = r0; nt < r1; nt += kTile) {
    const int64_t nend = std::min(r1, nt + kTile);
    for (int64_t kr = c0 / 8; kr < c1 / 8; kr++) {
      const uint32_t* words = qwp + kr * N;
      for (int64_t n = nt; n < nend; n++) {
        const uint32_t w = words[n];
        uint64_t v = 0;  // byte s = nibble s
        for (int s = 0; s < 8; s++) v |= static_cast<uint64_t>((w >> (4 * s)) & 15u) << (8 * s);
        std::memcpy(src.q.data() + (n - r0) * src.k + (8 * kr - c0), &v, 8);
      }
    }
  }
  const uint32_t zero_offset = qc.gptq_v1_zeros ? 1 : 0;
  for (int64_t g = 0; g < src.groups; g++) {
    for (int64_t n = r0; n < r1; n++) {
      const uint32_t stored = (qzp[(g0 + g) * N8 + n / 8] >> (4 * (n % 8))) & 15u;
      const uint32_t z = stored + zero_offset;
      if (z > 15)
        fail(ck.dir(), ": tensor '", proj, ".qzeros' group ", g0 + g, " output ", n, ": stored zero point ", stored,
             " is ", z, " under the v1 convention (checkpoint_format \"gptq\": stored = zero - 1), which does not fit 4 "
             "bits (the tools' wrap of a zero point 0); re-export it as checkpoint_format \"gptq_v2\"");
      const size_t at = static_cast<size_t>((n - r0) * src.groups + g);
      src.zero[at] = static_cast<uint8_t>(z);
      src.scale[at] = load_as_f32(sc.data(), sc.info->dtype, static_cast<size_t>((g0 + g) * N + n));
    }
  }
  return src;
}

AwqSource read_int4_projection(const Checkpoint& ck, const std::string& proj, int64_t r0, int64_t r1, int64_t c0,
                               int64_t c1) {
  if (ck.config().quant.method == QuantMethod::Gptq) return read_gptq_projection(ck, proj, r0, r1, c0, c1);
  return read_awq_projection(ck, proj, r0, r1, c0, c1);
}

void release_projection(const Checkpoint& ck, const std::string& proj) {
  for (const char* suffix : {".weight", ".weight_scale_inv", ".qweight", ".qzeros", ".scales", ".g_idx"})
    if (const TensorRef* t = ck.find(proj + suffix)) t->file->release(*t->info);
}

void validate_quantized_projections(const Checkpoint& ck, std::vector<std::string>& problems) {
  const ModelConfig& c = ck.config();
  const QuantConfig& qc = c.quant;
  if (qc.method == QuantMethod::None) return;
  auto expect = [&](const std::string& name, std::initializer_list<DType> dtypes, const Shape& shape,
                    bool optional = false) {
    const TensorRef* r = ck.find(name);
    std::string allowed;
    bool dtype_ok = false;
    for (DType d : dtypes) {
      allowed += std::string(allowed.empty() ? "" : " or ") + dtype_name(d);
      dtype_ok |= r && r->info->dtype == d;
    }
    if (!r) {
      if (!optional) problems.push_back(str_cat(name, ": missing (expected ", allowed, " ", shape_str(shape), ")"));
      return;
    }
    if (r->info->shape != shape)
      problems.push_back(str_cat(name, ": shape ", shape_str(r->info->shape), ", expected ", shape_str(shape)));
    if (!dtype_ok)
      problems.push_back(str_cat(name, ": dtype ", dtype_name(r->info->dtype), ", expected ", allowed, " (",
                                 quant_method_name(qc.method), " checkpoint)"));
  };
  const std::initializer_list<DType> floats = {DType::BF16, DType::F16, DType::F32};
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const TensorRef* embed = ck.find("model.embed_tokens.weight");
  const DType wdt = embed ? embed->info->dtype : c.torch_dtype;

  // Unquantized tensors: embeddings, lm_head, norms (and Qwen2's q/k/v biases) in a float dtype.
  expect("model.embed_tokens.weight", floats, {V, H});
  if (!c.tie_word_embeddings) expect("lm_head.weight", floats, {V, H});
  expect("model.norm.weight", floats, {H});
  for (int i = 0; i < c.num_hidden_layers; i++) {
    const std::string p = str_cat("model.layers.", i, ".");
    expect(p + "input_layernorm.weight", floats, {H});
    expect(p + "post_attention_layernorm.weight", floats, {H});
    if (c.qk_norm) {
      expect(p + "self_attn.q_norm.weight", floats, {c.head_dim}, true);
      expect(p + "self_attn.k_norm.weight", floats, {c.head_dim}, true);
    }
    if (c.attention_bias) {
      expect(p + "self_attn.q_proj.bias", floats, {c.q_size()});
      expect(p + "self_attn.k_proj.bias", floats, {c.kv_size()});
      expect(p + "self_attn.v_proj.bias", floats, {c.kv_size()});
    }
    if (c.sparse_layer(i)) {
      // The router stays unquantized (FP8 lists it in modules_to_not_convert; GPTQ stores a plain
      // .weight), staged in the embedding table's dtype.
      const std::string router = p + "mlp.gate.weight";
      if (ck.find(p + "mlp.gate.qweight") || ck.find(router + "_scale_inv"))
        problems.push_back(str_cat(router, ": a quantized router is not supported (Qwen's ",
                                   quant_method_name(qc.method), " checkpoints keep it ", dtype_name(wdt), ")"));
      expect(router, {wdt}, {c.num_experts, H});
    }
    for (const MoeProjection& ps : layer_projections(c, i)) {
      const std::string name = p + ps.name;
      if (qc.method == QuantMethod::Fp8) {
        expect(name + ".weight", {DType::F8_E4M3}, {ps.out, ps.in});
        expect(name + ".weight_scale_inv", floats,
               {ceil_div(ps.out, qc.fp8_block_n), ceil_div(ps.in, qc.fp8_block_k)});
      } else if (qc.method == QuantMethod::Gptq) {
        const int64_t G = qc.gptq_group;
        if (ps.in % G != 0 || ps.in % 8 != 0 || ps.out % 8 != 0) {
          problems.push_back(str_cat(name, ": [out ", ps.out, ", in ", ps.in,
                                     "] cannot be GPTQ-packed (in must be a multiple of 8 and of group_size ", G,
                                     ", out a multiple of 8)"));
          continue;
        }
        expect(name + ".qweight", {DType::I32}, {ps.in / 8, ps.out});
        expect(name + ".qzeros", {DType::I32}, {ps.in / G, ps.out / 8});
        expect(name + ".scales", {DType::F16, DType::BF16}, {ps.in / G, ps.out});
        expect(name + ".g_idx", {DType::I32}, {ps.in}, /*optional=*/true);
      } else {
        const int64_t G = qc.awq_group;
        if (ps.in % G != 0 || ps.out % 8 != 0) {
          problems.push_back(str_cat(name, ": [out ", ps.out, ", in ", ps.in,
                                     "] cannot be AWQ-packed (in must be a multiple of group_size ", G,
                                     ", out a multiple of 8)"));
          continue;
        }
        expect(name + ".qweight", {DType::I32}, {ps.in, ps.out / 8});
        expect(name + ".qzeros", {DType::I32}, {ps.in / G, ps.out / 8});
        expect(name + ".scales", {DType::F16, DType::BF16}, {ps.in / G, ps.out});
      }
    }
  }
}

}  // namespace pypto
