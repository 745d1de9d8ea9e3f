// Decode attention split along the sequence (kernels/cpu/attention_decode_heads.h): every query's
// keys are taken in fixed segments of kAttentionSegmentBlocks cache blocks, folded in order, so a
// decode query whose segments run on different threads (few sequences, few KV heads) gives the
// bits of one task walking all its segments, of the same query as the last row of a prefill, and
// of any thread count or companion sequence.
//
// Block size 2 makes a segment 256 keys, so contexts of a few hundred tokens span several
// segments with a short last one (600 = 256 + 256 + 88) and the tests stay fast. Tolerance against
// the scalar reference: attention_test.cpp's 2e-5 · max|v| (the fold adds two exponentials and a
// multiply-add per segment, ~3 u each, well inside it).
#include <gtest/gtest.h>

#include "kernels/cpu/kernel_table.h"
#include "paged_attention_scenario.h"

namespace pypto::test {
namespace {

constexpr int32_t kBlock = 2;

struct Shape {
  const char* name;
  int32_t nh, nkv, hd;
};
// Qwen3-0.6B / 14B-like heads (GQA 2, the row path), the Qwen3.5 / 3.6 hybrids' gated attention
// (16 query / 2 KV heads of 256: GQA 8, a single row in a decode-heads task when unsplit; the
// prefill rows compared with it on the column path), and a
// head_dim no vector kernel takes (never split, segments folded all the same).
const Shape kShapes[] = {{"16/8x128", 16, 8, 128}, {"16/2x256", 16, 2, 256}, {"6/2x40", 6, 2, 40}};

// Backends of every vector ISA this CPU has at 1, 2 and 4 threads (the split is decided from the
// thread count: 1 never splits, 2 and 4 do at one or two sequences).
std::vector<std::pair<std::string, std::unique_ptr<Backend>>> thread_cases() {
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> out;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    for (int t : {1, 2, 4})
      out.emplace_back(std::string(isa_name(isa)) + "x" + std::to_string(t), make_cpu_backend_for_isa(isa, t, {}, {}));
  }
  return out;
}

TEST(DecodeAttentionSplit, SegmentLengthIsSmallForTheseTests) {
  ASSERT_EQ(cpu::kAttentionSegmentBlocks * kBlock, 256) << "the contexts below are chosen for 256-key segments";
}

// Decodes over 1 .. 3 segments against the reference; every thread count bit for bit the same.
TEST(DecodeAttentionSplit, MatchesReferenceAndThreadCountsBitwise) {
  auto ref = make_reference_backend();
  const std::vector<std::vector<Seq>> batches = {
      {{600, 1}},             // three segments, the last 88 keys
      {{512, 1}},             // exactly two
      {{257, 1}},             // two, the last one key
      {{200, 1}},             // one: never split
      {{600, 1}, {300, 1}},   // two sequences, both split at 2 threads
  };
  for (const Shape& sh : kShapes)
    for (DType dt : kKvDtypes)
      for (const auto& seqs : batches) {
        Scenario sc(seqs, sh.nh, sh.nkv, sh.hd, kBlock, dt, 31);
        const auto want = sc.run(*ref);
        std::vector<float> first;
        std::string first_label;
        for (auto& [label, be] : thread_cases()) {
          const std::string what = label + " " + sh.name + " " + dtype_name(dt) + " ctx " + std::to_string(seqs[0].ctx);
          auto got = sc.run(*be);
          expect_close(got, want, sc.max_abs_v, what);
          if (first.empty() || label.find("x1") != std::string::npos) {  // compare within an ISA
            first = got;
            first_label = label;
            continue;
          }
          ASSERT_TRUE(bitwise_equal(got.data(), first.data(), got.size())) << what << " vs " << first_label;
        }
      }
}

// A decode query is bitwise the same alone (split at 2 and 4 threads), beside other decodes and a
// prefill chunk (not split: enough tasks), and as the last row of its own prompt in one prefill
// call (segments folded in place by the prefill task).
TEST(DecodeAttentionSplit, AloneBatchedAndAsLastPrefillRowBitwise) {
  for (const Shape& sh : kShapes)
    for (DType dt : {DType::BF16, DType::I8, DType::F8_E4M3}) {
      // Sequence 0: the decode under test; then another decode, a 40-row chunk, a short decode.
      Scenario mixed({{600, 1}, {700, 1}, {300, 40}, {90, 1}}, sh.nh, sh.nkv, sh.hd, kBlock, dt, 11);
      const int64_t row = int64_t(sh.nh) * sh.hd;
      for (auto& [label, be] : thread_cases()) {
        const std::string what = label + " " + sh.name + " " + dtype_name(dt);
        auto all = mixed.run(*be);
        auto layer = mixed.cache->layer();
        // Alone.
        int32_t qs[2] = {0, 1};
        int32_t ctx = 600;
        AttentionBatch one{1, qs, &ctx, mixed.tables.data(), mixed.max_blocks};
        std::vector<float> alone(row);
        be->paged_attention(mixed.q.data(), 1, sh.nh, layer, one, alone.data());
        ASSERT_TRUE(bitwise_equal(alone.data(), all.data(), alone.size())) << what << ": alone vs batched";
        // As the last of 600 prefill rows (the earlier rows' queries are arbitrary).
        std::vector<float> q(600 * row);
        for (size_t i = 0; i < q.size(); ++i) q[i] = 0.001f * float(i % 1013) - 0.5f;
        std::copy(mixed.q.begin(), mixed.q.begin() + row, q.end() - row);
        int32_t qp[2] = {0, 600};
        AttentionBatch prefill{1, qp, &ctx, mixed.tables.data(), mixed.max_blocks};
        std::vector<float> out(q.size());
        be->paged_attention(q.data(), 600, sh.nh, layer, prefill, out.data());
        ASSERT_TRUE(bitwise_equal(out.data() + 599 * row, alone.data(), row)) << what << ": decode vs last prefill row";
      }
    }
}

// A verify step's rows (a few rows of one sequence: decode-heads tasks, the rows' query-heads side
// by side) whose positions straddle a segment boundary — rows 253..257 of 258 keys: the first three
// see none of the segment starting at key 256 — are bitwise the last rows of one prefill call, at
// every thread count, and close to the reference.
TEST(DecodeAttentionSplit, FewRowsAcrossASegmentBoundaryMatchPrefillRowsBitwise) {
  auto ref = make_reference_backend();
  constexpr int32_t kCtx = 258;
  for (const Shape& sh : kShapes)
    for (DType dt : {DType::BF16, DType::I8})
      for (int32_t rows : {2, 3, 5}) {
        Scenario sc({{kCtx, rows}}, sh.nh, sh.nkv, sh.hd, kBlock, dt, 13 + rows);
        const auto want = sc.run(*ref);
        const int64_t row = int64_t(sh.nh) * sh.hd;
        // The same rows as the last of kCtx prefill rows (the earlier rows' queries are arbitrary).
        std::vector<float> q(size_t(kCtx) * row);
        for (size_t i = 0; i < q.size(); ++i) q[i] = 0.001f * float(i % 1013) - 0.5f;
        std::copy(sc.q.begin(), sc.q.end(), q.end() - int64_t(rows) * row);
        int32_t qp[2] = {0, kCtx}, ctx = kCtx;
        AttentionBatch prefill{1, qp, &ctx, sc.tables.data(), sc.max_blocks};
        for (auto& [label, be] : thread_cases()) {
          const std::string what =
              label + " " + sh.name + " " + dtype_name(dt) + " " + std::to_string(rows) + " rows";
          const auto got = sc.run(*be);
          expect_close(got, want, sc.max_abs_v, what);
          std::vector<float> out(q.size());
          auto layer = sc.cache->layer();
          be->paged_attention(q.data(), kCtx, sh.nh, layer, prefill, out.data());
          ASSERT_TRUE(bitwise_equal(got.data(), out.data() + int64_t(kCtx - rows) * row, got.size()))
              << what << ": verify rows vs the last prefill rows";
        }
      }
}

}  // namespace
}  // namespace pypto::test
