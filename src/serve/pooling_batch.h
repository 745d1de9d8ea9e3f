#pragma once
// One HTTP pooling request (/v1/embeddings, /v1/rerank, /v1/score) as the engines see it: one
// prefill-only engine request per input (EngineRequest::pooling), queued together so the
// scheduler batches them under its token budget, and awaited with the same interruptions as
// generation (client gone, --request-timeout, shutdown: everything unfinished is aborted).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "serve/server_state.h"

namespace pypto {

class PoolingBatch {
 public:
  // inputs: each input's token ids (checked by the caller: non-empty, in the vocabulary, within
  // --max-model-len). `param` names the request field they came from (for engine errors).
  PoolingBatch(ServerState& s, std::string request_id, std::vector<std::vector<int32_t>> inputs, std::string param);
  ~PoolingBatch();  // aborts and releases whatever is unfinished
  PoolingBatch(const PoolingBatch&) = delete;
  PoolingBatch& operator=(const PoolingBatch&) = delete;

  // Queues every input (503 + Retry-After when the queue is full) and waits for all results.
  // Returns [inputs][pooled_width]. 500 engine_error when the engine failed a step; 499-style
  // abort (an ApiError) when the client went away or the request timed out.
  std::vector<std::vector<float>> run(std::chrono::steady_clock::time_point arrival);

  int64_t prompt_tokens() const;  // summed over the inputs
  int64_t cached_tokens() const;  // prompt tokens served from the prefix cache

 private:
  struct Item {
    std::vector<int32_t> ids;
    std::string engine_id;
    size_t engine = 0;
    bool submitted = false, finished = false;
    std::shared_ptr<RequestStream> stream;
    std::vector<float> result;
    int64_t cached = 0;
  };
  void submit();
  void abort_all();

  ServerState& s_;
  std::string request_id_;
  std::string param_;
  std::vector<Item> items_;
  int64_t reserved_ = 0;
};

}  // namespace pypto
