// --profile in offline mode warms up every data-parallel replica before recording, not only
// replica 0: otherwise replicas 1.. pay their first-step costs inside the recorded run and the
// report's TPOT includes them.
#include <gtest/gtest.h>

#include <memory>

#include "cli/bench_profile.h"
#include "cli/profile_warmup.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"

namespace pypto::cli {
namespace {

constexpr int64_t kVocab = 32;

// Every sampled row puts all its mass on token 1.
class PeakedExecutor : public ModelExecutor {
 public:
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = kVocab;
    out.logits.assign(size_t(so.num_sampling_rows() * kVocab), 0.0f);
    for (int64_t r = 0; r < so.num_sampling_rows(); ++r) out.logits[size_t(r * kVocab + 1)] = 10.0f;
  }
};

std::unique_ptr<EngineLoop> make_loop() {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.long_prefill_token_threshold = 64;
  c.scheduler.max_model_len = 64;
  c.cache.block_size = 4;
  c.cache.num_blocks = 32;
  c.vocab_size = kVocab;
  return std::make_unique<EngineLoop>(std::make_unique<Engine>(c, std::make_unique<PeakedExecutor>()));
}

TEST(ProfileWarmup, RunsOnEveryReplica) {
  LoadedEngine le;  // three replicas as load_replicas lays them out: loop, then more_loops
  le.config.vocab_size = kVocab;
  le.dp = 3;
  le.loop = make_loop();
  le.more_loops.push_back(make_loop());
  le.more_loops.push_back(make_loop());
  const std::vector<EngineLoop*> loops = replica_loops(le);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(loops[0], le.loop.get());
  EXPECT_EQ(loops[2], le.more_loops[1].get());

  RunOptions o;
  o.profile = true;
  o.profile_level = "e2e";
  {
    ProfileSession session(o, le, {{3, 5, 7, 9, 11}});
    for (size_t r = 0; r < loops.size(); ++r) {
      const EngineLoopStats st = loops[r]->stats();
      EXPECT_EQ(st.engine.generated_tokens, 4) << "replica " << r;  // the warm-up's 4 tokens
      EXPECT_EQ(st.engine.scheduled_tokens, 5 + 3) << "replica " << r;  // its 5-token prompt, 3 decodes
      EXPECT_EQ(loops[r]->num_active_requests(), 0u) << "replica " << r;
    }
  }
  for (EngineLoop* l : loops) l->shutdown();
}

}  // namespace
}  // namespace pypto::cli
