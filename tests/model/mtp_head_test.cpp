// The MTP head (model/mtp_head.h) against the plain PyTorch reference (tests/reference/
// qwen35_reference.py, mtp_logits): on tiny-hybrid (dense FFN, wrapper layout) and tiny-hybrid-moe
// (MoE MTP layer with per-expert 2-D tensors and a shared expert, text-only layout) and tiny-next
// (Qwen3-Next's MTP block, the same MoE layer), a prompt
// teacher-forced through the target gives its final normed hidden states h_t; the head's logits
// for every row (h_t, x_{t+1}) must match the reference's within 1e-3 of the largest logit. Also:
// the head's rows are independent of how they are split into steps (its own KV cache carries the
// earlier rows), and a checkpoint without mtp.* is refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "model/mtp_head.h"
#include "model_harness.h"
#include "npy.h"

namespace pypto {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;

const Ids kPrompt = {9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77, 1, 2, 3};

std::unique_ptr<test::LoadedModel> load_with_mtp(const std::string& preset, bool text_only) {
  TestModelOptions o;
  o.preset = preset;
  o.text_only = text_only;
  StagingOptions so;
  so.mtp = true;
  return test::load_model(test::ensure_test_model(preset + (text_only ? "-text" : ""), o), /*scalar=*/false, 2, so);
}

// The target's final normed hidden states [T, H] of `ids` (one prefill, every row).
std::vector<float> target_hidden(Qwen3Model& model, const Ids& ids) {
  KvCache cache(model.kv_cache_spec(8, kBlockSize, DType::F32));
  ForwardBatch b;
  b.max_blocks_per_seq = 8;
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4, 5, 6, 7};
  b.add_sequence(ids.data(), int32_t(ids.size()), 0, blocks.data(), 8, kBlockSize, ForwardBatch::Logits::All);
  b.state_slots = {0};
  const int64_t H = model.hidden_size();
  std::vector<float> logits(ids.size() * size_t(model.vocab_size())), hidden(ids.size() * size_t(H));
  model.set_normed_hidden_out(hidden.data());
  model.forward(b, cache, logits.data());
  model.set_normed_hidden_out(nullptr);
  return hidden;
}

// The head's logits for rows t in [begin, end) (row t: hidden[t], token ids[t + 1], position t),
// each call continuing the head's cache.
void head_rows(MtpHead& head, KvCache& cache, const Ids& ids, const std::vector<float>& hidden, int64_t H,
               int64_t V, int32_t begin, int32_t end, float* logits) {
  ForwardBatch b;
  b.max_blocks_per_seq = 8;
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4, 5, 6, 7};
  b.add_sequence(ids.data() + begin + 1, end - begin, begin, blocks.data(), 8, kBlockSize, ForwardBatch::Logits::All);
  head.forward(b, hidden.data() + int64_t(begin) * H, cache, logits + int64_t(begin) * V);
}

test::NpyF32 reference_mtp_logits(const std::string& dir, const Ids& ids) {
  const std::string python = test::torch_python();
  std::string list;
  for (int32_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  const fs::path out = fs::path(dir + ".mtp_ref.npy");
  const std::string cmd = str_cat("'", python, "' '", PYPTO_SOURCE_DIR, "/tests/reference/qwen35_reference.py' --model '",
                                  dir, "' --token-ids ", list, " --mtp-out '", out.string(), "' > '", out.string(),
                                  ".log' 2>&1");
  if (std::system(cmd.c_str()) != 0) fail("reference failed: ", cmd);
  return test::read_npy_f32(out.string());
}

void check_against_reference(const std::string& preset, bool text_only) {
  if (test::torch_python().empty()) GTEST_SKIP() << "no Python with torch and numpy (set PYPTO_PYTHON)";
  auto m = load_with_mtp(preset, text_only);
  const int64_t H = m->model->hidden_size(), V = m->model->vocab_size();
  const std::vector<float> hidden = target_hidden(*m->model, kPrompt);
  MtpHead head(m->weights, *m->backend);
  const int32_t rows = int32_t(kPrompt.size()) - 1;
  std::vector<float> one_pass(size_t(rows * V)), stepped(size_t(rows * V));
  {
    KvCache cache(head.kv_cache_spec(8, kBlockSize, DType::F32));
    head_rows(head, cache, kPrompt, hidden, H, V, 0, rows, one_pass.data());
  }
  {  // 7 rows, then one row at a time: what drafting does
    KvCache cache(head.kv_cache_spec(8, kBlockSize, DType::F32));
    head_rows(head, cache, kPrompt, hidden, H, V, 0, 7, stepped.data());
    for (int32_t t = 7; t < rows; ++t) head_rows(head, cache, kPrompt, hidden, H, V, t, t + 1, stepped.data());
  }
  const std::string dir = test::ensure_test_model(preset + (text_only ? "-text" : ""), [&] {
    TestModelOptions o;
    o.preset = preset;
    o.text_only = text_only;
    return o;
  }());
  const test::NpyF32 ref = reference_mtp_logits(dir, kPrompt);
  ASSERT_EQ(ref.rows, rows);
  ASSERT_EQ(ref.cols, V);
  const test::Diff d = test::compare(one_pass.data(), ref.data.data(), ref.data.size());
  EXPECT_LE(d.max_abs_diff, 1e-3 * std::max(1.0, d.max_abs_ref)) << preset << ": max |ref| " << d.max_abs_ref;
  const test::Diff s = test::compare(stepped.data(), one_pass.data(), one_pass.size());
  EXPECT_LE(s.max_abs_diff, 1e-4 * std::max(1.0, s.max_abs_ref)) << preset << ": stepped rows differ from one pass";
}

TEST(MtpHead, DenseHeadMatchesTheReference) { check_against_reference("tiny-hybrid", false); }
TEST(MtpHead, MoeHeadMatchesTheReference) { check_against_reference("tiny-hybrid-moe", true); }
// Qwen3-Next (Qwen3NextForCausalLM): the same block behind a target with fused per-key-head GDN
// projections and per-expert tensors throughout.
TEST(MtpHead, Qwen3NextHeadMatchesTheReference) { check_against_reference("tiny-next", false); }
// Qwen3-Next with dense layers (decoder_sparse_step 2, mlp_only_layers [3]): the MTP layer's FFN is
// dense too, by the layer rule at index 0 (vLLM's index for "mtp.layers.0").
TEST(MtpHead, Qwen3NextDenseHeadMatchesTheReference) { check_against_reference("tiny-next-dense", false); }

// store_kv() writes what forward() writes to the head's KV cache, bitwise: rows [0, 9) written
// by store_kv (in two calls), then rows [9, rows) through forward() one call at a time, give
// bitwise the logits of forward() over every row, for float and int4 weights and f32 / bf16 /
// int8 KV. (Drafting fills the rows it missed this way: MtpProposer::run_kv.)
void check_store_kv(const std::string& preset, bool text_only, WeightFormat format) {
  TestModelOptions o;
  o.preset = preset;
  o.text_only = text_only;
  StagingOptions so;
  so.mtp = true;
  so.quantization = format;
  auto m = test::load_model(test::ensure_test_model(preset + (text_only ? "-text" : ""), o), false, 2, so);
  const int64_t H = m->model->hidden_size(), V = m->model->vocab_size();
  const std::vector<float> hidden = target_hidden(*m->model, kPrompt);
  MtpHead head(m->weights, *m->backend);
  const int32_t rows = int32_t(kPrompt.size()) - 1, kv_rows = 9;
  const std::vector<int32_t> blocks = {0, 1, 2, 3, 4, 5, 6, 7};
  auto store = [&](KvCache& cache, int32_t begin, int32_t end) {
    ForwardBatch b;
    b.max_blocks_per_seq = 8;
    b.add_sequence(kPrompt.data() + begin + 1, end - begin, begin, blocks.data(), 8, kBlockSize,
                   ForwardBatch::Logits::None);
    head.store_kv(b, hidden.data() + int64_t(begin) * H, cache);
  };
  for (DType kv : {DType::F32, DType::BF16, DType::I8}) {
    std::vector<float> all(size_t(rows * V)), filled(size_t(rows * V));
    {
      KvCache cache(head.kv_cache_spec(8, kBlockSize, kv));
      for (int32_t t = 0; t < rows; ++t) head_rows(head, cache, kPrompt, hidden, H, V, t, t + 1, all.data());
    }
    KvCache cache(head.kv_cache_spec(8, kBlockSize, kv));
    store(cache, 0, 4);
    store(cache, 4, kv_rows);
    for (int32_t t = kv_rows; t < rows; ++t) head_rows(head, cache, kPrompt, hidden, H, V, t, t + 1, filled.data());
    const size_t from = size_t(kv_rows) * size_t(V);
    EXPECT_EQ(0, std::memcmp(all.data() + from, filled.data() + from, (all.size() - from) * sizeof(float)))
        << preset << " " << dtype_name(kv) << ": the rows after store_kv's differ from forward()'s";
    const test::Diff d = test::compare(filled.data() + from, all.data() + from, all.size() - from);
    EXPECT_EQ(d.max_abs_diff, 0.0) << preset << " " << dtype_name(kv);
  }
}

TEST(MtpHead, StoreKvWritesWhatForwardWrites) {
  check_store_kv("tiny-hybrid", false, WeightFormat::Float);
  check_store_kv("tiny-hybrid-moe", true, WeightFormat::Int4);
  check_store_kv("tiny-next", false, WeightFormat::Int8);
}

TEST(MtpHead, ACheckpointWithoutMtpTensorsIsRefusedByName) {
  TestModelOptions o;
  o.preset = "tiny";  // dense Qwen3: no MTP head
  const std::string dir = test::ensure_test_model("tiny", o);
  StagingOptions so;
  so.mtp = true;
  try {
    test::load_model(dir, false, 2, so);
    FAIL() << "staged an MTP head from a checkpoint without one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pypto
