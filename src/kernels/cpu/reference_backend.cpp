// The scalar reference backend: the definition of every op, written as the plainest loops that
// follow the math. Dot products, sums of squares and softmax accumulate in double so that the
// reference is more accurate than any optimised kernel compared against it. Single-threaded,
// slow, never used for serving; tests and debugging only.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_common.h"

namespace pypto {
namespace {

class ReferenceBackend final : public Backend {
 public:
  const char* name() const override { return "cpu-scalar"; }

  size_t packed_weight_bytes(DType dtype, int64_t n_out, int64_t k_in) const override {
    return plain_weight_bytes(dtype, n_out, k_in);
  }
  void pack_weight(const void* src, DType dtype, int64_t n_out, int64_t k_in, void* dst) const override {
    std::memcpy(dst, src, static_cast<size_t>(n_out * k_in) * dtype_size(dtype));
  }
  bool weight_layout_is_plain(DType) const override { return true; }

  // y[i, n] = Σ_k x[i, k] · W[n, k] (+ bias[n])
  void linear(const float* x, int64_t m, const LinearWeight& w, const float* bias, float* y) override {
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
            float theta) override {
    PYPTO_ASSERT(head_dim % 2 == 0, "head_dim ", head_dim);
    const int32_t half = head_dim / 2;
    for (int64_t i = 0; i < m; ++i) {
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = x + (i * n_heads + h) * head_dim;
        for (int32_t j = 0; j < half; ++j) {
          double a = rope_angle(positions[i], j, head_dim, theta);
          double c = std::cos(a), s = std::sin(a);
          double x1 = v[j], x2 = v[j + half];
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
    const int64_t row = static_cast<int64_t>(cache.n_kv_heads) * cache.head_dim;
    for (int64_t t = 0; t < m; ++t) {
      int64_t slot = slot_mapping[t];
      if (slot < 0) continue;  // padding token: nothing to store
      PYPTO_ASSERT(slot < cache.num_blocks * cache.block_size, "slot ", slot);
      for (int64_t j = 0; j < row; ++j) {
        store_kv_elem(cache.k, cache.dtype, slot * row + j, k[t * row + j]);
        store_kv_elem(cache.v, cache.dtype, slot * row + j, v[t * row + j]);
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
            for (int32_t e = 0; e < hd; ++e) d += static_cast<double>(qv[e]) * load_as_f32(cache.k, cache.dtype, base + e);
            scores[j] = d * scale;
            mx = std::max(mx, scores[j]);
          }
          double denom = 0.0;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int32_t j = 0; j <= pos; ++j) {
            double p = std::exp(scores[j] - mx);
            denom += p;
            int64_t base = kv_offset(cache, table, j, kvh);
            for (int32_t e = 0; e < hd; ++e) acc[e] += p * load_as_f32(cache.v, cache.dtype, base + e);
          }
          float* o = out + (static_cast<int64_t>(t) * n_heads + h) * hd;
          for (int32_t e = 0; e < hd; ++e) o[e] = static_cast<float>(acc[e] / denom);
        }
      }
    }
  }

 private:
  // Element offset of key/value `j` (a position of the sequence) of KV head `kvh` in the cache.
  static int64_t kv_offset(const KvCacheLayer& c, const int32_t* table, int32_t j, int32_t kvh) {
    int64_t block = table[j / c.block_size];
    PYPTO_ASSERT(block >= 0 && block < c.num_blocks, "block ", block);
    int64_t slot = block * c.block_size + j % c.block_size;
    return (slot * c.n_kv_heads + kvh) * c.head_dim;
  }
  static void store_kv_elem(void* base, DType dt, int64_t i, float v) {
    if (dt == DType::F32)
      static_cast<float*>(base)[i] = v;
    else
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace pypto
