#pragma once
// Compiled grammars shared by key (the constraint's kind and canonical JSON / text), so a schema
// sent again reuses its automaton and its cached masks. Bounded: the least recently used entry
// goes when full. Thread-safe.
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "structured/compiled_grammar.h"

namespace pypto::structured {

class GrammarCache {
 public:
  // Bytes the cached grammars may hold together (CompiledGrammar::memory_bytes, which grows as
  // they are used): past it the least recently used go, the newest always stays. A grammar
  // under the per-grammar limits can hold a few hundred MB, so 64 of them could otherwise pin
  // tens of GB.
  static constexpr int64_t kMaxCacheBytes = int64_t(1) << 30;

  explicit GrammarCache(std::shared_ptr<const TokenVocab> vocab, size_t capacity = 64,
                        int64_t max_bytes = kMaxCacheBytes);

  // The cached grammar for `key`, or make() compiled, its start state's mask computed, and
  // cached (an Error from either propagates, and nothing is cached then).
  std::shared_ptr<const CompiledGrammar> get(const std::string& key, const std::function<Grammar()>& make);

  const std::shared_ptr<const TokenVocab>& vocab() const { return vocab_; }
  size_t size() const;
  int64_t hits() const;

 private:
  std::shared_ptr<const TokenVocab> vocab_;
  size_t capacity_;
  int64_t max_bytes_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // front: newest
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int64_t hits_ = 0;
};

}  // namespace pypto::structured
