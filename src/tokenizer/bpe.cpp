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

void check_model_type(const json& model) {
  const std::string type = model.value("type", "BPE");
  if (type != "BPE") fail("tokenizer.json: model type \"", type, "\" is not implemented (only BPE)");
}

BpeTables tables_from_json(const json& model) {
  check_model_type(model);
  BpeTables t;
  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) fail("tokenizer.json: model.vocab is not an object");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) fail("tokenizer.json: vocab entry ", json(it.key()).dump(), " has no integer id");
    t.vocab.emplace_back(it.key(), it.value().get<int32_t>());
  }
  const json& merges = model.at("merges");
  if (!merges.is_array()) fail("tokenizer.json: model.merges is not an array");
  for (size_t i = 0; i < merges.size(); ++i) t.merges.push_back(BpeModel::merge_parts(merges[i], i));
  return t;
}

}  // namespace

std::pair<std::string, std::string> BpeModel::merge_parts(const json& m, size_t index) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  if (m.is_string()) {
    const std::string_view s = m.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos) {
      return {std::string(s.substr(0, sp)), std::string(s.substr(sp + 1))};
    }
  }
  fail("tokenizer.json: merge #", index, " (", m.dump(), ") is neither \"a b\" nor [\"a\", \"b\"]");
}

BpeModel::BpeModel(const json& model) : BpeModel(model, tables_from_json(model)) {}

BpeModel::BpeModel(const json& model, BpeTables tables) {
  check_model_type(model);
  if (auto it = model.find("dropout"); it != model.end() && !it->is_null() && it->get<double>() != 0.0) {
    fail("tokenizer.json: BPE dropout is not implemented");
  }
  require_unset(model, "continuing_subword_prefix");
  require_unset(model, "end_of_word_suffix");
  if (model.value("byte_fallback", false)) fail("tokenizer.json: BPE byte_fallback is not implemented");
  ignore_merges_ = model.value("ignore_merges", false);

  if (tables.vocab.empty()) fail("tokenizer.json: model.vocab is missing or empty");
  int32_t max_id = -1;
  for (const auto& [tok, id] : tables.vocab) {
    if (id < 0) fail("tokenizer.json: token ", json(tok).dump(), " has negative id ", id);
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<size_t>(max_id + 1));
  bytes_.resize(tokens_.size());
  present_.assign(tokens_.size(), false);
  token_ids_.reserve(tables.vocab.size());
  std::fill(std::begin(byte_symbol_), std::end(byte_symbol_), -1);
  for (auto& [tok, id] : tables.vocab) {
    if (present_[id]) fail("tokenizer.json: id ", id, " is given to two tokens");
    tokens_[id] = std::move(tok);
    // A token outside the byte-level alphabet cannot come out of merging bytes; for decoding it
    // stands for its own UTF-8, as in Hugging Face's ByteLevel decoder.
    bytes_[id] = byte_level::token_to_bytes(tokens_[id]).value_or(tokens_[id]);
    present_[id] = true;
    if (bytes_[id].size() == 1) byte_symbol_[static_cast<unsigned char>(bytes_[id][0])] = id;
  }
  for (int32_t id = 0; id < size(); ++id) {
    if (!present_[id]) continue;
    token_ids_.emplace(tokens_[id], id);
    if (ignore_merges_) byte_ids_.emplace(bytes_[id], id);
  }
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    auto id = token_to_id(it->get<std::string>());
    if (!id) fail("tokenizer.json: BPE unk_token ", it->dump(), " is not in the vocabulary");
    unk_id_ = id;
  }

  merges_ = MergeTable(tables.merges.size());
  std::string joined;
  for (size_t i = 0; i < tables.merges.size(); ++i) {
    const auto& [a, b] = tables.merges[i];
    joined.assign(a).append(b);
    auto ia = token_to_id(a), ib = token_to_id(b), ic = token_to_id(joined);
    if (!ia || !ib || !ic) {
      fail("tokenizer.json: merge #", i, " (", json(a).dump(), ", ", json(b).dump(), ") names a token that is not in the vocabulary");
    }
    merges_.insert(*ia, *ib, Merge{static_cast<int32_t>(i), *ic});
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = token_ids_.find(token);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (auto it = byte_ids_.find(word); it != byte_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // A byte missing from the vocabulary becomes unk, or is dropped when there is none (as the
  // Hugging Face BPE model does without unk_token).
  auto symbol_of = [&](unsigned char c) { return byte_symbol_[c] >= 0 ? byte_symbol_[c] : unk_id_.value_or(-1); };

  if (word.size() > WordCache::kMaxWordBytes) {
    std::vector<int32_t> symbols;
    symbols.reserve(word.size());
    for (unsigned char c : word) {
      if (const int32_t id = symbol_of(c); id >= 0) symbols.push_back(id);
    }
    merge_large(symbols);
    out.insert(out.end(), symbols.begin(), symbols.end());
    return;
  }
  if (word.size() == 1) {  // nothing to merge or cache
    if (const int32_t id = symbol_of(static_cast<unsigned char>(word[0])); id >= 0) out.push_back(id);
    return;
  }
  const uint64_t hash = std::hash<std::string_view>{}(word);
  if (cache_.lookup(word, hash, out)) return;
  // Per-call scratch on the stack, so concurrent encodes share nothing but the cache.
  int32_t symbols[WordCache::kMaxWordBytes];
  size_t n = 0;
  for (unsigned char c : word) {
    if (const int32_t id = symbol_of(c); id >= 0) symbols[n++] = id;
  }
  n = merge_small(symbols, n);
  cache_.store(word, hash, symbols, n);
  out.insert(out.end(), symbols, symbols + n);
}

void BpeModel::merge_small(std::vector<int32_t>& symbols) const {
  PYPTO_ASSERT(symbols.size() <= kSmallWord, "merge_small takes at most ", kSmallWord, " symbols");
  symbols.resize(merge_small(symbols.data(), symbols.size()));
}

size_t BpeModel::merge_small(int32_t* symbols, size_t n) const {
  // rank[i] / result[i] describe the pair (symbols[i], symbols[i+1]); a linear scan for the
  // lowest rank beats a heap at these sizes.
  constexpr int32_t kNone = INT32_MAX;
  int32_t rank[kSmallWord];
  int32_t result[kSmallWord];
  auto look = [&](size_t i) {
    auto m = i + 1 < n ? merges_.find(symbols[i], symbols[i + 1]) : std::nullopt;
    rank[i] = m ? m->rank : kNone;
    result[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i < n; ++i) look(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks wins
    }
    if (rank[best] == kNone) break;
    symbols[best] = result[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      symbols[i] = symbols[i + 1];
      rank[i] = rank[i + 1];
      result[i] = result[i + 1];
    }
    --n;
    if (best > 0) look(best - 1);
    look(best);
  }
  return n;
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
