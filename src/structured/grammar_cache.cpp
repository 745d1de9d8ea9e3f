#include "structured/grammar_cache.h"

namespace pypto::structured {

GrammarCache::GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity, int64_t max_bytes)
    : vocab_(std::move(vocab)), capacity_(capacity == 0 ? 1 : capacity), max_bytes_(max_bytes) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const std::string& key, const std::function<Grammar()>& make) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
  }
  // Compile outside the lock: another request's compile does not wait for this one.
  auto compiled = std::make_shared<const CompiledGrammar>(make(), vocab_);
  // The first mask (a walk of the whole vocabulary, often the most expensive one: most tokens
  // may start a value) is computed here, on the request's thread, rather than during an engine
  // step; a grammar whose automaton outgrows its limits already there is refused now.
  compiled->mask(compiled->start_state());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  int64_t bytes = 0;
  for (const auto& [k, g] : lru_) bytes += g->memory_bytes();
  while (lru_.size() > capacity_ || (lru_.size() > 1 && bytes > max_bytes_)) {
    bytes -= lru_.back().second->memory_bytes();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

int64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace pypto::structured
