#include "structured/compiled_grammar.h"

#include <algorithm>

#include "core/error.h"

namespace pypto::structured {

// Thompson construction of the grammar's NFA, references inlined (see grammar.h).
struct CompiledGrammar::Builder {
  const Grammar& g;
  std::vector<NfaState>& nfa;
  std::vector<int32_t> active;  // per rule: how many times it is open on the inlining path

  int32_t add() {
    if (int64_t(nfa.size()) >= kMaxNfaStates)
      fail("the grammar is too large: it unrolls to more than ", kMaxNfaStates,
           " automaton states (lower maxLength / maxItems bounds or recursion)");
    nfa.emplace_back();
    return int32_t(nfa.size()) - 1;
  }
  void eps(int32_t a, int32_t b) { nfa[size_t(a)].eps.push_back(b); }

  // Adds e starting at `from`; returns the state reached after it.
  int32_t build(const Expr& e, int32_t from) {
    switch (e.kind) {
      case Expr::Kind::Bytes: {
        const int32_t to = add();
        for (int b = 0; b < 256;) {
          if (!e.set.has(uint8_t(b))) { ++b; continue; }
          int hi = b;
          while (hi + 1 < 256 && e.set.has(uint8_t(hi + 1))) ++hi;
          nfa[size_t(from)].edges.push_back({uint8_t(b), uint8_t(hi), to});
          b = hi + 1;
        }
        return to;
      }
      case Expr::Kind::Seq: {
        int32_t cur = from;
        for (const ExprPtr& k : e.kids) cur = build(*k, cur);
        return cur;
      }
      case Expr::Kind::Alt: {
        const int32_t to = add();
        for (const ExprPtr& k : e.kids) {
          const int32_t s = add();
          eps(from, s);
          eps(build(*k, s), to);
        }
        return to;
      }
      case Expr::Kind::Repeat: {
        int32_t cur = from;
        for (int32_t i = 0; i < e.min; ++i) cur = build(*e.kids[0], cur);
        if (e.max < 0) {
          const int32_t loop = add();
          eps(cur, loop);
          eps(build(*e.kids[0], loop), loop);
          return loop;
        }
        const int32_t end = add();
        for (int32_t i = e.min; i < e.max; ++i) {
          eps(cur, end);
          const int32_t s = add();
          eps(cur, s);
          cur = build(*e.kids[0], s);
        }
        eps(cur, end);
        return end;
      }
      case Expr::Kind::List: {
        // from -> item -> after; after -> sep -> back to the item's start; after -> end.
        const int32_t loop = add();
        eps(from, loop);
        const int32_t after = build(*e.kids[0], loop);
        eps(build(*e.kids[1], after), loop);
        const int32_t end = add();
        eps(after, end);
        if (e.min == 0) eps(from, end);
        return end;
      }
      case Expr::Kind::Ref: {
        PYPTO_ASSERT(e.rule >= 0 && size_t(e.rule) < g.rules.size(), "rule ", e.rule);
        const Grammar::Rule& r = g.rules[size_t(e.rule)];
        if (!r.body) fail("grammar rule '", r.name, "' is used but never defined");
        if (active[size_t(e.rule)] > g.max_recursion) return add();  // too deep: no way through
        ++active[size_t(e.rule)];
        const int32_t end = build(*r.body, from);
        --active[size_t(e.rule)];
        return end;
      }
    }
    PYPTO_ASSERT(false, "unknown expression kind");
    return from;
  }
};

CompiledGrammar::CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocab> vocab)
    : vocab_(std::move(vocab)) {
  PYPTO_ASSERT(grammar.root != nullptr, "grammar without a root");
  Builder b{grammar, nfa_, std::vector<int32_t>(grammar.rules.size(), 0)};
  const int32_t start = b.add();
  nfa_final_ = b.build(*grammar.root, start);

  // Keep only states from which the end can still be reached, so every live DFA state can
  // complete: the mask never leads into a dead end (e.g. a recursion cut off by the depth limit).
  const size_t n = nfa_.size();
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t s = 0; s < n; ++s) {
    for (const NfaEdge& e : nfa_[s].edges) rev[size_t(e.to)].push_back(int32_t(s));
    for (int32_t t : nfa_[s].eps) rev[size_t(t)].push_back(int32_t(s));
  }
  std::vector<uint8_t> live(n, 0);
  std::vector<int32_t> work = {nfa_final_};
  live[size_t(nfa_final_)] = 1;
  while (!work.empty()) {
    const int32_t s = work.back();
    work.pop_back();
    for (int32_t p : rev[size_t(s)])
      if (!live[size_t(p)]) {
        live[size_t(p)] = 1;
        work.push_back(p);
      }
  }
  if (!live[size_t(start)]) fail("the grammar matches no output at all");
  for (NfaState& s : nfa_) {
    std::erase_if(s.edges, [&](const NfaEdge& e) { return !live[size_t(e.to)]; });
    std::erase_if(s.eps, [&](int32_t t) { return !live[size_t(t)]; });
  }

  // Byte classes: bytes no edge tells apart share a column of the DFA table.
  bool boundary[257] = {};
  boundary[0] = true;
  for (const NfaState& s : nfa_)
    for (const NfaEdge& e : s.edges) {
      boundary[e.lo] = true;
      boundary[e.hi + 1] = true;
    }
  int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) {
      ++cls;
      class_rep_.push_back(uint8_t(b));
    }
    byte_class_[b] = uint8_t(cls);
  }
  num_classes_ = cls + 1;
  closure_mark_.assign(n, 0);
  std::lock_guard<std::mutex> lock(mu_);
  start_ = intern_locked({start});
  PYPTO_ASSERT(start_ >= 0);
}

int32_t CompiledGrammar::intern_locked(std::vector<int32_t> seed) const {
  ++closure_epoch_;
  std::vector<int32_t> set;
  while (!seed.empty()) {
    const int32_t s = seed.back();
    seed.pop_back();
    if (closure_mark_[size_t(s)] == closure_epoch_) continue;
    closure_mark_[size_t(s)] = closure_epoch_;
    const NfaState& st = nfa_[size_t(s)];
    if (!st.edges.empty() || s == nfa_final_) set.push_back(s);
    for (int32_t t : st.eps) seed.push_back(t);
  }
  if (set.empty()) return kDead;
  std::sort(set.begin(), set.end());
  std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(int32_t));
  auto it = by_set_.find(key);
  if (it != by_set_.end()) return it->second;
  const int32_t id = int32_t(sets_.size());
  bool acc = false, cont = false;
  for (int32_t s : set) {
    acc |= s == nfa_final_;
    cont |= !nfa_[size_t(s)].edges.empty();
  }
  sets_.push_back(std::move(set));
  accepting_.push_back(acc);
  continues_.push_back(cont);
  trans_.resize(trans_.size() + size_t(num_classes_), kUnknown);
  masks_.push_back(nullptr);
  by_set_.emplace(std::move(key), id);
  return id;
}

int32_t CompiledGrammar::step_locked(int32_t state, uint8_t byte) const {
  const size_t idx = size_t(state) * size_t(num_classes_) + byte_class_[byte];
  if (trans_[idx] != kUnknown) return trans_[idx];
  std::vector<int32_t> next;
  for (int32_t s : sets_[size_t(state)])
    for (const NfaEdge& e : nfa_[size_t(s)].edges)
      if (e.lo <= byte && byte <= e.hi) next.push_back(e.to);
  const int32_t t = intern_locked(std::move(next));
  trans_[idx] = t;  // trans_ may have grown: index again
  return t;
}

int32_t CompiledGrammar::step(int32_t state, uint8_t byte) const {
  if (state < 0) return kDead;
  std::lock_guard<std::mutex> lock(mu_);
  return step_locked(state, byte);
}

int32_t CompiledGrammar::step_text(int32_t state, std::string_view text) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (char c : text) {
    if (state < 0) return kDead;
    state = step_locked(state, uint8_t(c));
  }
  return state;
}

bool CompiledGrammar::is_accepting(int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  return state >= 0 && accepting_[size_t(state)];
}

bool CompiledGrammar::can_continue(int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  return state >= 0 && continues_[size_t(state)];
}

int64_t CompiledGrammar::num_dfa_states() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int64_t(sets_.size());
}

bool CompiledGrammar::has_cached_mask(int32_t state) const {
  std::lock_guard<std::mutex> lock(mu_);
  return state >= 0 && masks_[size_t(state)] != nullptr;
}

int64_t CompiledGrammar::num_cached_masks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_masks_;
}

std::shared_ptr<const TokenMask> CompiledGrammar::mask(int32_t state) const {
  PYPTO_ASSERT(state >= 0, "mask of the dead state");
  std::lock_guard<std::mutex> lock(mu_);
  if (masks_[size_t(state)]) return masks_[size_t(state)];
  auto m = compute_mask_locked(state);
  if (num_masks_ < kMaxCachedMasks) {
    masks_[size_t(state)] = m;
    ++num_masks_;
  }
  return m;
}

// One preorder walk of the vocabulary trie from `state`: at each node, the state after the
// node's byte; a dead state skips the node's whole subtree.
std::shared_ptr<const TokenMask> CompiledGrammar::compute_mask_locked(int32_t state) const {
  auto m = std::make_shared<TokenMask>(size_t(vocab_->mask_words()), 0u);
  uint32_t* bits = m->data();
  const std::vector<TokenVocab::Node>& nodes = vocab_->nodes();
  const std::span<const int32_t> ids = vocab_->ids();
  std::vector<int32_t> at(size_t(vocab_->max_depth()) + 1);
  at[0] = state;
  const size_t k = size_t(num_classes_);
  for (size_t i = 1; i < nodes.size();) {
    const TokenVocab::Node& n = nodes[i];
    const int32_t from = at[n.depth - 1];
    int32_t t = trans_[size_t(from) * k + byte_class_[n.byte]];
    if (t == kUnknown) t = step_locked(from, n.byte);
    if (t < 0) {
      i = n.next;
      continue;
    }
    at[n.depth] = t;
    for (uint32_t j = n.tok_begin; j < n.tok_end; ++j) bits[ids[j] >> 5] |= 1u << (ids[j] & 31);
    ++i;
  }
  if (accepting_[size_t(state)])
    for (int32_t id : vocab_->eos_ids()) bits[id >> 5] |= 1u << (id & 31);
  return m;
}

}  // namespace pypto::structured
