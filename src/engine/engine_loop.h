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

 private:
  void run();

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
  std::thread thread_;
};

}  // namespace pypto
