// paged_attention: every optimised ISA vs the scalar reference (two-pass softmax in double), and
// batch invariance (a sequence alone vs with others; a prompt in one chunk vs several).
//
// Every KV dtype: f32, bf16, and the 8-bit int8 / fp8 e4m3 with per-row scales.
// Tolerance: |out - out_ref| <= 2e-5 · max|v|. The output is a convex combination of values; f32
// scores carry ~(hd/8 + 8) u relative error (dot of hd terms), the running sums ~(block + number of
// blocks) u, e^x ~2 ulp: for hd = 128 and 4096 keys that is ~1e-5 at most (u = 2^-24).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/kv_dtype.h"
#include "kernel_test_util.h"
#include "paged_attention_scenario.h"

namespace pypto::test {
namespace {

TEST(PagedAttention, MatchesReference) {
  auto ref = make_reference_backend();
  struct Case {
    std::vector<Seq> seqs;
    int32_t nh, nkv, hd, bs;
  };
  const Case cases[] = {
      {{{1, 1}}, 1, 1, 8, 16},                               // one key
      {{{17, 17}}, 4, 2, 128, 16},                           // prefill crossing a block boundary
      {{{16, 1}, {32, 1}, {33, 1}}, 16, 8, 128, 16},         // decodes at block boundaries
      {{{40, 7}, {5, 5}, {100, 1}}, 6, 2, 40, 8},            // mixed chunk / prefill / decode, GQA 3
      {{{70, 20}}, 8, 1, 24, 5},                             // MQA, odd head_dim and block size
      {{{300, 300}}, 2, 2, 64, 16},                          // no GQA, longer prefill
      {{{45, 13}, {9, 1}}, 4, 2, 64, 8},                     // block smaller than a key group
      {{{100, 40}, {33, 2}}, 4, 4, 128, 32},                 // two key groups per block
      {{{20, 20}}, 2, 1, 256, 16},                           // head_dim 256
  };
  int seed = 1;
  for (const auto& cs : cases)
    for (DType dt : kKvDtypes) {
      Scenario sc(cs.seqs, cs.nh, cs.nkv, cs.hd, cs.bs, dt, seed++);
      auto want = sc.run(*ref);
      for (const auto& c : optimised_cases()) {
        auto opt = make_case(c);
        expect_close(sc.run(*opt), want, sc.max_abs_v,
                     c.label + " " + dtype_name(dt) + " hd=" + std::to_string(cs.hd));
      }
    }
}

// Long context (>= 2048 keys): a decode and the tail of a prefill chunk, Qwen3-0.6B head shape.
TEST(PagedAttention, LongContextMatchesReference) {
  auto ref = make_reference_backend();
  for (DType dt : kKvDtypes) {
    Scenario sc({{2600, 1}, {2100, 3}}, 16, 8, 128, 16, dt, 77);
    auto want = sc.run(*ref);
    for (const auto& c : optimised_cases()) {
      if (c.threads == 3) continue;
      expect_close(sc.run(*make_case(c)), want, sc.max_abs_v, c.label + " long " + dtype_name(dt));
    }
  }
}

// A sequence's output rows are bitwise the same alone or batched with other sequences.
TEST(PagedAttention, BatchInvariantAcrossSequences) {
  for (DType dt : kKvDtypes) {
    Scenario mixed({{50, 9}, {130, 130}, {77, 1}, {20, 4}}, 16, 8, 128, 16, dt, 5);
    for (const auto& c : optimised_cases()) {
      auto opt = make_case(c);
      auto all = mixed.run(*opt);
      const int64_t row = int64_t(mixed.n_heads) * mixed.hd;
      for (size_t s = 0; s < mixed.seqs.size(); ++s) {
        // Same cache and block table, only sequence s in the batch.
        int32_t qs[2] = {0, mixed.seqs[s].n_new};
        int32_t ctx = mixed.context_len[s];
        AttentionBatch one{1, qs, &ctx, mixed.tables.data() + s * mixed.max_blocks, mixed.max_blocks};
        std::vector<float> out(qs[1] * row);
        auto layer = mixed.cache->layer();
        opt->paged_attention(mixed.q.data() + mixed.query_start[s] * row, qs[1], mixed.n_heads, layer, one, out.data());
        ASSERT_TRUE(bitwise_equal(out.data(), all.data() + mixed.query_start[s] * row, out.size()))
            << c.label << " " << dtype_name(dt) << " seq " << s;
      }
    }
  }
}

// A prompt attended in one chunk equals the same prompt in several chunks through the cache
// (each chunk's K/V stored first, then its queries attend over prefix + chunk), bitwise; and a
// different physical block placement (as after a prefix-cache hit) changes nothing.
TEST(PagedAttention, ChunkedPrefillIsBitwiseIdentical) {
  const int32_t P = 300, nh = 16, nkv = 8, hd = 128, bs = 16;
  const int64_t qrow = int64_t(nh) * hd, kvrow = int64_t(nkv) * hd;
  auto q = random_f32(P * qrow, 91, -2, 2), k = random_f32(P * kvrow, 92, -2, 2), v = random_f32(P * kvrow, 93);
  const int32_t nblk = (P + bs - 1) / bs;
  for (DType dt : kKvDtypes) {
    for (const auto& c : optimised_cases()) {
      auto opt = make_case(c);
      auto run_chunks = [&](const std::vector<int32_t>& chunks, uint32_t placement_seed) {
        PagedCache cache(dt, nkv, hd, bs, nblk + 5);
        std::vector<int32_t> table(nblk);
        std::vector<int32_t> perm(nblk + 5);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), std::mt19937(placement_seed));
        std::copy(perm.begin(), perm.begin() + nblk, table.begin());
        std::vector<float> out(P * qrow);
        int32_t done = 0;
        for (int32_t n : chunks) {
          std::vector<int64_t> slots(n);
          for (int32_t i = 0; i < n; ++i) slots[i] = int64_t(table[(done + i) / bs]) * bs + (done + i) % bs;
          auto layer = cache.layer();
          opt->kv_store(k.data() + done * kvrow, v.data() + done * kvrow, slots.data(), n, layer);
          int32_t qs[2] = {0, n}, ctx = done + n;
          AttentionBatch b{1, qs, &ctx, table.data(), nblk};
          opt->paged_attention(q.data() + done * qrow, n, nh, layer, b, out.data() + done * qrow);
          done += n;
        }
        return out;
      };
      auto whole = run_chunks({P}, 1);
      std::vector<std::vector<int32_t>> splits = {{100, 77, 123}, {1, 15, 16, 17, 251}};
      if (c.threads == 2) splits.push_back(std::vector<int32_t>(P, 1));  // token by token (slow)
      for (const auto& chunks : splits)
        ASSERT_TRUE(bitwise_equal(whole.data(), run_chunks(chunks, 2).data(), whole.size()))
            << c.label << " " << dtype_name(dt) << " chunks " << chunks.size();
    }
  }
}

// Every row of a prefill, bitwise, whether it is computed inside the whole prefill, alone (a
// decode-style call: one query, context up to its position), inside a 7-row chunk or inside a
// verify step's 2, 3 or 5 rows — across
// GQA groups 1..16 (16 query-heads per column-path vector, so single rows of groups >= 8 take
// the column path and single rows of smaller groups the row path), row counts that are not
// multiples of any tile, first positions other than 0, blocks of 5 / 8 / 16 / 32 / 40 keys and a
// generic head_dim. Before each smaller call the cache slots past its context are overwritten
// with NaN: a key read past a query's causal limit, or a masked key not given probability
// exactly 0, turns its output into NaN.
TEST(PagedAttention, RowsAloneAndInChunksMatchPrefillBitwise) {
  auto ref = make_reference_backend();
  struct Case {
    int32_t nh, nkv, hd, bs, start, rows;
  };
  const Case cases[] = {
      {4, 4, 64, 16, 0, 45},     // no GQA
      {4, 2, 128, 16, 100, 45},  // GQA 2 (Qwen3-0.6B / 1.7B), prefix of 100 in cache
      {8, 2, 128, 32, 37, 45},   // GQA 4, two key groups per block
      {8, 1, 64, 16, 5, 45},     // GQA 8: a single row is a column-path task
      {16, 2, 256, 16, 20, 23},  // GQA 8, head_dim 256
      {10, 2, 128, 16, 3, 40},   // GQA 5 (Qwen3-14B)
      {6, 2, 128, 8, 50, 45},    // GQA 3, blocks smaller than a key group
      {4, 1, 128, 5, 7, 30},     // GQA 4, odd block size
      {4, 2, 64, 40, 60, 45},    // block size not a multiple of the lanes
      {32, 2, 64, 16, 0, 20},    // GQA 16: 8 rows per task
      {4, 2, 40, 16, 10, 30},    // generic head_dim
  };
  int seed = 300;
  for (const auto& cs : cases)
    for (DType dt : kKvDtypes) {
      const int32_t ctx = cs.start + cs.rows;
      const int64_t qrow = int64_t(cs.nh) * cs.hd;
      const std::string what = "nh=" + std::to_string(cs.nh) + " nkv=" + std::to_string(cs.nkv) +
                               " hd=" + std::to_string(cs.hd) + " bs=" + std::to_string(cs.bs) + " " + dtype_name(dt);
      Scenario sc({{ctx, cs.rows}}, cs.nh, cs.nkv, cs.hd, cs.bs, dt, seed++);
      const std::vector<uint8_t> k0 = sc.cache->k, v0 = sc.cache->v;
      const std::vector<float> ks0 = sc.cache->k_scale, vs0 = sc.cache->v_scale;
      auto want = sc.run(*ref);
      // Calls [a, b) of prefill rows, latest end first (the NaN poisoning only ever grows).
      std::vector<std::pair<int32_t, int32_t>> calls;
      for (int32_t r = 0; r < cs.rows; ++r) calls.push_back({r, r + 1});
      for (int32_t a : {0, 9, cs.rows - 7}) calls.push_back({a, a + 7});
      // A speculative verify step's k + 1 rows (decode-heads tasks for small GQA groups).
      for (int32_t n : {2, 3, 5}) calls.push_back({cs.rows - 2 * n, cs.rows - n});
      std::sort(calls.begin(), calls.end(), [](auto x, auto y) { return x.second != y.second ? x.second > y.second : x.first < y.first; });
      for (const auto& c : optimised_cases()) {
        auto opt = make_case(c);
        sc.cache->k = k0;
        sc.cache->v = v0;
        sc.cache->k_scale = ks0;
        sc.cache->v_scale = vs0;
        auto all = sc.run(*opt);
        ASSERT_TRUE(std::none_of(all.begin(), all.end(), [](float x) { return std::isnan(x); })) << c.label << " " << what;
        expect_close(all, want, sc.max_abs_v, c.label + " " + what);
        int32_t poisoned = ctx;  // positions >= this hold NaN
        for (auto [a, b] : calls) {
          for (; poisoned > cs.start + b; --poisoned) {
            const int32_t p = poisoned - 1;
            const int64_t block = sc.tables[p / cs.bs];
            const size_t es = dtype_size(dt), n = size_t(cs.nkv) * cs.hd;
            if (kv_dtype_is_8bit(dt)) {  // an 8-bit row is NaN through its scale
              for (size_t h = 0; h < size_t(cs.nkv); ++h) {
                const size_t si = (block * cs.nkv + h) * cs.bs + p % cs.bs;
                sc.cache->k_scale[si] = sc.cache->v_scale[si] = NAN;
              }
              continue;
            }
            for (size_t e = 0; e < n; ++e) {
              // Head e / hd of position p in the head-major block (backend.h).
              const size_t h = e / cs.hd, off = (((block * cs.nkv + h) * cs.bs + p % cs.bs) * cs.hd + e % cs.hd) * es;
              if (dt == DType::F32) {
                const float nan = NAN;
                std::memcpy(sc.cache->k.data() + off, &nan, 4);
                std::memcpy(sc.cache->v.data() + off, &nan, 4);
              } else {
                const uint16_t nan = 0x7fc0;
                std::memcpy(sc.cache->k.data() + off, &nan, 2);
                std::memcpy(sc.cache->v.data() + off, &nan, 2);
              }
            }
          }
          int32_t qs[2] = {0, b - a}, cl = cs.start + b;
          AttentionBatch one{1, qs, &cl, sc.tables.data(), sc.max_blocks};
          std::vector<float> out((b - a) * qrow, -1.0f);
          auto layer = sc.cache->layer();
          opt->paged_attention(sc.q.data() + a * qrow, b - a, cs.nh, layer, one, out.data());
          ASSERT_TRUE(bitwise_equal(out.data(), all.data() + a * qrow, out.size()))
              << c.label << " " << what << " rows [" << a << ", " << b << ")";
        }
      }
    }
}

}  // namespace
}  // namespace pypto::test
