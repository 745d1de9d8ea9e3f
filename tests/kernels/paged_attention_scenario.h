#pragma once
// A paged KV cache with shuffled blocks filled through the reference kv_store, a batch of
// sequences over it, and the tolerance of attention outputs against the scalar reference
// (attention_test.cpp, attention_decode_split_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/kv_dtype.h"
#include "kernel_test_util.h"

namespace pypto::test {

// A paged cache for several sequences with shuffled physical blocks (8-bit dtypes: with their
// per-row scales, [blocks, n_kv, bs] f32 each).
struct PagedCache {
  DType dtype;
  int32_t n_kv, hd, bs;
  int64_t num_blocks;
  std::vector<uint8_t> k, v;
  std::vector<float> k_scale, v_scale;
  KvCacheLayer layer() {
    return {k.data(), v.data(), dtype, num_blocks, bs, n_kv, hd, k_scale.empty() ? nullptr : k_scale.data(),
            v_scale.empty() ? nullptr : v_scale.data()};
  }
  PagedCache(DType dt, int32_t n_kv_, int32_t hd_, int32_t bs_, int64_t blocks)
      : dtype(dt), n_kv(n_kv_), hd(hd_), bs(bs_), num_blocks(blocks),
        k(blocks * bs_ * n_kv_ * hd_ * dtype_size(dt)), v(k.size()),
        k_scale(kv_dtype_is_8bit(dt) ? blocks * bs_ * n_kv_ : 0), v_scale(k_scale.size()) {}
};

// Every KV cache dtype; the 8-bit ones are read with their scales (kernels/kv_quant.h). The
// kernels attend over exactly the dequantized values the reference does (code · scale in f32),
// so the tolerance below is the same for all four.
constexpr DType kKvDtypes[] = {DType::F32, DType::BF16, DType::I8, DType::F8_E4M3};

struct Seq {
  int32_t ctx;    // tokens in cache including the new ones
  int32_t n_new;  // query rows
};

// Builds block tables (distinct shuffled blocks per sequence) and fills the cache for every
// sequence's full context with random K/V through the reference kv_store.
struct Scenario {
  std::vector<Seq> seqs;
  int32_t n_heads, n_kv, hd, bs;
  DType kv_dtype;
  std::vector<int32_t> tables, query_start, context_len;
  int32_t max_blocks = 0;
  std::unique_ptr<PagedCache> cache;
  std::vector<float> q;
  float max_abs_v = 0;

  Scenario(std::vector<Seq> s, int32_t nh, int32_t nkv, int32_t hd_, int32_t bs_, DType dt, uint32_t seed)
      : seqs(std::move(s)), n_heads(nh), n_kv(nkv), hd(hd_), bs(bs_), kv_dtype(dt) {
    for (auto& sq : seqs) max_blocks = std::max(max_blocks, (sq.ctx + bs - 1) / bs);
    const int64_t blocks = int64_t(max_blocks) * seqs.size() + 3;
    cache = std::make_unique<PagedCache>(dt, nkv, hd, bs, blocks);
    std::vector<int32_t> perm(blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
    tables.assign(seqs.size() * max_blocks, -1);
    query_start.push_back(0);
    auto ref = make_reference_backend();
    size_t next = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int32_t b = 0; b < (seqs[i].ctx + bs - 1) / bs; ++b) tables[i * max_blocks + b] = perm[next++];
      query_start.push_back(query_start.back() + seqs[i].n_new);
      context_len.push_back(seqs[i].ctx);
      const int64_t row = int64_t(nkv) * hd;
      auto kk = random_f32(seqs[i].ctx * row, seed + 10 * i + 1, -2, 2);
      auto vv = random_f32(seqs[i].ctx * row, seed + 10 * i + 2, -1, 1);
      for (float x : vv) max_abs_v = std::max(max_abs_v, std::fabs(x));
      std::vector<int64_t> slots(seqs[i].ctx);
      for (int32_t p = 0; p < seqs[i].ctx; ++p) slots[p] = int64_t(tables[i * max_blocks + p / bs]) * bs + p % bs;
      auto layer = cache->layer();
      ref->kv_store(kk.data(), vv.data(), slots.data(), seqs[i].ctx, layer);
    }
    q = random_f32(int64_t(query_start.back()) * n_heads * hd, seed + 99, -2, 2);
  }
  AttentionBatch batch() {
    return {int32_t(seqs.size()), query_start.data(), context_len.data(), tables.data(), max_blocks};
  }
  std::vector<float> run(Backend& b) {
    std::vector<float> out(q.size(), NAN);
    auto layer = cache->layer();
    auto bt = batch();
    b.paged_attention(q.data(), query_start.back(), n_heads, layer, bt, out.data());
    return out;
  }
};

inline void expect_close(const std::vector<float>& a, const std::vector<float>& r, float max_v, const std::string& what) {
  ASSERT_EQ(a.size(), r.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::fabs(a[i] - r[i]), 2e-5 * max_v) << what << " at " << i << ": " << a[i] << " vs " << r[i];
}

}  // namespace pypto::test
