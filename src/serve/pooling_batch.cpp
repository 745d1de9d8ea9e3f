#include "serve/pooling_batch.h"

#include <thread>

#include "core/error.h"
#include "serve/openai_protocol.h"
#include "serve/routes.h"

namespace pypto {

void require_task(const ServerState& s, PoolingTask task, const char* endpoint) {
  const PoolingTask served = s.ctx.model_config.pooling.task;
  if (served == task) return;
  const char* what = served == PoolingTask::None    ? "a generate model (--runner generate)"
                     : served == PoolingTask::Embed ? "an embedding model (--runner pooling, task embed)"
                                                    : "a reranker (--runner pooling, task score)";
  const char* need = task == PoolingTask::None    ? "a generate model: start the server with --runner generate"
                     : task == PoolingTask::Embed ? "an embedding model: start the server with --runner pooling"
                                                  : "a reranker: start the server with --runner rerank";
  throw ApiError(400, str_cat(endpoint, " is not served for ", what, "; it needs ", need), "invalid_request_error",
                 std::nullopt, "wrong_runner");
}

PoolingBatch::PoolingBatch(ServerState& s, std::string request_id, std::vector<std::vector<int32_t>> inputs,
                           std::string param)
    : s_(s), request_id_(std::move(request_id)), param_(std::move(param)) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    Item it;
    it.ids = std::move(inputs[i]);
    it.engine_id = str_cat(request_id_, "-", i);
    items_.push_back(std::move(it));
  }
}

PoolingBatch::~PoolingBatch() {
  abort_all();
  s_.total_in_flight -= reserved_;
}

void PoolingBatch::abort_all() {
  for (Item& it : items_) {
    if (!it.submitted) continue;
    if (!it.finished) s_.ctx.engines->finish_request(it.engine, it.engine_id, FinishReason::Abort);
    it.submitted = false;
    --*s_.in_flight[it.engine];
  }
}

void PoolingBatch::submit() {
  // Admission as for generation (serve/generation.cpp): inputs beyond the running capacity wait,
  // at most --max-queued-requests of them.
  const int64_t n = int64_t(items_.size());
  const int64_t capacity = int64_t(s_.ctx.max_num_seqs) * int64_t(s_.ctx.engines->num_engines());
  int64_t cur = s_.total_in_flight.load();
  for (;;) {
    const int64_t waiting_after = std::max<int64_t>(0, cur + n - capacity);
    if (waiting_after > 0 && waiting_after > s_.options.max_queued_requests) {
      s_.metrics->request_rejected("queue_full");
      throw ApiError(503,
                     str_cat("the server is busy: this request's ", n, " inputs would wait beyond the limit "
                             "--max-queued-requests ", s_.options.max_queued_requests, "; retry later"),
                     "service_unavailable", std::nullopt, "queue_full");
    }
    if (s_.total_in_flight.compare_exchange_weak(cur, cur + n)) break;
  }
  reserved_ = n;
  for (Item& it : items_) {
    EngineRequest req;
    req.request_id = it.engine_id;
    req.prompt_token_ids = it.ids;
    req.pooling = true;
    try {
      EngineClient::Submitted sub = s_.ctx.engines->add_request(req);
      it.stream = std::move(sub.stream);
      it.engine = sub.engine_index;
      it.submitted = true;
      ++*s_.in_flight[it.engine];
    } catch (const Error& e) {
      abort_all();
      ApiError err = api_error_from_engine(e.what());
      err.param = param_;
      throw err;
    }
  }
}

std::vector<std::vector<float>> PoolingBatch::run(std::chrono::steady_clock::time_point arrival) {
  submit();
  const bool has_timeout = s_.options.request_timeout_s > 0;
  const auto deadline = arrival + std::chrono::microseconds(int64_t(s_.options.request_timeout_s * 1e6));
  size_t left = items_.size();
  std::string engine_error;
  while (left > 0) {
    bool progressed = false;
    for (Item& it : items_) {
      if (it.finished) continue;
      for (RequestOutput& o : it.stream->drain()) {
        if (!o.finish_reason) continue;
        it.finished = true;
        progressed = true;
        --left;
        it.cached = o.num_cached_tokens;
        const double e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
        s_.metrics->request_finished(it.engine, finish_reason_name(*o.finish_reason), int64_t(it.ids.size()), 0, e2e);
        if (*o.finish_reason == FinishReason::Error && engine_error.empty()) engine_error = o.error;
        if (*o.finish_reason == FinishReason::Stop) it.result = std::move(o.pooled);
        else if (engine_error.empty())
          engine_error = str_cat("input ", &it - items_.data(), " finished with '", finish_reason_name(*o.finish_reason), "'");
      }
    }
    if (left == 0) break;
    if (!engine_error.empty()) break;
    if (HttpServer::client_disconnected() || s_.stopping)
      throw ApiError(503, "the request was aborted (client gone or server shutting down)", "service_unavailable");
    if (has_timeout && std::chrono::steady_clock::now() >= deadline)
      throw ApiError(504, str_cat("the request took longer than --request-timeout ", s_.options.request_timeout_s, " s"),
                     "timeout_error", std::nullopt, "request_timeout");
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!engine_error.empty())
    throw ApiError(500, str_cat("the engine failed while pooling: ", engine_error), "internal_server_error",
                   std::nullopt, "engine_error");
  std::vector<std::vector<float>> out;
  out.reserve(items_.size());
  for (Item& it : items_) out.push_back(std::move(it.result));
  return out;
}

int64_t PoolingBatch::prompt_tokens() const {
  int64_t n = 0;
  for (const Item& it : items_) n += int64_t(it.ids.size());
  return n;
}

int64_t PoolingBatch::cached_tokens() const {
  int64_t n = 0;
  for (const Item& it : items_) n += it.cached;
  return n;
}

}  // namespace pypto
