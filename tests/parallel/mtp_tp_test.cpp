// The MTP head sharded over tensor-parallel ranks (model/mtp_head.h, --tp with method mtp): on
// tiny-hybrid (dense FFN in the MTP layer) and tiny-hybrid-moe (MoE MTP layer with a shared
// expert), both with random MTP weights, two ranks running the head in lockstep on their slices
// (threads, shm communicators, each its share of the MTP KV cache) give rank 0 the logits and
// outputs the one-rank head gives (itself checked against the PyTorch reference in
// tests/model/mtp_head_test.cpp), within float rounding of the all-reduced partial sums, with the
// same argmax on every row; rows split into steps continue the sharded KV cache as one pass does.
// A bad token id throws on every rank before any collective (no rank left waiting).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "model/mtp_head.h"
#include "model/model_harness.h"
#include "parallel/shm_communicator.h"
#include "tp_harness.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
const Ids kPrompt = {9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77, 1, 2, 3};

// One rank's head rows t in [begin, end) (row t: hidden[t], token ids[t + 1], position t).
void head_rows(MtpHead& head, KvCache& cache, const Ids& ids, const float* hidden, int64_t H, int64_t V, int32_t begin,
               int32_t end, float* logits, float* out) {
  ForwardBatch b;
  b.max_blocks_per_seq = 4;
  const std::vector<int32_t> blocks = {3, 0, 2, 1};  // not the identity
  b.add_sequence(ids.data() + begin + 1, end - begin, begin, blocks.data(), 4, kBlockSize, ForwardBatch::Logits::All);
  head.forward(b, hidden + int64_t(begin) * H, cache, logits ? logits + int64_t(begin) * V : nullptr,
               out ? out + int64_t(begin) * H : nullptr);
}

struct HeadRows {
  std::vector<float> logits, out;  // [rows, V], [rows, H]
};

// The rows of the head over `slices` (one rank: a plain head), in one pass or stepped (7 rows,
// then one at a time), each rank on its own thread.
HeadRows run_head(const std::vector<std::shared_ptr<const Qwen3Weights>>& slices, const Ids& ids,
                  const std::vector<float>& hidden, bool stepped) {
  const int tp = int(slices.size());
  const int64_t H = slices[0]->config.hidden_size, V = slices[0]->config.vocab_size;
  const int32_t rows = int32_t(ids.size()) - 1;
  HeadRows r{std::vector<float>(size_t(rows * V)), std::vector<float>(size_t(rows * H))};
  auto comms = make_shm_communicators(tp);
  std::vector<std::thread> threads;
  for (int k = 0; k < tp; ++k)
    threads.emplace_back([&, k] {
      auto backend = make_cpu_backend(1);
      MtpHead head(*slices[size_t(k)], *backend, tp > 1 ? comms[size_t(k)].get() : nullptr);
      KvCache cache(head.kv_cache_spec(4, kBlockSize, DType::F32));
      float* logits = k == 0 ? r.logits.data() : nullptr;  // only rank 0 receives
      float* out = k == 0 ? r.out.data() : nullptr;
      if (!stepped) {
        head_rows(head, cache, ids, hidden.data(), H, V, 0, rows, logits, out);
        return;
      }
      head_rows(head, cache, ids, hidden.data(), H, V, 0, 7, logits, out);
      for (int32_t t = 7; t < rows; ++t) head_rows(head, cache, ids, hidden.data(), H, V, t, t + 1, logits, out);
    });
  for (auto& t : threads) t.join();
  return r;
}

int64_t argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

void check_sharded_head(const std::string& preset) {
  TestModelOptions o;
  o.preset = preset;
  o.mtp = "random";
  const std::string dir = test::ensure_test_model(preset + "-mtp", o);
  const auto one = test::stage_slices(dir, 1, /*mtp=*/true);
  const auto two = test::stage_slices(dir, 2, /*mtp=*/true);
  ASSERT_LT(two[0]->n_heads, one[0]->n_heads) << "the ranks hold the whole attention";
  // The target's final normed hidden states of the prompt (one rank), the head's input rows.
  const int64_t H = one[0]->config.hidden_size, V = one[0]->config.vocab_size;
  std::vector<float> hidden(kPrompt.size() * size_t(H));
  {
    auto backend = make_cpu_backend(1);
    Qwen3Model model(*one[0], *backend);
    KvCache cache(model.kv_cache_spec(4, kBlockSize, DType::F32));
    ForwardBatch b;
    b.max_blocks_per_seq = 4;
    const std::vector<int32_t> blocks = {0, 1, 2, 3};
    b.add_sequence(kPrompt.data(), int32_t(kPrompt.size()), 0, blocks.data(), 4, kBlockSize, ForwardBatch::Logits::Last);
    b.state_slots = {0};
    std::vector<float> logits(static_cast<size_t>(V));
    model.set_normed_hidden_out(hidden.data());
    model.forward(b, cache, logits.data());
    model.set_normed_hidden_out(nullptr);
  }
  const HeadRows ref = run_head(one, kPrompt, hidden, false);
  for (bool stepped : {false, true}) {
    const HeadRows got = run_head(two, kPrompt, hidden, stepped);
    const test::Diff dl = test::compare(got.logits.data(), ref.logits.data(), ref.logits.size());
    EXPECT_LE(dl.max_abs_diff, 1e-4 * std::max(1.0, dl.max_abs_ref)) << preset << (stepped ? " stepped" : "");
    const test::Diff dh = test::compare(got.out.data(), ref.out.data(), ref.out.size());
    EXPECT_LE(dh.max_abs_diff, 1e-4 * std::max(1.0, dh.max_abs_ref)) << preset << (stepped ? " stepped" : "");
    for (size_t t = 0; t + 1 < kPrompt.size(); ++t)
      EXPECT_EQ(argmax(got.logits.data() + t * V, V), argmax(ref.logits.data() + t * V, V)) << preset << " row " << t;
  }
}

TEST(MtpTp, ShardedDenseHeadMatchesOneRank) { check_sharded_head("tiny-hybrid"); }
TEST(MtpTp, ShardedMoeHeadMatchesOneRank) { check_sharded_head("tiny-hybrid-moe"); }

TEST(MtpTp, ABadTokenIdThrowsOnEveryRank) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  o.mtp = "random";
  const auto two = test::stage_slices(test::ensure_test_model("tiny-hybrid-mtp", o), 2, /*mtp=*/true);
  const int64_t H = two[0]->config.hidden_size;
  const Ids ids = {5, int32_t(two[0]->config.vocab_size) + 7};
  const std::vector<float> hidden(size_t(H), 0.5f);
  auto comms = make_shm_communicators(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int k = 0; k < 2; ++k)
    threads.emplace_back([&, k] {
      auto backend = make_cpu_backend(1);
      MtpHead head(*two[size_t(k)], *backend, comms[size_t(k)].get());
      KvCache cache(head.kv_cache_spec(4, kBlockSize, DType::F32));
      std::vector<float> logits(size_t(two[0]->config.vocab_size));
      try {
        head_rows(head, cache, ids, hidden.data(), H, two[0]->config.vocab_size, 0, 1, logits.data(), nullptr);
      } catch (const Error& e) {
        errors[size_t(k)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_NE(e.find("outside the vocabulary"), std::string::npos) << e;
}

}  // namespace
}  // namespace pypto
