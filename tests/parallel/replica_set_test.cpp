// ReplicaSet routing against real Engines whose executor is held at a gate, so no replica makes
// progress while requests are routed and every load is exactly the scripted one: routed-but-not-
// queued requests count in full (prompt + max new tokens), ties rotate, aborts go to the
// replica that got the request, and finished requests stop counting.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "core/error.h"
#include "parallel/replicas/replica_set.h"

namespace pypto {
namespace {

constexpr int64_t kVocab = 32;

// Blocks every step until open() (then returns zero logits: greedy picks token 0).
class GatedExecutor : public ModelExecutor {
 public:
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    void release() {
      std::lock_guard<std::mutex> l(mu);
      open = true;
      cv.notify_all();
    }
  };
  explicit GatedExecutor(std::shared_ptr<Gate> g) : gate_(std::move(g)) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    std::unique_lock<std::mutex> l(gate_->mu);
    gate_->cv.wait(l, [&] { return gate_->open; });
    out.vocab_size = kVocab;
    out.logits.assign(size_t(so.num_sampling_rows() * kVocab), 0.f);
  }

 private:
  std::shared_ptr<Gate> gate_;
};

struct Fixture {
  std::vector<std::shared_ptr<GatedExecutor::Gate>> gates;
  std::vector<std::unique_ptr<EngineLoop>> loops;
  std::unique_ptr<ReplicaSet> set;
  Fixture() = default;
  Fixture(Fixture&&) = default;
  ~Fixture() {  // engines held at a gate could not shut down
    for (auto& g : gates) g->release();
    set.reset();
    loops.clear();
  }
};

Fixture make_set(int n, RoutingPolicy policy, int64_t slack = kDefaultAffinitySlackTokens) {
  Fixture f;
  std::vector<ReplicaSet::Replica> reps;
  EngineConfig ec;
  ec.scheduler.max_model_len = 256;
  ec.cache.block_size = 4;
  ec.cache.num_blocks = 256;
  ec.vocab_size = kVocab;
  for (int i = 0; i < n; ++i) {
    f.gates.push_back(std::make_shared<GatedExecutor::Gate>());
    ReplicaSet::Replica r;
    r.load = std::make_shared<LoadBook>();
    auto ex = std::make_unique<LoadReportingExecutor>(std::make_unique<GatedExecutor>(f.gates.back()), r.load);
    f.loops.push_back(std::make_unique<EngineLoop>(std::make_unique<Engine>(ec, std::move(ex))));
    r.loop = f.loops.back().get();
    reps.push_back(std::move(r));
  }
  RouterOptions ro;
  ro.policy = policy;
  ro.affinity_slack_tokens = slack;
  ro.block_size = 4;
  ro.max_model_len = 256;
  f.set = std::make_unique<ReplicaSet>(std::move(reps), ro);
  return f;
}

EngineRequest request(const std::string& id, int prompt_len, int max_tokens, int32_t first_token = 1) {
  EngineRequest r;
  r.request_id = id;
  for (int i = 0; i < prompt_len; ++i) r.prompt_token_ids.push_back(first_token + i % 7);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

void open_all(Fixture& f) {
  for (auto& g : f.gates) g->release();
}

TEST(ReplicaSet, LeastPendingTokensWithScriptedLoads) {
  Fixture f = make_set(3, RoutingPolicy::LeastPendingTokens);
  auto& s = *f.set;
  EXPECT_EQ(s.add_request(request("a", 10, 20)).engine_index, 0u);  // all 0: rotation starts at 0
  EXPECT_EQ(s.pending_tokens(0), 30);                                 // routed, not run: in full
  EXPECT_EQ(s.add_request(request("b", 5, 5)).engine_index, 1u);     // loads 30 0 0: tie 1,2 after 0
  EXPECT_EQ(s.add_request(request("c", 40, 10)).engine_index, 2u);   // 30 10 0
  EXPECT_EQ(s.add_request(request("d", 1, 1)).engine_index, 1u);     // 30 10 50
  EXPECT_EQ(s.add_request(request("e", 10, 8)).engine_index, 1u);    // 30 12 50
  EXPECT_EQ(s.add_request(request("f", 2, 10)).engine_index, 0u);    // 30 30 50: tie 0,1 after 1 -> 0
  EXPECT_EQ(s.pending_tokens(0), 42);
  EXPECT_EQ(s.pending_tokens(1), 30);
  EXPECT_EQ(s.pending_tokens(2), 50);
  // A long prompt counts its prompt and its new tokens: 250 + 6.
  EXPECT_EQ(s.add_request(request("g", 250, 6)).engine_index, 1u);
  EXPECT_EQ(s.pending_tokens(1), 30 + 256);
  open_all(f);
}

TEST(ReplicaSet, AbortGoesToTheRecordedReplicaAndFinishedRequestsStopCounting) {
  Fixture f = make_set(2, RoutingPolicy::LeastPendingTokens);
  auto& s = *f.set;
  auto a = s.add_request(request("a", 8, 4));
  auto b = s.add_request(request("b", 8, 4));
  EXPECT_EQ(a.engine_index, 0u);
  EXPECT_EQ(b.engine_index, 1u);
  s.finish_request("b", FinishReason::Abort);
  // The abort reaches replica 1's engine even while its first step is held at the gate.
  open_all(f);
  std::optional<RequestOutput> last;
  while (auto o = b.stream->next()) last = o;
  ASSERT_TRUE(last);
  EXPECT_EQ(last->finish_reason, FinishReason::Abort);
  while (a.stream->next()) {
  }
  // Both finished: the next routing sweeps them, both replicas are idle again, rotation -> 0.
  auto c = s.add_request(request("c", 8, 4));
  EXPECT_EQ(c.engine_index, 0u);
  EXPECT_EQ(s.pending_tokens(1), 0);
  EXPECT_LE(s.pending_tokens(0), 12);  // at most c's 8 + 4 (its engine runs now: the gate is open)
}

TEST(ReplicaSet, DuplicateIdAndRejectedRequestsChangeNothing) {
  Fixture f = make_set(2, RoutingPolicy::LeastPendingTokens);
  auto& s = *f.set;
  EXPECT_EQ(s.add_request(request("a", 8, 4)).engine_index, 0u);
  EXPECT_THROW(s.add_request(request("a", 8, 4)), Error);
  EXPECT_THROW(s.add_request(request("big", 300, 4)), Error);  // prompt beyond max_model_len
  EXPECT_EQ(s.pending_tokens(1), 0);
  // The failed attempts did not advance the rotation: replica 1 is next and least loaded anyway;
  // with equal loads it would also be 1.
  EXPECT_EQ(s.add_request(request("b", 8, 4)).engine_index, 1u);
  EXPECT_EQ(s.routed_counts()[0].requests, 1);
  EXPECT_EQ(s.routed_counts()[1].requests, 1);
  open_all(f);
}

TEST(ReplicaSet, PrefixAffinityFollowsTheCachedPrefixWithinTheSlack) {
  Fixture f = make_set(2, RoutingPolicy::PrefixAffinity, /*slack=*/40);
  auto& s = *f.set;
  EXPECT_EQ(s.add_request(request("a", 16, 4, 1)).engine_index, 0u);  // no prefix anywhere: least loaded
  EXPECT_EQ(s.add_request(request("b", 16, 4, 20)).engine_index, 1u);  // 20 0
  // Same prompt as "a": replica 0 holds 16 tokens of it and is not above replica 1 -> 0.
  EXPECT_EQ(s.add_request(request("c", 16, 4, 1)).engine_index, 0u);
  // Replica 0 now carries 40, replica 1 20: 20 above, within the slack of 40 -> still 0.
  EXPECT_EQ(s.add_request(request("d", 16, 4, 1)).engine_index, 0u);
  // 60 vs 20: 40 above, within -> 0; then 80 vs 20: 60 above, over the slack -> least loaded, 1.
  EXPECT_EQ(s.add_request(request("e", 16, 4, 1)).engine_index, 0u);
  EXPECT_EQ(s.add_request(request("f", 16, 4, 1)).engine_index, 1u);
  open_all(f);
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// Counts the rows it is asked to run in parallel (as a backend's thread pool would run them).
class RowCountingExecutor : public ModelExecutor {
 public:
  void execute(const SchedulerOutput&, ExecutorOutput& out) override { out.vocab_size = kVocab; }
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override {
    rows_ += n;
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
  int64_t rows_ = 0;
};

// The sampler's rows go to the wrapped executor's threads, not the engine thread one by one.
TEST(LoadReportingExecutor, ForwardsParallelRowsToTheWrappedExecutor) {
  auto inner = std::make_unique<RowCountingExecutor>();
  RowCountingExecutor* seen = inner.get();
  LoadReportingExecutor wrapped(std::move(inner), std::make_shared<LoadBook>());
  int64_t ran = 0;
  wrapped.parallel_rows(16, [&](int64_t) { ++ran; });
  EXPECT_EQ(ran, 16);
  EXPECT_EQ(seen->rows_, 16);
}

}  // namespace
}  // namespace pypto
