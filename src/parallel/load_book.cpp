#include "parallel/load_book.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

int64_t LoadBook::remaining(int64_t prompt_tokens, int64_t max_new, int64_t computed) {
  const int64_t prompt_left = std::max<int64_t>(0, prompt_tokens - computed);
  const int64_t generated = computed >= prompt_tokens ? computed - prompt_tokens + 1 : 0;
  return prompt_left + std::max<int64_t>(0, max_new - generated);
}

void LoadBook::add(const std::string& request_id, int32_t n, int64_t prompt_tokens, int64_t max_new) {
  PYPTO_ASSERT(n >= 1, "n ", n);
  Entry e;
  e.prompt_tokens = prompt_tokens;
  e.max_new = max_new;
  e.computed.assign(size_t(n), 0);
  e.finished.assign(size_t(n), false);
  std::lock_guard<std::mutex> lock(mu_);
  entries_[request_id] = std::move(e);
}

void LoadBook::remove(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(request_id);
}

LoadBook::Entry* LoadBook::find(const std::string& seq_id, size_t* index) {
  auto it = entries_.find(seq_id);
  if (it != entries_.end()) {
    *index = 0;
    return &it->second;
  }
  const size_t sep = seq_id.rfind(kSequenceSeparator);
  if (sep == std::string::npos) return nullptr;
  it = entries_.find(seq_id.substr(0, sep));
  if (it == entries_.end()) return nullptr;
  size_t k = 0;
  for (size_t i = sep + 1; i < seq_id.size(); ++i) {
    if (seq_id[i] < '0' || seq_id[i] > '9') return nullptr;
    k = k * 10 + size_t(seq_id[i] - '0');
  }
  if (k >= it->second.computed.size()) return nullptr;
  *index = k;
  return &it->second;
}

void LoadBook::on_computed(const std::string& seq_id, int64_t computed) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t k;
  if (Entry* e = find(seq_id, &k)) e->computed[k] = computed;
}

void LoadBook::on_finished(const std::string& seq_id) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t k;
  if (Entry* e = find(seq_id, &k)) e->finished[k] = true;
}

int64_t LoadBook::pending_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t total = 0;
  for (const auto& [id, e] : entries_)
    for (size_t k = 0; k < e.computed.size(); ++k)
      if (!e.finished[k]) total += remaining(e.prompt_tokens, e.max_new, e.computed[k]);
  return total;
}

size_t LoadBook::num_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace pypto
