// The EAGLE-3 head (model/eagle3_head.h) against the plain PyTorch reference
// (tests/reference/eagle3_reference.py) on the tiny dense target (4 layers) with a random head
// (make-test-model --eagle3 random: its own embedding, aux layers from eagle_config, a draft
// vocabulary of the even ids through d2t): the target's aux states captured by the engine and
// fused by fc, the head's logits for every row (h_t, x_{t+1}) in one pass, then one fed-back
// draft step (the last row's prenorm output with another token) continuing the head's KV. The
// logits must be -inf exactly where the reference's are and match elsewhere within 1e-3 of the
// largest.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "model/eagle3_head.h"
#include "model_harness.h"
#include "npy.h"

namespace pypto {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;

const Ids kPrompt = {9707, 11, 1879, 0, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77, 1, 2, 3};
constexpr int32_t kExtra = 500;

// The tiny dense target (4 layers) with its random EAGLE-3 head, staged for the CPU backend.
struct TinyWithHead {
  std::string dir;
  std::unique_ptr<test::LoadedModel> m;
  std::shared_ptr<const Eagle3Weights> w;
  std::unique_ptr<Eagle3Head> head;
};
TinyWithHead tiny_with_head() {
  TestModelOptions o;
  o.preset = "tiny";
  o.layers = 4;
  o.eagle3 = "random";
  TinyWithHead t;
  t.dir = test::ensure_test_model("tiny-eagle3-random", o);
  t.m = test::load_model(t.dir, /*scalar=*/false, 2);
  t.w = load_eagle3_weights(read_eagle3_config(t.dir + "/eagle3"), t.m->weights.config, *t.m->backend);
  t.head = std::make_unique<Eagle3Head>(t.w, t.m->weights, *t.m->backend);
  return t;
}

TEST(Eagle3Head, LogitsMatchTheReferenceAcrossAFedBackDraftStep) {
  if (test::torch_python().empty()) GTEST_SKIP() << "no Python with torch and numpy (set PYPTO_PYTHON)";
  TinyWithHead t = tiny_with_head();
  const std::string& dir = t.dir;
  auto& m = t.m;
  auto& w = t.w;
  Eagle3Head& head = *t.head;
  const int64_t T = int64_t(kPrompt.size()), H = m->model->hidden_size(), V = m->model->vocab_size();
  const std::vector<int32_t> blocks = {0, 1, 2, 3};

  // The target's aux states of every prompt row, fused.
  std::vector<float> aux(size_t(T * 3 * H)), fused(size_t(T * H));
  {
    KvCache cache(m->model->kv_cache_spec(4, kBlockSize, DType::F32));
    ForwardBatch b;
    b.max_blocks_per_seq = 4;
    b.add_sequence(kPrompt.data(), int32_t(T), 0, blocks.data(), 4, kBlockSize, ForwardBatch::Logits::Last);
    std::vector<float> logits(static_cast<size_t>(V));
    m->model->set_aux_hidden_out(head.aux_layers(), aux.data());
    m->model->forward(b, cache, logits.data());
    m->model->set_aux_hidden_out({}, nullptr);
    head.fuse(aux.data(), T, fused.data());
  }
  // Rows 0 .. T-2 in one pass, then the fed-back step at position T-1.
  KvCache cache(head.kv_cache_spec(4, kBlockSize, DType::F32));
  std::vector<float> logits(size_t(T * V)), prenorm(size_t((T - 1) * H));
  ForwardBatch a;
  a.max_blocks_per_seq = 4;
  a.add_sequence(kPrompt.data() + 1, int32_t(T - 1), 0, blocks.data(), 4, kBlockSize, ForwardBatch::Logits::All);
  head.forward(a, fused.data(), cache, logits.data(), prenorm.data());
  ForwardBatch b;
  b.max_blocks_per_seq = 4;
  b.add_sequence(&kExtra, 1, int32_t(T - 1), blocks.data(), 4, kBlockSize, ForwardBatch::Logits::Last);
  head.forward(b, prenorm.data() + (T - 2) * H, cache, logits.data() + (T - 1) * V, nullptr);

  std::string list;
  for (int32_t id : kPrompt) list += (list.empty() ? "" : ",") + std::to_string(id);
  const fs::path out = fs::path(dir + ".eagle3_ref.npy");
  const std::string cmd = str_cat("'", test::torch_python(), "' '", PYPTO_SOURCE_DIR,
                                  "/tests/reference/eagle3_reference.py' --model '", dir, "' --head '", dir,
                                  "/eagle3' --token-ids ", list, " --extra-token ", kExtra, " --out '", out.string(),
                                  "' > '", out.string(), ".log' 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const test::NpyF32 ref = test::read_npy_f32(out.string());
  ASSERT_EQ(ref.rows, T);
  ASSERT_EQ(ref.cols, V);
  double max_ref = 0, max_diff = 0;
  int64_t finite = 0;
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const float r = ref.data[i], x = logits[i];
    ASSERT_EQ(std::isinf(r), std::isinf(x)) << "element " << i << ": reference " << r << ", head " << x;
    if (std::isinf(r)) continue;
    ++finite;
    max_ref = std::max(max_ref, double(std::fabs(r)));
    max_diff = std::max(max_diff, double(std::fabs(r - x)));
  }
  EXPECT_EQ(finite, T * w->config.draft_vocab_size);
  EXPECT_LE(max_diff, 1e-3 * std::max(1.0, max_ref)) << "max |ref| " << max_ref;
}

// store_kv() writes what forward() writes to the head's KV cache, bitwise: rows [0, 8) written
// by store_kv, the rest through forward(), give bitwise the logits of forward() over every row
// (f32 and bf16 KV). (Drafting fills the rows no pass reads this way: MtpProposer::run_kv.)
TEST(Eagle3Head, StoreKvWritesWhatForwardWrites) {
  TinyWithHead t = tiny_with_head();
  auto& m = t.m;
  Eagle3Head& head = *t.head;
  const int64_t T = int64_t(kPrompt.size()) - 1, H = m->model->hidden_size(), V = m->model->vocab_size();
  constexpr int32_t kv_rows = 8;
  const std::vector<int32_t> blocks = {0, 1, 2, 3};
  std::vector<float> hidden(size_t(T * H));  // any hidden rows: the head's input (fused target states)
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = float(int64_t(i * 2654435761u % 2001) - 1000) / 500.0f;
  auto rows = [&](int32_t begin, int32_t end, ForwardBatch::Logits logits) {
    ForwardBatch b;
    b.max_blocks_per_seq = 4;
    b.add_sequence(kPrompt.data() + begin + 1, end - begin, begin, blocks.data(), 4, kBlockSize, logits);
    return b;
  };
  for (DType dt : {DType::F32, DType::BF16}) {
    std::vector<float> all(size_t(T * V)), filled(size_t(T * V));
    {
      KvCache cache(head.kv_cache_spec(4, kBlockSize, dt));
      for (int32_t t = 0; t < T; ++t)
        head.forward(rows(t, t + 1, ForwardBatch::Logits::All), hidden.data() + t * H, cache, all.data() + t * V,
                     nullptr);
    }
    KvCache cache(head.kv_cache_spec(4, kBlockSize, dt));
    head.store_kv(rows(0, kv_rows, ForwardBatch::Logits::None), hidden.data(), cache);
    for (int32_t t = kv_rows; t < T; ++t)
      head.forward(rows(t, t + 1, ForwardBatch::Logits::All), hidden.data() + t * H, cache, filled.data() + t * V,
                   nullptr);
    const size_t from = size_t(kv_rows) * size_t(V);
    EXPECT_EQ(0, std::memcmp(all.data() + from, filled.data() + from, (all.size() - from) * sizeof(float)))
        << dtype_name(dt) << ": the rows after store_kv's differ from forward()'s";
  }
}

}  // namespace
}  // namespace pypto
