#pragma once
// How the server reaches the engines: one interface in front of one or more EngineLoops, so the
// data-parallel router (least pending tokens over N replicas) plugs in without touching the HTTP
// code. Every call is thread-safe; HTTP handler threads call it concurrently.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_loop.h"

namespace pypto {

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  struct Submitted {
    std::shared_ptr<RequestStream> stream;
    size_t engine_index = 0;  // the replica serving it (the `engine` metrics label)
  };
  // Chooses a replica, validates and queues. Throws Error (nothing queued) when the engine
  // rejects the request.
  virtual Submitted add_request(const EngineRequest& req) = 0;
  // Finishes the request, or only its sequence `index` (a stop string found in one of n).
  virtual void finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                              std::optional<int32_t> index = std::nullopt) = 0;

  virtual size_t num_engines() const = 0;
  // Whether replica i's loop thread is serving (for /health).
  virtual bool is_alive(size_t engine_index) const = 0;
  // Sequences replica i holds (queued, running or finishing).
  virtual int64_t num_active_requests(size_t engine_index) const = 0;
  // Replica i's snapshot (running / waiting, KV usage, prefix cache, preemptions), as of its
  // last step.
  virtual EngineLoopStats stats(size_t engine_index) const = 0;
};

// Routes over EngineLoops the caller owns (and keeps alive longer than this client): the replica
// with the fewest pending tokens wins, ties to the lowest index. With one loop this is a
// pass-through. (For DP serving use ReplicaSetEngineClient, which has the real router.)
class LoopEngineClient : public EngineClient {
 public:
  explicit LoopEngineClient(std::vector<EngineLoop*> loops);
  // Owns the loop (shut down and joined when the client goes).
  explicit LoopEngineClient(std::unique_ptr<EngineLoop> loop);

  Submitted add_request(const EngineRequest& req) override;
  void finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                      std::optional<int32_t> index = std::nullopt) override;
  size_t num_engines() const override { return loops_.size(); }
  bool is_alive(size_t engine_index) const override;
  int64_t num_active_requests(size_t engine_index) const override;
  EngineLoopStats stats(size_t engine_index) const override;

 private:
  std::vector<EngineLoop*> loops_;
  std::unique_ptr<EngineLoop> owned_;
};

}  // namespace pypto
