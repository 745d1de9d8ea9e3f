#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"

namespace pypto {
namespace {

using nlohmann::json;

// A string option that must be absent, null or empty because we do not implement it.
void require_unset(const json& model, const char* key) {
  auto it = model.find(key);
  if (it == model.end() || it->is_null()) return;
  if (it->is_string() && it->get<std::string>().empty()) return;
  fail("tokenizer.json: BPE option \"", key, "\" = ", it->dump(), " is not implemented");
}

// Both spellings of a merge: "a b" (tokenizers < 0.20) and ["a", "b"].
std::pair<std::string, std::string> merge_parts(const json& m, size_t index) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos) return {s.substr(0, sp), s.substr(sp + 1)};
  }
  fail("tokenizer.json: merge #", index, " (", m.dump(), ") is neither \"a b\" nor [\"a\", \"b\"]");
}

// Below this many symbols a linear scan for the best pair beats a heap.
constexpr size_t kSmallWord = 48;

}  // namespace

BpeModel::BpeModel(const json& model) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail("tokenizer.json: model type \"", type, "\" is not implemented (only BPE)");
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null() && it->get<double>() != 0.0) {
    fail("tokenizer.json: BPE dropout is not implemented");
  }
  require_unset(model, "continuing_subword_prefix");
  require_unset(model, "end_of_word_suffix");
  if (model.value("byte_fallback", false)) fail("tokenizer.json: BPE byte_fallback is not implemented");
  ignore_merges_ = model.value("ignore_merges", false);

  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) fail("tokenizer.json: model.vocab is not an object");
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab.items()) max_id = std::max(max_id, id.get<int32_t>());
  tokens_.resize(static_cast<size_t>(max_id + 1));
  bytes_.resize(tokens_.size());
  present_.assign(tokens_.size(), false);
  token_ids_.reserve(vocab.size());
  byte_ids_.reserve(vocab.size());
  std::fill(std::begin(byte_symbol_), std::end(byte_symbol_), -1);
  for (const auto& [tok, idj] : vocab.items()) {
    const int32_t id = idj.get<int32_t>();
    if (id < 0) fail("tokenizer.json: token ", json(tok).dump(), " has negative id ", id);
    tokens_[id] = tok;
    // A token outside the byte-level alphabet cannot come out of merging bytes; for decoding it
    // stands for its own UTF-8, as in Hugging Face's ByteLevel decoder.
    bytes_[id] = byte_level::token_to_bytes(tok).value_or(tok);
    present_[id] = true;
    token_ids_.emplace(tok, id);
    byte_ids_.emplace(bytes_[id], id);
    if (bytes_[id].size() == 1) byte_symbol_[static_cast<unsigned char>(bytes_[id][0])] = id;
  }
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    auto id = token_to_id(it->get<std::string>());
    if (!id) fail("tokenizer.json: BPE unk_token ", it->dump(), " is not in the vocabulary");
    unk_id_ = id;
  }

  const json& merges = model.at("merges");
  merges_ = MergeTable(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    auto [a, b] = merge_parts(merges[i], i);
    auto ia = token_to_id(a), ib = token_to_id(b), ic = token_to_id(a + b);
    if (!ia || !ib || !ic) {
      fail("tokenizer.json: merge #", i, " (", json(a).dump(), ", ", json(b).dump(), ") names a token that is not in the vocabulary");
    }
    merges_.insert(*ia, *ib, Merge{static_cast<int32_t>(i), *ic});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = token_ids_.find(std::string(token));
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = byte_ids_.find(std::string(word)); it != byte_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  const size_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  if (cacheable && cache_.lookup(word, hash, out)) return;

  // Per-call scratch, so concurrent encodes share nothing but the cache.
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  for (unsigned char c : word) {
    const int32_t id = byte_symbol_[c];
    // A byte missing from the vocabulary becomes unk, or is dropped when there is none (as the
    // Hugging Face BPE model does without unk_token).
    if (id >= 0) {
      symbols.push_back(id);
    } else if (unk_id_) {
      symbols.push_back(*unk_id_);
    }
  }
  merge(symbols);
  if (cacheable) cache_.store(word, hash, symbols.data(), symbols.size());
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::merge(std::vector<int32_t>& symbols) const {
  if (symbols.size() < 2) return;
  if (symbols.size() <= kSmallWord) {
    merge_small(symbols);
  } else {
    merge_large(symbols);
  }
}

void BpeModel::merge_small(std::vector<int32_t>& symbols) const {
  constexpr int32_t kNone = INT32_MAX;
  // rank[i] / result[i] describe the pair (symbols[i], symbols[i+1]).
  thread_local std::vector<int32_t> rank, result;
  const size_t n = symbols.size();
  rank.resize(n);
  result.resize(n);
  auto look = [&](size_t i) {
    if (i + 1 >= symbols.size()) {
      rank[i] = kNone;
      return;
    }
    auto m = merges_.find(symbols[i], symbols[i + 1]);
    rank[i] = m ? m->rank : kNone;
    result[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  rank[n - 1] = kNone;
  size_t len = n;
  while (len > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < len; ++i) {
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks wins
    }
    if (rank[best] == kNone) break;
    symbols[best] = result[best];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    result.erase(result.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    --len;
    if (best > 0) look(best - 1);
    look(best);
  }
}

void BpeModel::merge_large(std::vector<int32_t>& symbols) const {
  // Symbols form a linked list over their original positions; a heap orders candidate pairs by
  // (rank, position of the left symbol). Entries go stale when a neighbour merges, so each pop
  // re-checks that the pair still exists and still merges to the same token.
  const int n = static_cast<int>(symbols.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t result;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (auto m = merges_.find(symbols[i], symbols[next[i]])) heap.push({m->rank, i, m->result});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    if (!alive[c.pos] || next[c.pos] < 0) continue;
    auto m = merges_.find(symbols[c.pos], symbols[next[c.pos]]);
    if (!m || m->rank != c.rank || m->result != c.result) continue;
    const int right = next[c.pos];
    symbols[c.pos] = c.result;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  int w = 0;
  for (int i = 0; i >= 0; i = next[i]) symbols[w++] = symbols[i];
  symbols.resize(static_cast<size_t>(w));
}

}  // namespace pypto
