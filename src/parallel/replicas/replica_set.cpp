#include "parallel/replicas/replica_set.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

LoadReportingExecutor::LoadReportingExecutor(std::unique_ptr<ModelExecutor> inner, std::shared_ptr<LoadBook> book)
    : inner_(std::move(inner)), book_(std::move(book)) {}

void LoadReportingExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  for (const std::string& id : so.finished_req_ids) book_->on_finished(id);
  inner_->execute(so, out);
  // Drafts are not the request's tokens (yet): the load counts verified positions only.
  for (const ScheduledRequest& s : so.scheduled)
    book_->on_computed(s.req_id, s.num_computed_tokens + s.num_scheduled_tokens - s.num_draft_tokens);
}

ReplicaSet::ReplicaSet(std::vector<Replica> replicas, const RouterOptions& opt)
    : replicas_(std::move(replicas)), opt_(opt),
      router_(opt.policy, static_cast<int>(replicas_.size()), opt.affinity_slack_tokens),
      counts_(replicas_.size()) {
  for (const Replica& r : replicas_) PYPTO_ASSERT(r.loop && r.load, "incomplete replica");
  if (opt.policy == RoutingPolicy::PrefixAffinity)
    for (size_t i = 0; i < replicas_.size(); ++i)
      prefixes_.push_back(std::make_unique<PrefixIndex>(opt.block_size, opt.prefix_index_blocks));
}

void ReplicaSet::sweep_finished() {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    if (it->second.stream->finished()) {
      replicas_[it->second.replica].load->remove(it->first);
      it = in_flight_.erase(it);
    } else {
      ++it;
    }
  }
}

ReplicaSet::Submitted ReplicaSet::add_request(const EngineRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  sweep_finished();
  if (in_flight_.count(req.request_id)) fail("request id '", req.request_id, "' is already in use");
  const size_t n = replicas_.size();
  std::vector<ReplicaLoad> loads(n);
  for (size_t i = 0; i < n; ++i) {
    loads[i].pending_tokens = replicas_[i].load->pending_tokens();
    if (!prefixes_.empty()) loads[i].cached_prefix_tokens = prefixes_[i]->match(req.prompt_token_ids);
  }
  const Router saved = router_;
  const size_t i = n == 1 ? 0 : static_cast<size_t>(router_.choose(loads));
  const int64_t prompt = static_cast<int64_t>(req.prompt_token_ids.size());
  int64_t max_new = req.params.max_tokens;
  if (opt_.max_model_len > 0) max_new = std::min<int64_t>(max_new, std::max<int64_t>(0, opt_.max_model_len - prompt));
  // Counted before it is queued: the seed's load of requests routed but not yet queued.
  replicas_[i].load->add(req.request_id, std::max<int32_t>(1, req.params.n), prompt, max_new);
  Submitted s;
  try {
    s.stream = replicas_[i].loop->add_request(req);
  } catch (...) {
    replicas_[i].load->remove(req.request_id);
    router_ = saved;
    throw;
  }
  s.engine_index = i;
  in_flight_[req.request_id] = {i, s.stream};
  if (!prefixes_.empty()) prefixes_[i]->insert(req.prompt_token_ids);
  counts_[i].requests += 1;
  counts_[i].prompt_tokens += prompt;
  return s;
}

void ReplicaSet::finish_request(const std::string& request_id, FinishReason reason) {
  size_t i;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_flight_.find(request_id);
    if (it == in_flight_.end()) return;
    i = it->second.replica;
  }
  replicas_[i].loop->finish_request(request_id, reason);
}

void ReplicaSet::finish_request(size_t engine_index, const std::string& request_id, FinishReason reason) {
  PYPTO_ASSERT(engine_index < replicas_.size(), "replica ", engine_index);
  replicas_[engine_index].loop->finish_request(request_id, reason);
}

std::vector<ReplicaSet::RoutedCounts> ReplicaSet::routed_counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

void ReplicaSet::shutdown() {
  for (Replica& r : replicas_)
    if (r.loop) r.loop->shutdown();
}

}  // namespace pypto
