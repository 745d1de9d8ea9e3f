#include "tp_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "io/checkpoint.h"
#include "model/weight_staging.h"
#include "parallel/device_groups.h"
#include "parallel/shm_communicator.h"

namespace pypto::test {
namespace {

constexpr int32_t kBlockSize = 16;

std::vector<int> rank_core(int r) {
  const std::vector<int> cores = available_cores();
  return {cores[size_t(r) % cores.size()]};
}

}  // namespace

std::vector<std::shared_ptr<const Qwen3Weights>> stage_slices(const std::string& dir, int tp, bool mtp) {
  auto ck = Checkpoint::open(dir);
  auto backend = make_cpu_backend(1);
  std::vector<std::shared_ptr<const Qwen3Weights>> slices;
  for (int r = 0; r < tp; ++r) {
    StagingOptions so;
    so.tp_rank = r;
    so.tp_size = tp;
    so.show_progress = false;
    so.mtp = mtp;
    slices.push_back(std::make_shared<const Qwen3Weights>(stage_qwen3_weights(*ck, *backend, so)));
  }
  return slices;
}

std::vector<float> tp_prompt_logits(const std::vector<std::shared_ptr<const Qwen3Weights>>& slices,
                                    const std::vector<int32_t>& prompt) {
  const int tp = static_cast<int>(slices.size());
  const int32_t T = static_cast<int32_t>(prompt.size());
  const int32_t n_blocks = (T + kBlockSize - 1) / kBlockSize;
  std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) blocks[size_t(b)] = n_blocks - 1 - b;  // not the identity
  ForwardBatch batch;
  batch.max_blocks_per_seq = n_blocks;
  batch.add_sequence(prompt.data(), T, 0, blocks.data(), n_blocks, kBlockSize, ForwardBatch::Logits::All);
  const int64_t V = slices[0]->config.vocab_size;
  std::vector<float> logits(size_t(T * V));
  auto comms = make_shm_communicators(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      auto backend = make_cpu_backend(1, rank_core(r));
      Qwen3Model model(*slices[size_t(r)], *backend, tp > 1 ? comms[size_t(r)].get() : nullptr);
      KvCache cache(model.kv_cache_spec(n_blocks, kBlockSize, DType::F32));
      // Only rank 0 receives the gathered logits; the others pass no buffer.
      model.forward(batch, cache, r == Qwen3Model::kLogitsRank ? logits.data() : nullptr);
    });
  for (auto& t : threads) t.join();
  return logits;
}

std::unique_ptr<TpModelRunner> make_tp_runner(const std::vector<std::shared_ptr<const Qwen3Weights>>& slices,
                                              int64_t num_blocks) {
  const int tp = static_cast<int>(slices.size());
  std::vector<std::unique_ptr<Communicator>> comms;
  if (tp > 1) comms = make_shm_communicators(tp);
  std::vector<TpRankParts> parts;
  for (int r = 0; r < tp; ++r) {
    TpRankParts p;
    p.backend = make_cpu_backend(1, rank_core(r));
    p.weights = slices[size_t(r)];
    if (tp > 1) p.comm = std::move(comms[size_t(r)]);
    parts.push_back(std::move(p));
  }
  return std::make_unique<TpModelRunner>(std::move(parts), num_blocks, kBlockSize, DType::BF16);
}

std::vector<int32_t> tp_greedy(TpModelRunner& runner, const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> seq = prompt, out;
  int64_t computed = 0, blocks_held = 0;
  ExecutorOutput eo;
  while (static_cast<int>(out.size()) < n) {
    SchedulerOutput so;
    ScheduledRequest s;
    s.req_id = "greedy";
    s.num_computed_tokens = computed;
    s.num_scheduled_tokens = static_cast<int64_t>(seq.size()) - computed;
    s.token_ids.assign(seq.begin() + computed, seq.end());
    s.is_new = computed == 0;
    const int64_t need = (static_cast<int64_t>(seq.size()) + kBlockSize - 1) / kBlockSize;
    for (int64_t b = blocks_held; b < need; ++b) s.block_ids.push_back(static_cast<int32_t>(b * 3 % 64));
    blocks_held = need;
    s.samples = true;
    so.total_num_scheduled_tokens = s.num_scheduled_tokens;
    so.scheduled.push_back(s);
    runner.execute(so, eo);
    EXPECT_EQ(eo.logits.size(), static_cast<size_t>(eo.vocab_size));
    const int32_t tok = static_cast<int32_t>(std::max_element(eo.logits.begin(), eo.logits.end()) - eo.logits.begin());
    computed = static_cast<int64_t>(seq.size());
    seq.push_back(tok);
    out.push_back(tok);
  }
  return out;
}

}  // namespace pypto::test
