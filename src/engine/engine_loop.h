#pragma once
// EngineLoop: runs an Engine on its own thread. Other threads (HTTP handlers, the offline
// driver) add requests and abort them; each request's outputs arrive on its own RequestStream.
//
//   caller thread                       engine thread
//   add_request(req) -- validate --+
//                     (throws now) |--> queue --> Engine::add_request
//   stream->next()  <-- per-request queue <-- Engine::step() outputs
//   abort(id)        --------------------> queue --> Engine::finish_request (blocks freed
//                                                    before the next step)
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace pypto {

// The outputs of one request, in order. The last one has request_finished == true.
class RequestStream {
 public:
  // Blocks until the next output; nullopt once the final output was taken.
  std::optional<RequestOutput> next();
  // Everything available now without blocking (possibly nothing).
  std::vector<RequestOutput> drain();
  bool finished() const;

  void push(RequestOutput out);  // engine thread

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool final_pushed_ = false;
  bool final_taken_ = false;
};

// A snapshot of the engine for metrics and routing, refreshed after every step.
struct EngineLoopStats {
  bool alive = true;
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  // least_pending_tokens load: the engine's pending tokens plus prompt + max_tokens (x n) of
  // requests queued for the engine thread but not yet taken.
  int64_t pending_tokens = 0;
  int32_t num_blocks = 0;
  int32_t num_free_blocks = 0;
  double kv_usage = 0;  // fraction of blocks held by requests
  PrefixCacheStats prefix_cache;
  int64_t num_preemptions = 0;
  PrefillProgress prefill;  // engine/prefill_progress.h
  bool speculative = false;  // --speculative-config is on: spec_decode counts
  int32_t num_speculative_tokens = 0;
  SpecDecodeStats spec_decode;
  SpecCostStats spec_cost;  // the cost model's decisions (engine/spec_cost_stats.h)
  EngineStats engine;
};

class EngineLoop {
 public:
  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();  // shutdown()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates on the caller's thread (throws Error, nothing queued) so a server can answer 400
  // before it opens a stream; then queues the request for the engine thread.
  std::shared_ptr<RequestStream> add_request(const EngineRequest& req);
  // Asks the engine thread to finish the request, or only its sequence `index` (Abort for a
  // client gone, Stop for a stop string found on the output side in that sequence). The stream
  // receives a final output per finished sequence. Unknown ids are ignored.
  void finish_request(const std::string& request_id, FinishReason reason = FinishReason::Abort,
                      std::optional<int32_t> index = std::nullopt);
  // Aborts everything in flight, stops the thread and joins it. Idempotent.
  void shutdown();

  size_t num_active_requests() const;
  // False once the loop thread has stopped (after shutdown(), or after an unexpected failure, when
  // every open stream was ended with finish reason "error").
  bool is_alive() const;
  int64_t num_pending_tokens() const;
  EngineLoopStats stats() const;
  // The engine's drafter (null: none), for settings made before the first request (benchmarks).
  DraftProposer* drafter() const;

 private:
  void run();
  void loop_body();
  // Engine thread, under mu_: refreshes stats_ from the engine.
  void refresh_stats_locked();

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EngineRequest> new_requests_;
  struct Finish {
    std::string request_id;
    FinishReason reason;
    std::optional<int32_t> index;
  };
  std::vector<Finish> finishes_;
  std::unordered_map<std::string, std::shared_ptr<RequestStream>> streams_;
  bool stop_ = false;
  bool alive_ = true;
  std::string death_reason_;
  int64_t queued_tokens_ = 0;  // prompt + max_tokens (x n) of new_requests_
  int64_t taken_tokens_ = 0;   // the same for requests taken by the engine thread, until stats refresh
  EngineLoopStats stats_;
  std::thread thread_;
};

}  // namespace pypto
