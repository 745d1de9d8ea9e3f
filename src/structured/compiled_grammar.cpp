#include "structured/compiled_grammar.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "core/error.h"

namespace pypto::structured {

// Thompson construction of the grammar's NFA: references inlined, recursive ones as calls of
// the rule's fragment (see the header).
struct CompiledGrammar::Builder {
  const Grammar& g;
  std::vector<NfaState>& nfa;
  std::vector<uint8_t> active;  // per rule: open on the inlining path
  std::vector<Fragment> fragments;  // per rule, built on its first recursive reference
  int depth = 0;                    // build() calls open (kMaxGrammarNesting)

  int32_t add() {
    if (int64_t(nfa.size()) >= kMaxNfaStates)
      fail("the grammar is too large: it expands to more than ", kMaxNfaStates,
           " automaton states (kMaxNfaStates): lower maxLength / maxItems bounds, or fewer rules referring to each other");
    nfa.emplace_back();
    return int32_t(nfa.size()) - 1;
  }
  void eps(int32_t a, int32_t b) { nfa[size_t(a)].eps.push_back(b); }

  struct Nested {
    int& depth;
    explicit Nested(int& d) : depth(d) {
      if (++depth > kMaxGrammarNesting)
        fail("the grammar nests deeper than the limit of ", kMaxGrammarNesting,
             " levels (kMaxGrammarNesting), counting each rule reference as a level");
    }
    ~Nested() { --depth; }
  };

  // Adds e starting at `from`; returns the state reached after it.
  int32_t build(const Expr& e, int32_t from) {
    const Nested nested(depth);
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
      case Expr::Kind::Automaton: {
        const ByteAutomaton& a = *e.automaton;
        const int32_t base = int32_t(nfa.size());
        for (int32_t i = 0; i < a.num_states; ++i) add();
        eps(from, base + a.start);
        for (const ByteAutomaton::Edge& x : a.edges) nfa[size_t(base + x.from)].edges.push_back({x.lo, x.hi, base + x.to});
        const int32_t end = add();
        for (int32_t f : a.finals) eps(base + f, end);
        return end;
      }
      case Expr::Kind::Ref: {
        PYPTO_ASSERT(e.rule >= 0 && size_t(e.rule) < g.rules.size(), "rule ", e.rule);
        const Grammar::Rule& r = g.rules[size_t(e.rule)];
        if (!r.body) fail("grammar rule '", r.name, "' is used but never defined");
        if (active[size_t(e.rule)]) {  // recursion: call the rule's fragment
          const int32_t entry = fragment(e.rule);
          const int32_t c = add();
          eps(from, c);
          const int32_t back = add();
          nfa[size_t(c)].call = entry;
          nfa[size_t(c)].call_ret = back;
          return back;
        }
        active[size_t(e.rule)] = 1;
        const int32_t end = build(*r.body, from);
        active[size_t(e.rule)] = 0;
        return end;
      }
    }
    PYPTO_ASSERT(false, "unknown expression kind");
    return from;
  }

  // The entry state of rule's fragment: its body built on its own (only the rule itself open, so
  // every rule is inlined at most once per fragment), ending in a return state.
  int32_t fragment(int32_t rule) {
    Fragment& f = fragments[size_t(rule)];
    if (f.entry >= 0) return f.entry;
    f.entry = add();
    std::vector<uint8_t> saved(g.rules.size(), 0);
    std::swap(saved, active);
    active[size_t(rule)] = 1;
    const int32_t end = build(*g.rules[size_t(rule)].body, fragments[size_t(rule)].entry);
    const int32_t exit = add();
    eps(end, exit);
    nfa[size_t(exit)].ret = true;
    fragments[size_t(rule)].exit = exit;
    std::swap(saved, active);
    return fragments[size_t(rule)].entry;
  }
};

// Counts the work of the compile-time passes against kMaxCompileSteps.
struct CompiledGrammar::StepBudget {
  int64_t used = 0;
  void spend(int64_t n) {
    used += n;
    if (used > kMaxCompileSteps)
      fail("the grammar is too complex: compiling it takes more than ", kMaxCompileSteps,
           " steps (kMaxCompileSteps); fewer rules referring to each other, or smaller bounds");
  }
};

CompiledGrammar::CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocab> vocab)
    : vocab_(std::move(vocab)) {
  PYPTO_ASSERT(grammar.root != nullptr, "grammar without a root");
  Builder b{grammar, nfa_, std::vector<uint8_t>(grammar.rules.size(), 0),
            std::vector<Fragment>(grammar.rules.size())};
  const int32_t start = b.add();
  nfa_final_ = b.build(*grammar.root, start);
  const size_t n = nfa_.size();

  // Keep only states from which the end (of the grammar, or of their fragment) can still be
  // reached, so every live configuration can complete: the mask never leads into a dead end. A
  // call passes through to its return state only when the called fragment can complete, which
  // is itself what is being computed: iterate until nothing changes.
  std::vector<std::vector<int32_t>> rev(n);
  std::vector<int32_t> calls;
  for (size_t s = 0; s < n; ++s) {
    for (const NfaEdge& e : nfa_[s].edges) rev[size_t(e.to)].push_back(int32_t(s));
    for (int32_t t : nfa_[s].eps) rev[size_t(t)].push_back(int32_t(s));
    if (nfa_[s].call >= 0) calls.push_back(int32_t(s));
  }
  std::vector<uint8_t> live(n, 0);
  StepBudget budget;
  for (size_t changed = 1; changed;) {
    budget.spend(int64_t(n) + int64_t(calls.size()));
    std::vector<int32_t> work = {nfa_final_};
    std::fill(live.begin(), live.end(), 0);
    for (size_t s = 0; s < n; ++s)
      if (nfa_[s].ret) work.push_back(int32_t(s));
    for (int32_t s : work) live[size_t(s)] = 1;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      budget.spend(int64_t(rev[size_t(s)].size()));
      for (int32_t p : rev[size_t(s)])
        if (!live[size_t(p)]) {
          live[size_t(p)] = 1;
          work.push_back(p);
        }
    }
    changed = 0;
    for (int32_t c : calls) {
      const NfaState& st = nfa_[size_t(c)];
      if (live[size_t(st.call)] && std::find(rev[size_t(st.call_ret)].begin(), rev[size_t(st.call_ret)].end(), c) ==
                                       rev[size_t(st.call_ret)].end()) {
        rev[size_t(st.call_ret)].push_back(c);
        changed = 1;
      }
    }
  }
  if (!live[size_t(start)]) fail("the grammar matches no output at all");
  for (NfaState& s : nfa_) {
    std::erase_if(s.edges, [&](const NfaEdge& e) { return !live[size_t(e.to)]; });
    std::erase_if(s.eps, [&](int32_t t) { return !live[size_t(t)]; });
  }
  check_left_recursion(grammar, b.fragments, budget);

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
  closure_mark_.assign(nfa_.size(), 0);
  nfa_bytes_ = int64_t(nfa_.capacity() * sizeof(NfaState) + closure_mark_.capacity() * sizeof(int32_t));
  for (const NfaState& st : nfa_)
    nfa_bytes_ += int64_t(st.edges.capacity() * sizeof(NfaEdge) + st.eps.capacity() * sizeof(int32_t));
  std::lock_guard<std::mutex> lock(mu_);
  start_ = intern_locked({{start, -1}});
  PYPTO_ASSERT(start_ >= 0);
}

// A rule that can call itself before reading a byte would push forever: refused.
void CompiledGrammar::check_left_recursion(const Grammar& g, const std::vector<Fragment>& fragments,
                                           StepBudget& budget) const {
  const size_t nr = fragments.size();
  std::vector<int32_t> rule_of_entry(nfa_.size(), -1);
  for (size_t r = 0; r < nr; ++r)
    if (fragments[r].entry >= 0) rule_of_entry[size_t(fragments[r].entry)] = int32_t(r);
  // The states reachable from `from` without reading a byte (calls of nullable fragments passed
  // through); the fragments called on the way go to `called`.
  std::vector<uint8_t> nullable(nr, 0);
  std::vector<int32_t> seen(nfa_.size(), 0);  // == epoch: visited by the current walk
  int32_t epoch = 0;
  auto walk = [&](int32_t from, std::vector<int32_t>* called) {
    ++epoch;
    std::vector<int32_t> work = {from};
    bool reaches_exit = false;
    while (!work.empty()) {
      const int32_t s = work.back();
      work.pop_back();
      if (seen[size_t(s)] == epoch) continue;
      seen[size_t(s)] = epoch;
      const NfaState& st = nfa_[size_t(s)];
      budget.spend(1 + int64_t(st.eps.size()));
      reaches_exit |= st.ret;
      for (int32_t t : st.eps) work.push_back(t);
      if (st.call >= 0) {
        if (called) called->push_back(rule_of_entry[size_t(st.call)]);
        if (nullable[size_t(rule_of_entry[size_t(st.call)])]) work.push_back(st.call_ret);
      }
    }
    return reaches_exit;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < nr; ++r)
      if (fragments[r].entry >= 0 && !nullable[r] && walk(fragments[r].entry, nullptr)) nullable[r] = changed = true;
  }
  std::vector<std::vector<int32_t>> left(nr);
  for (size_t r = 0; r < nr; ++r)
    if (fragments[r].entry >= 0) walk(fragments[r].entry, &left[r]);
  // A cycle in "calls first" is left recursion: a depth-first search with an explicit stack (a
  // grammar may have thousands of rules).
  std::vector<uint8_t> color(nr, 0);  // 0 new, 1 on the path, 2 done
  struct Frame {
    int32_t rule;
    size_t next;  // index into left[rule]
  };
  std::vector<Frame> path;
  for (size_t r0 = 0; r0 < nr; ++r0) {
    if (fragments[r0].entry < 0 || color[r0] != 0) continue;
    color[r0] = 1;
    path.push_back({int32_t(r0), 0});
    while (!path.empty()) {
      Frame& f = path.back();
      budget.spend(1);
      if (f.next == left[size_t(f.rule)].size()) {
        color[size_t(f.rule)] = 2;
        path.pop_back();
        continue;
      }
      const int32_t t = left[size_t(f.rule)][f.next++];
      if (color[size_t(t)] == 1)
        fail("grammar rule '", g.rules[size_t(t)].name,
             "' is left-recursive (it can reach itself before any byte); rewrite it with repetition");
      if (color[size_t(t)] == 0) {
        color[size_t(t)] = 1;
        path.push_back({t, 0});
      }
    }
  }
}

int32_t CompiledGrammar::push_locked(int32_t stack, int32_t ret) const {
  const uint64_t key = (uint64_t(uint32_t(stack)) << 32) | uint32_t(ret);
  auto it = stack_ids_.find(key);
  if (it != stack_ids_.end()) return it->second;
  const int32_t id = int32_t(stacks_.size());
  stacks_.push_back({ret, stack});
  stack_ids_.emplace(key, id);
  return id;
}

int32_t CompiledGrammar::intern_locked(std::vector<Config> seed) const {
  // Epsilon closure: epsilon edges, calls (push) and fragment exits (pop). Configurations
  // with an empty stack (all of them in a non-recursive grammar) are marked in an array, the
  // others in a hash set.
  ++closure_epoch_;
  std::unordered_set<uint64_t> seen;
  std::vector<Config> set;
  while (!seed.empty()) {
    const Config c = seed.back();
    seed.pop_back();
    if (c.stack < 0) {
      if (closure_mark_[size_t(c.state)] == closure_epoch_) continue;
      closure_mark_[size_t(c.state)] = closure_epoch_;
    } else if (!seen.insert((uint64_t(uint32_t(c.stack)) << 32) | uint32_t(c.state)).second) {
      continue;
    }
    const NfaState& st = nfa_[size_t(c.state)];
    if (!st.edges.empty() || (c.state == nfa_final_ && c.stack < 0)) set.push_back(c);
    for (int32_t t : st.eps) seed.push_back({t, c.stack});
    if (st.call >= 0) seed.push_back({st.call, push_locked(c.stack, st.call_ret)});
    if (st.ret && c.stack >= 0) seed.push_back({stacks_[size_t(c.stack)].ret, stacks_[size_t(c.stack)].parent});
  }
  if (set.empty()) return kDead;
  std::sort(set.begin(), set.end());
  std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(Config));
  auto it = by_set_.find(key);
  if (it != by_set_.end()) return it->second;
  if (int64_t(sets_.size()) >= kMaxDfaStates || num_configs_ + int64_t(set.size()) > kMaxDfaConfigs)
    fail("the grammar's automaton grew past the limit of ", kMaxDfaStates, " states (kMaxDfaStates) or ",
         kMaxDfaConfigs, " configurations (kMaxDfaConfigs); ", sets_.size(), " states and ", num_configs_,
         " configurations were built");
  num_configs_ += int64_t(set.size());
  const int32_t id = int32_t(sets_.size());
  bool acc = false, cont = false;
  for (const Config& c : set) {
    acc |= c.state == nfa_final_ && c.stack < 0;
    cont |= !nfa_[size_t(c.state)].edges.empty();
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
  std::vector<Config> next;
  for (const Config& c : sets_[size_t(state)])
    for (const NfaEdge& e : nfa_[size_t(c.state)].edges)
      if (e.lo <= byte && byte <= e.hi) next.push_back({e.to, c.stack});
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

int64_t CompiledGrammar::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Per DFA state: its configurations, its row of transitions, its key in by_set_ (the same
  // bytes again) and the bookkeeping around them (~64 bytes).
  const int64_t dfa = num_configs_ * int64_t(2 * sizeof(Config)) + int64_t(trans_.size() * sizeof(int32_t)) +
                      int64_t(sets_.size()) * 64 + int64_t(stacks_.size()) * 24;
  return nfa_bytes_ + dfa + num_masks_ * vocab_->mask_words() * int64_t(sizeof(uint32_t));
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
