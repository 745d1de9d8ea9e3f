// Batch invariance of the whole forward pass: a sequence's logits are bitwise the same whether it
// runs alone in one call, with its prompt split into 7-token chunks, or packed into steps with
// other sequences' prefill chunks and decodes (DESIGN.md "Numerics": greedy output must not depend
// on batching or chunking).
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/kv_dtype.h"
#include "model/prompt_logits.h"
#include "model_harness.h"

namespace pypto::test {
namespace {

// One sequence of a multi-step schedule: its own blocks in a shared cache and its progress.
struct Seq {
  std::vector<int32_t> ids;
  std::vector<int32_t> blocks;
  int32_t done = 0;
  int32_t state_slot = 0;  // hybrid models: the sequence's Gated DeltaNet state slot
};

// Runs A (23 tokens, logits for every row) in 7-token chunks packed with B (a 9-token prompt,
// then decodes) and C (5 tokens, then decodes), over one cache whose blocks interleave between
// the sequences. Returns A's logits [23, vocab].
// Small blocks, so the sequences cross many block boundaries. The same block size is used for the
// runs compared with: attention may reduce block by block, so results may depend on it (it is
// fixed for an engine's lifetime).
constexpr int32_t kBlockSize = 4;

std::vector<float> run_a_packed(Qwen3Model& model, const Seq& a_in, DType kv) {
  const int32_t bs = kBlockSize;
  // Hybrid models: A takes state slot 3, so it never runs in the slot prompt_logits used (0).
  Seq a = a_in, b{random_prompt(9, 101), {}, 0, 1}, c{random_prompt(5, 102), {}, 0, 2};
  a.state_slot = 3;
  // Blocks handed out round-robin: A gets 0,3,6,..., B 1,4,..., C 2,5,...
  for (int32_t i = 0; i < 12; ++i) {
    a.blocks.push_back(3 * i);
    b.blocks.push_back(3 * i + 1);
    c.blocks.push_back(3 * i + 2);
  }
  KvCache cache(model.kv_cache_spec(36, bs, kv));
  const int64_t V = model.vocab_size();
  std::vector<float> a_logits(a.ids.size() * V);
  std::vector<float> step_logits;
  ForwardBatch batch;
  const int32_t nA = int32_t(a.ids.size());
  // Step s: B and C advance (prefill, then a decode of token 1000+s), A advances by 7 tokens.
  for (int step = 0; a.done < nA; ++step) {
    batch.clear();
    batch.max_blocks_per_seq = 12;
    auto add = [&](Seq& s, int32_t n, ForwardBatch::Logits want) {
      batch.add_sequence(s.ids.data() + s.done, n, s.done, s.blocks.data(), (s.done + n + bs - 1) / bs, bs, want);
      if (model.hybrid()) batch.state_slots.push_back(s.state_slot);
      s.done += n;
    };
    if (step > 0) b.ids.push_back(1000 + step);  // B decodes one token per step after its prompt
    add(b, int32_t(b.ids.size()) - b.done, ForwardBatch::Logits::Last);
    const int32_t a_row0 = int32_t(batch.num_tokens());
    const int32_t a_start = a.done, n = std::min(7, nA - a.done);
    add(a, n, ForwardBatch::Logits::All);
    if (step > 0) {
      if (step > 1) c.ids.push_back(2000 + step);
      add(c, int32_t(c.ids.size()) - c.done, ForwardBatch::Logits::Last);
    }
    step_logits.resize(size_t(batch.num_logits()) * V);
    model.forward(batch, cache, step_logits.data());
    // Find A's rows among the logits rows (they are in logits_indices order).
    for (int64_t r = 0; r < batch.num_logits(); ++r) {
      const int32_t row = batch.logits_indices[r];
      if (row >= a_row0 && row < a_row0 + n)
        std::memcpy(a_logits.data() + size_t(a_start + row - a_row0) * V, step_logits.data() + r * V,
                    sizeof(float) * V);
    }
  }
  return a_logits;
}

// Every KV dtype (8-bit: kernels/kv_quant.h, each row quantized alone when it is written). The
// scalar backend, slow, runs the 8-bit format once (int8: fp8 differs only in the code mapping).
const std::vector<DType> kAllKv = {DType::F32, DType::BF16, DType::I8, DType::F8_E4M3};
const std::vector<DType> kScalarKv = {DType::F32, DType::BF16, DType::I8};

void check_invariance(Qwen3Model& model, const std::vector<DType>& kvs = kAllKv) {
  const std::vector<int32_t> ids = random_prompt(23, 100);
  for (DType kv : kvs) {
    SCOPED_TRACE(str_cat(kv_cache_dtype_name(kv), " KV"));
    PromptLogitsOptions whole;
    whole.kv_dtype = kv;
    whole.block_size = kBlockSize;
    const std::vector<float> alone = prompt_logits(model, ids, whole);
    PromptLogitsOptions chunked = whole;
    chunked.chunk = 7;
    const std::vector<float> in_chunks = prompt_logits(model, ids, chunked);
    EXPECT_EQ(0, std::memcmp(alone.data(), in_chunks.data(), alone.size() * sizeof(float)))
        << "7-token chunks differ from one call";
    if (model.hybrid()) {
      // One token per step: every step a decode row, which the GDN layers run on their fused
      // decode path (model/gdn_decode.cpp), against one pass over the prompt (the step-wide path).
      PromptLogitsOptions one_by_one = whole;
      one_by_one.chunk = 1;
      const std::vector<float> tokens = prompt_logits(model, ids, one_by_one);
      EXPECT_EQ(0, std::memcmp(alone.data(), tokens.data(), alone.size() * sizeof(float)))
          << "one token per step (the fused decode path) differs from one call";
    }
    const std::vector<float> packed = run_a_packed(model, Seq{ids, {}, 0}, kv);
    EXPECT_EQ(0, std::memcmp(alone.data(), packed.data(), alone.size() * sizeof(float)))
        << "packed with other sequences differs from alone";
    // Not bitwise zero by accident: the logits carry information.
    EXPECT_NE(alone[0], alone[1]);
  }
}

TEST(BatchInvariance, TinyScalarKernels) {
  auto m = load_model(ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/true);
  check_invariance(*m->model, kScalarKv);
}

TEST(BatchInvariance, TinyCpuKernels) {
  auto m = load_model(ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/false);
  check_invariance(*m->model);
}

// Qwen3-MoE (tiny-moe: sparse layers 0 and 2, dense layer 1): A's tokens share experts with B's
// and C's rows in the packed steps, and its logits stay bitwise those of A alone.
TEST(BatchInvariance, TinyMoeScalarKernels) {
  TestModelOptions o;
  o.preset = "tiny-moe";
  auto m = load_model(ensure_test_model("tiny-moe", o), /*scalar=*/true);
  check_invariance(*m->model, kScalarKv);
}

TEST(BatchInvariance, TinyMoeCpuKernels) {
  TestModelOptions o;
  o.preset = "tiny-moe";
  auto m = load_model(ensure_test_model("tiny-moe", o), /*scalar=*/false);
  check_invariance(*m->model);
}

TEST(BatchInvariance, Qwen3_0_6B_2LayersCpuKernels) {
  TestModelOptions o;
  o.preset = "qwen3-0.6b";
  o.layers = 2;
  auto m = load_model(ensure_test_model("qwen3-0.6b-2l", o), /*scalar=*/false);
  check_invariance(*m->model);
}

// Qwen3.5 hybrids (tiny-hybrid: GDN and gated-attention layers interleaved; tiny-hybrid-moe: with
// the shared expert): the recurrent state carried from chunk to chunk and step to step, in slots
// next to other sequences', gives A bitwise its logits alone.
TEST(BatchInvariance, TinyHybridScalarKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  auto m = load_model(ensure_test_model("tiny-hybrid", o), /*scalar=*/true);
  check_invariance(*m->model, kScalarKv);
}

TEST(BatchInvariance, TinyHybridCpuKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  auto m = load_model(ensure_test_model("tiny-hybrid", o), /*scalar=*/false);
  check_invariance(*m->model);
}

TEST(BatchInvariance, TinyHybridMoeCpuKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  auto m = load_model(ensure_test_model("tiny-hybrid-moe", o), /*scalar=*/false);
  check_invariance(*m->model);
}

// --quantization on a hybrid: int4 (groups of 16) and int8 projections, with the GDN's b | a rows
// run as a separate float linear, keep a row's logits independent of its companions.
TEST(BatchInvariance, TinyHybridMoeQuantizedCpuKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  const std::string dir = ensure_test_model("tiny-hybrid-moe", o);
  for (WeightFormat f : {WeightFormat::Int4, WeightFormat::Int8}) {
    StagingOptions so;
    so.quantization = f;
    so.int4_group = 16;
    auto m = load_model(dir, /*scalar=*/false, 2, so);
    ASSERT_EQ(m->weights.layer_format, f);
    check_invariance(*m->model);
  }
}

// A sequence may only continue where its own state ends: continuing at position 5 on a fresh
// slot (what a prefix-cache hit would ask) is an Error naming why, not a silently wrong result.
TEST(BatchInvariance, HybridRefusesContinuingWithoutItsState) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  auto m = load_model(ensure_test_model("tiny-hybrid", o), /*scalar=*/false);
  const std::vector<int32_t> ids = random_prompt(8, 7);
  KvCache cache(m->model->kv_cache_spec(4, kBlockSize, DType::F32));
  const std::vector<int32_t> blocks = {0, 1, 2};
  ForwardBatch batch;
  batch.max_blocks_per_seq = 3;
  batch.add_sequence(ids.data() + 5, 3, 5, blocks.data(), 2, kBlockSize, ForwardBatch::Logits::Last);
  batch.state_slots.push_back(2);
  std::vector<float> logits(size_t(m->model->vocab_size()));
  try {
    m->model->forward(batch, cache, logits.data());
    FAIL() << "continued at position 5 without a state";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prefix-cache"), std::string::npos) << e.what();
  }
}

// Prefix caching on hybrids (model/gdn_state.h snapshots): sequence 1 computes A in 7-token
// chunks and saves its state after positions 8 and 20 (block boundaries inside chunks); then
// sequences in other slots restore those snapshots and compute A's rest over sequence 1's KV
// blocks for the prefix. Every one of their logits rows, and sequence 1's own, is bitwise A's
// alone: a hit resumes exactly as a cold run, and saving changes nothing.
void check_snapshot_resume(Qwen3Model& model, const std::vector<DType>& kvs = kAllKv) {
  const std::vector<int32_t> ids = random_prompt(23, 100);
  const int32_t bs = kBlockSize, nA = int32_t(ids.size());
  const int64_t V = model.vocab_size();
  for (DType kv : kvs) {
    SCOPED_TRACE(str_cat(kv_cache_dtype_name(kv), " KV"));
    PromptLogitsOptions whole;
    whole.kv_dtype = kv;
    whole.block_size = bs;
    const std::vector<float> alone = prompt_logits(model, ids, whole);
    KvCache cache(model.kv_cache_spec(16, bs, kv));
    std::vector<float> logits;
    ForwardBatch batch;
    // Runs ids[start, start + n) as one sequence; compares its logits with A's alone.
    auto run = [&](const std::vector<int32_t>& table, int32_t slot, int32_t start, int32_t n, int32_t restore,
                   std::vector<ForwardBatch::StateSave> saves) {
      batch.clear();
      batch.max_blocks_per_seq = int32_t(table.size());
      batch.add_sequence(ids.data() + start, n, start, table.data(), (start + n + bs - 1) / bs, bs,
                         ForwardBatch::Logits::All);
      batch.state_slots.push_back(slot);
      batch.state_restore.push_back(restore);
      batch.state_saves = std::move(saves);
      logits.resize(size_t(n) * V);
      model.forward(batch, cache, logits.data());
      EXPECT_EQ(0, std::memcmp(alone.data() + size_t(start) * V, logits.data(), logits.size() * sizeof(float)))
          << "rows [" << start << ", " << start + n << ") differ from A alone";
    };
    const std::vector<int32_t> t1 = {0, 1, 2, 3, 4, 5};
    run(t1, 1, 0, 7, -1, {});
    run(t1, 1, 7, 7, -1, {{0, 1, 0}});  // after position 8
    run(t1, 1, 14, 7, -1, {{0, 6, 1}});  // after position 20
    run(t1, 1, 21, nA - 21, -1, {});
    run({0, 1, 6, 7, 8, 9}, 2, 8, nA - 8, 0, {});    // resumes at 8 over blocks 0, 1 of sequence 1
    run({0, 1, 2, 3, 4, 10}, 3, 20, nA - 20, 1, {});  // resumes at 20 over blocks 0..4
  }
}

TEST(BatchInvariance, HybridSnapshotResumeScalarKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  auto m = load_model(ensure_test_model("tiny-hybrid", o), /*scalar=*/true);
  m->weights.state_snapshots = 2;
  m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  check_snapshot_resume(*m->model, kScalarKv);
}

TEST(BatchInvariance, HybridSnapshotResumeCpuKernels) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  auto m = load_model(ensure_test_model("tiny-hybrid-moe", o), /*scalar=*/false);
  m->weights.state_snapshots = 2;
  m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  check_snapshot_resume(*m->model);
}

// A restore must land exactly where its snapshot ends: resuming at 9 from a snapshot of 8 tokens
// is an Error, not a silently wrong state.
TEST(BatchInvariance, HybridRefusesASnapshotOfAnotherLength) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  auto m = load_model(ensure_test_model("tiny-hybrid", o), /*scalar=*/false);
  m->weights.state_snapshots = 1;
  m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  const std::vector<int32_t> ids = random_prompt(12, 8);
  KvCache cache(m->model->kv_cache_spec(8, kBlockSize, DType::F32));
  const std::vector<int32_t> blocks = {0, 1, 2};
  std::vector<float> logits(size_t(m->model->vocab_size()));
  ForwardBatch batch;
  batch.max_blocks_per_seq = 3;
  batch.add_sequence(ids.data(), 8, 0, blocks.data(), 2, kBlockSize, ForwardBatch::Logits::Last);
  batch.state_slots.push_back(0);
  batch.state_saves.push_back({0, 8, 0});
  m->model->forward(batch, cache, logits.data());
  batch.clear();
  batch.max_blocks_per_seq = 3;
  batch.add_sequence(ids.data() + 9, 3, 9, blocks.data(), 3, kBlockSize, ForwardBatch::Logits::Last);
  batch.state_slots.push_back(1);
  batch.state_restore.push_back(0);
  try {
    m->model->forward(batch, cache, logits.data());
    FAIL() << "resumed at position 9 from an 8-token snapshot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("covers 8 tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pypto::test
