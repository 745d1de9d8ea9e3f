// The scalar reference backend: the definition of every op, written as the plainest loops that
// follow the math. Dot products, sums of squares and softmax accumulate in double so that the
// reference is more accurate than any optimised kernel compared against it. Single-threaded,
// slow, never used for serving; tests and debugging only.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/kv_dtype.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/kv_quant.h"

namespace pypto {
namespace {

// The reference keeps quantized weights plain (QuantizedWeight's arrays, each 64-byte aligned):
// values [n, k] (one byte each) | scale f32 [n, groups] | zero u8 [n, groups] (Int4).
struct PlainQuant {
  size_t scale_offset = 0, zero_offset = 0, total = 0;
  int64_t groups = 1;
};
size_t align64(size_t n) { return (n + 63) / 64 * 64; }
PlainQuant plain_quant(WeightFormat f, int64_t n, int64_t k, int32_t group) {
  PlainQuant p;
  p.groups = f == WeightFormat::Int8 ? 1 : (k + group - 1) / group;
  p.scale_offset = align64(static_cast<size_t>(n * k));
  p.zero_offset = p.scale_offset + align64(static_cast<size_t>(n * p.groups) * 4);
  p.total = p.zero_offset + (f == WeightFormat::Int4 ? align64(static_cast<size_t>(n * p.groups)) : 0);
  return p;
}

// W[r][c] of a plain quantized weight, dequantized in f32 exactly as the formats define it.
float dequant(const LinearWeight& w, const PlainQuant& p, int64_t r, int64_t c) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  const float* scale = reinterpret_cast<const float*>(base + p.scale_offset);
  const uint8_t v = base[r * w.k_in + c];
  switch (w.format) {
    case WeightFormat::Int8: return static_cast<float>(static_cast<int8_t>(v)) * scale[r];
    case WeightFormat::Int4: {
      const int64_t g = r * p.groups + c / w.group;
      return static_cast<float>(int(v) - int(base[p.zero_offset + g])) * scale[g];
    }
    case WeightFormat::Fp8: return e4m3_to_f32(v) * scale[r * p.groups + c / w.group];
    case WeightFormat::Float: break;
  }
  PYPTO_ASSERT(false, "dequant of a float weight");
  return 0;
}

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(QuantActivations act) : act_(act) {}
  const char* name() const override { return "cpu-scalar"; }
  QuantActivations quant_activations() const override { return act_; }

  size_t packed_quantized_bytes(WeightFormat format, int64_t n_out, int64_t k_in, int32_t group) const override {
    return plain_quant(format, n_out, k_in, group).total;
  }
  void pack_quantized(const QuantizedWeight& s, void* dst, int64_t row0, int64_t n_total) const override {
    const PlainQuant p = plain_quant(s.format, n_total < 0 ? s.n_out : n_total, s.k_in, s.group);
    auto* d = static_cast<uint8_t*>(dst);
    const void* values = s.format == WeightFormat::Int8 ? static_cast<const void*>(s.q8)
                         : s.format == WeightFormat::Int4 ? static_cast<const void*>(s.q4)
                                                          : static_cast<const void*>(s.e4m3);
    std::memcpy(d + row0 * s.k_in, values, static_cast<size_t>(s.n_out * s.k_in));
    std::memcpy(d + p.scale_offset + row0 * p.groups * 4, s.scale, static_cast<size_t>(s.n_out * p.groups) * 4);
    if (s.format == WeightFormat::Int4)
      std::memcpy(d + p.zero_offset + row0 * p.groups, s.zero, static_cast<size_t>(s.n_out * p.groups));
  }

  // Quantized weights. f32 activations: Σ_k x · dequant(W) in double. Bf16Pair (Int8 / Int4
  // weights): the same with x replaced by hi + lo, hi = bf16(x), lo = bf16(x − hi) (both round to
  // nearest even). Int8 activations (Int8 / Int4 weights): x quantized per row (backend.h
  // int8_row_inv), integer sums per group, scaled.
  void linear_quant(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) {
    const PlainQuant p = plain_quant(w.format, w.n_out, w.k_in, w.group);
    const auto* base = static_cast<const uint8_t*>(w.data);
    const float* scale = reinterpret_cast<const float*>(base + p.scale_offset);
    const bool int8 = act_ == QuantActivations::Int8 && w.format != WeightFormat::Fp8;
    const bool pair = act_ == QuantActivations::Bf16Pair && w.format != WeightFormat::Fp8;
    if (act_ == QuantActivations::Int16 && w.format != WeightFormat::Fp8) return linear_int16(x, m, w, bias, y);
    std::vector<int> xq(static_cast<size_t>(w.k_in));
    std::vector<float> xs(static_cast<size_t>(w.k_in));
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * w.k_in;
      if (pair) {
        for (int64_t c = 0; c < w.k_in; ++c) {
          const float hi = bf16_to_f32(f32_to_bf16(xi[c]));
          xs[size_t(c)] = hi + bf16_to_f32(f32_to_bf16(xi[c] - hi));  // exact in f32
        }
        xi = xs.data();
      }
      float amax = 0.0f;
      for (int64_t c = 0; c < w.k_in; ++c) amax = std::max(amax, std::fabs(xi[c]));
      const float inv = int8_row_inv(amax);
      for (int64_t c = 0; c < w.k_in; ++c)
        xq[size_t(c)] = std::min(127, std::max(-127, static_cast<int>(std::nearbyint(xi[c] * inv))));
      for (int64_t n = 0; n < w.n_out; ++n) {
        double acc = 0.0;
        if (!int8) {
          for (int64_t c = 0; c < w.k_in; ++c) acc += static_cast<double>(xi[c]) * dequant(w, p, n, c);
        } else if (w.format == WeightFormat::Int8) {
          int64_t s = 0;
          for (int64_t c = 0; c < w.k_in; ++c) s += int64_t(xq[size_t(c)]) * static_cast<int8_t>(base[n * w.k_in + c]);
          acc = static_cast<double>(s) * scale[n] * int8_row_scale(amax);
        } else {
          for (int64_t g = 0; g < p.groups; ++g) {
            int64_t s = 0;
            const int z = base[p.zero_offset + n * p.groups + g];
            for (int64_t c = g * w.group; c < std::min<int64_t>(w.k_in, (g + 1) * w.group); ++c)
              s += int64_t(xq[size_t(c)]) * (int(base[n * w.k_in + c]) - z);
            acc += static_cast<double>(s) * scale[n * p.groups + g];
          }
          acc *= int8_row_scale(amax);
        }
        if (bias) acc += bias[n];
        y[i * w.n_out + n] = static_cast<float>(acc);
      }
    }
  }

  // Int16 activations (Int8 / Int4 weights): x quantized per row and block of
  // int16_act_block(format, group) inputs (backend.h int16_block_inv), exact integer sums per block,
  // y = Σ_b xscale_b · Σ_{k∈b} xq · (q − zero) · scale, in double.
  void linear_int16(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) {
    const PlainQuant p = plain_quant(w.format, w.n_out, w.k_in, w.group);
    const auto* base = static_cast<const uint8_t*>(w.data);
    const float* scale = reinterpret_cast<const float*>(base + p.scale_offset);
    const int64_t block = int16_act_block(w.format, w.group), blocks = (w.k_in + block - 1) / block;
    const bool int4 = w.format == WeightFormat::Int4;
    std::vector<int> xq(static_cast<size_t>(w.k_in));
    std::vector<float> xs(static_cast<size_t>(blocks));
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * w.k_in;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t c0 = b * block, c1 = std::min(w.k_in, c0 + block);
        float amax = 0.0f;
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(xi[c]));
        const float inv = int16_block_inv(amax);
        xs[size_t(b)] = int16_block_scale(amax);
        for (int64_t c = c0; c < c1; ++c)
          xq[size_t(c)] = std::min(32767, std::max(-32767, static_cast<int>(std::nearbyint(xi[c] * inv))));
      }
      for (int64_t n = 0; n < w.n_out; ++n) {
        double acc = 0.0;
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t c0 = b * block, c1 = std::min(w.k_in, c0 + block);
          int64_t s = 0;
          for (int64_t c = c0; c < c1; ++c) {
            const int q = int4 ? int(base[n * w.k_in + c]) - int(base[p.zero_offset + n * p.groups + c / w.group])
                               : int(static_cast<int8_t>(base[n * w.k_in + c]));
            s += int64_t(xq[size_t(c)]) * q;
          }
          const double ws = int4 ? scale[n * p.groups + c0 / w.group] : scale[n];
          acc += static_cast<double>(s) * xs[size_t(b)] * ws;
        }
        if (bias) acc += bias[n];
        y[i * w.n_out + n] = static_cast<float>(acc);
      }
    }
  }

  size_t packed_weight_bytes(DType dtype, int64_t n_out, int64_t k_in) const override {
    return plain_weight_bytes(dtype, n_out, k_in);
  }
  void pack_weight(const void* src, DType dtype, int64_t n_out, int64_t k_in, void* dst) const override {
    std::memcpy(dst, src, static_cast<size_t>(n_out * k_in) * dtype_size(dtype));
  }
  bool weight_layout_is_plain(DType) const override { return true; }

  // y[i, n] = Σ_k x[i, k] · W[n, k] (+ bias[n])
  void linear(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) override {
    if (w.format != WeightFormat::Float) return linear_quant(x, m, w, bias, y);
    check_weight_dtype(w.dtype);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * w.k_in;
      for (int64_t n = 0; n < w.n_out; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < w.k_in; ++k)
          acc += static_cast<double>(xi[k]) * load_as_f32(w.data, w.dtype, static_cast<size_t>(n * w.k_in + k));
        if (bias) acc += bias[n];
        y[i * w.n_out + n] = static_cast<float>(acc);
      }
    }
  }

  // y = x / sqrt(mean(x²) + eps) · gamma, per row of d
  void rms_norm(const float* x, const float* gamma, int64_t m, int64_t d, float eps, float* y) override {
    for (int64_t i = 0; i < m; ++i) {
      double ss = 0.0;
      for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(x[i * d + j]) * x[i * d + j];
      double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
      for (int64_t j = 0; j < d; ++j) y[i * d + j] = static_cast<float>(x[i * d + j] * inv * gamma[j]);
    }
  }

  // Rotate-half RoPE (Hugging Face / GPT-NeoX convention): within each head the pair
  // (x[j], x[j + half]) is rotated by angle pos · theta^(-2j / head_dim):
  //   x'[j]        = x[j] cos a - x[j + half] sin a
  //   x'[j + half] = x[j + half] cos a + x[j] sin a
  void rope(float* x, const int32_t* positions, int64_t m, int32_t n_heads, int32_t head_dim,
            const RopeSpec& rope) override {
    PYPTO_ASSERT(head_dim % 2 == 0, "head_dim ", head_dim);
    const int32_t half = head_dim / 2;
    const std::vector<double> inv_freq = rope_inv_freq(rope, head_dim);
    for (int64_t i = 0; i < m; ++i) {
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = x + (i * n_heads + h) * head_dim;
        for (int32_t j = 0; j < half; ++j) {
          const double a = static_cast<double>(positions[i]) * inv_freq[size_t(j)];
          const double c = std::cos(a) * rope.attention_factor, s = std::sin(a) * rope.attention_factor;
          const double x1 = v[j], x2 = v[j + half];
          v[j] = static_cast<float>(x1 * c - x2 * s);
          v[j + half] = static_cast<float>(x2 * c + x1 * s);
        }
      }
    }
  }

  // out = silu(gate) · up, silu(g) = g / (1 + e^-g)
  void silu_mul(const float* gate_up, int64_t m, int64_t inter, float* out) override {
    for (int64_t i = 0; i < m; ++i) {
      const float* g = gate_up + i * 2 * inter;
      const float* u = g + inter;
      for (int64_t j = 0; j < inter; ++j) {
        double gj = g[j];
        out[i * inter + j] = static_cast<float>(gj / (1.0 + std::exp(-gj)) * u[j]);
      }
    }
  }

  void embedding(const int32_t* ids, int64_t m, const void* table, DType dtype, int64_t d, float* out) override {
    check_weight_dtype(dtype);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < d; ++j)
        out[i * d + j] = load_as_f32(table, dtype, static_cast<size_t>(ids[i]) * d + j);
  }

  void add_inplace(float* y, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }

  void kv_store(const float* k, const float* v, const int64_t* slot_mapping, int64_t m,
                const KvCacheLayer& cache) override {
    check_kv_dtype(cache.dtype);
    const int64_t hd = cache.head_dim, row = static_cast<int64_t>(cache.n_kv_heads) * hd;
    for (int64_t t = 0; t < m; ++t) {
      int64_t slot = slot_mapping[t];
      if (slot < 0) continue;  // padding token: nothing to store
      PYPTO_ASSERT(slot < cache.num_blocks * cache.block_size, "slot ", slot);
      const int64_t block = slot / cache.block_size, off = slot % cache.block_size;
      for (int64_t h = 0; h < cache.n_kv_heads; ++h) {
        const int64_t dst = cache.row(block, h, off);
        if (kv_dtype_is_8bit(cache.dtype)) {  // codes + the row's scale (kernels/kv_quant.h)
          kv_quantize_kv_rows(k + t * row + h * hd, v + t * row + h * hd, int32_t(hd), cache, dst,
                              cache.scale_index(block, h, off));
          continue;
        }
        for (int64_t e = 0; e < hd; ++e) {
          store_kv_elem(cache.k, cache.dtype, dst + e, k[t * row + h * hd + e]);
          store_kv_elem(cache.v, cache.dtype, dst + e, v[t * row + h * hd + e]);
        }
      }
    }
  }

  // For each query row of each sequence, causal softmax attention over the keys at positions
  // 0 .. pos (pos = the query's own position), read through the sequence's block table. Plain
  // two-pass softmax in double: max, then Σ e^(s - max) and Σ e^(s - max) v.
  void paged_attention(const float* q, int64_t m, int32_t n_heads, const KvCacheLayer& cache,
                       const AttentionBatch& batch, float* out) override {
    check_kv_dtype(cache.dtype);
    const int32_t hd = cache.head_dim, n_kv = cache.n_kv_heads;
    PYPTO_ASSERT(n_heads % n_kv == 0, "n_heads ", n_heads, " n_kv_heads ", n_kv);
    const int32_t group = n_heads / n_kv;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    std::vector<double> scores, acc(hd);
    for (int32_t s = 0; s < batch.num_seqs; ++s) {
      const int32_t q0 = batch.query_start[s], q1 = batch.query_start[s + 1];
      const int32_t ctx = batch.context_len[s];
      const int32_t* table = batch.block_tables + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
      PYPTO_ASSERT(q1 - q0 <= ctx, "seq ", s, " has ", q1 - q0, " queries but context ", ctx);
      for (int32_t t = q0; t < q1; ++t) {
        PYPTO_ASSERT(t < m, "query row ", t, " >= m ", m);
        const int32_t pos = ctx - (q1 - t);  // this query's position; it sees keys 0..pos
        for (int32_t h = 0; h < n_heads; ++h) {
          const int32_t kvh = h / group;
          const float* qv = q + (static_cast<int64_t>(t) * n_heads + h) * hd;
          scores.assign(pos + 1, 0.0);
          double mx = -INFINITY;
          for (int32_t j = 0; j <= pos; ++j) {
            int64_t base = kv_offset(cache, table, j, kvh);
            double d = 0.0;
            const float ks = key_scale(cache, cache.k_scale, base);
            for (int32_t e = 0; e < hd; ++e) d += static_cast<double>(qv[e]) * load_kv(cache, cache.k, ks, base + e);
            scores[j] = d * scale;
            mx = std::max(mx, scores[j]);
          }
          double denom = 0.0;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int32_t j = 0; j <= pos; ++j) {
            double p = std::exp(scores[j] - mx);
            denom += p;
            int64_t base = kv_offset(cache, table, j, kvh);
            const float vs = key_scale(cache, cache.v_scale, base);
            for (int32_t e = 0; e < hd; ++e) acc[e] += p * load_kv(cache, cache.v, vs, base + e);
          }
          float* o = out + (static_cast<int64_t>(t) * n_heads + h) * hd;
          for (int32_t e = 0; e < hd; ++e) o[e] = static_cast<float>(acc[e] / denom);
        }
      }
    }
  }

  void weight_rows(const int32_t* ids, int64_t m, const LinearWeight& w, float* out) override {
    if (w.format == WeightFormat::Float) return embedding(ids, m, w.data, w.dtype, w.k_in, out);
    const PlainQuant p = plain_quant(w.format, w.n_out, w.k_in, w.group);
    for (int64_t i = 0; i < m; ++i) {
      PYPTO_ASSERT(ids[i] >= 0 && ids[i] < w.n_out, "token id ", ids[i]);
      for (int64_t c = 0; c < w.k_in; ++c) out[i * w.k_in + c] = dequant(w, p, ids[i], c);
    }
  }

 private:
  QuantActivations act_ = QuantActivations::F32;
  // Element offset of key/value `j` (a position of the sequence) of KV head `kvh` in the cache.
  static int64_t kv_offset(const KvCacheLayer& c, const int32_t* table, int32_t j, int32_t kvh) {
    int64_t block = table[j / c.block_size];
    PYPTO_ASSERT(block >= 0 && block < c.num_blocks, "block ", block);
    return c.row(block, kvh, j % c.block_size);
  }
  // The scale of the 8-bit row starting at element `base` (1 for bf16 / f32, unused).
  static float key_scale(const KvCacheLayer& c, const float* scales, int64_t base) {
    return kv_dtype_is_8bit(c.dtype) ? scales[base / c.head_dim] : 1.0f;
  }
  // Element i of the K or V pool as the attention sees it (8-bit: dequantized, kv_dequant).
  static float load_kv(const KvCacheLayer& c, const void* pool, float scale, int64_t i) {
    return kv_dtype_is_8bit(c.dtype) ? kv_dequant(pool, c.dtype, i, scale) : load_as_f32(pool, c.dtype, i);
  }
  static void store_kv_elem(void* base, DType dt, int64_t i, float v) {
    if (dt == DType::F32)
      static_cast<float*>(base)[i] = v;
    else
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(QuantActivations quant_act) {
  return std::make_unique<ReferenceBackend>(quant_act);
}

}  // namespace pypto
