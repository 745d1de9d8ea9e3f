#include "structured/length_limit.h"

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "structured/compiled_grammar.h"

namespace pypto::structured {

ExprPtr limit_length(const ExprPtr& body, int min_len, int max_len) {
  // The body's DFA, stepped byte by byte (no vocabulary: only step() is used).
  Grammar g;
  g.root = body;
  const CompiledGrammar dfa(g, TokenVocab::from_strings({}, 0, {}));

  // Product state: body DFA state, characters so far (saturating at min_len when unbounded
  // above), escape phase (0 outside an escape, 1 after '\', 2..5 inside the \u digits).
  struct Key {
    int32_t q, n, phase;
    bool operator==(const Key& o) const { return q == o.q && n == o.n && phase == o.phase; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()((int64_t(k.q) << 24) ^ (int64_t(k.n) << 3) ^ k.phase);
    }
  };
  std::unordered_map<Key, int32_t, KeyHash> ids;
  std::vector<Key> keys;
  auto id_of = [&](Key k) {
    auto [it, added] = ids.emplace(k, int32_t(keys.size()));
    if (added) {
      if (int64_t(keys.size()) >= kMaxLengthProductStates)
        fail("the string's pattern/format together with minLength/maxLength needs more than ",
             kMaxLengthProductStates, " automaton states (kMaxLengthProductStates): lower maxLength");
      keys.push_back(k);
    }
    return it->second;
  };
  auto a = std::make_shared<ByteAutomaton>();
  a->start = id_of({dfa.start_state(), 0, 0});
  for (size_t i = 0; i < keys.size(); ++i) {
    const Key k = keys[i];
    if (k.phase == 0 && k.n >= min_len && dfa.is_accepting(k.q)) a->finals.push_back(int32_t(i));
    int32_t run_to = -1;
    int run_lo = 0;
    auto flush = [&](int b) {
      if (run_to >= 0) a->edges.push_back({int32_t(i), uint8_t(run_lo), uint8_t(b - 1), run_to});
      run_to = -1;
    };
    for (int b = 0; b < 256; ++b) {
      const int32_t q = dfa.step(k.q, uint8_t(b));
      int32_t to = -1;
      if (q >= 0) {
        int phase = 0, inc = 0;
        if (k.phase == 0) {
          inc = (b & 0xC0) == 0x80 ? 0 : 1;
          phase = b == '\\' ? 1 : 0;
        } else if (k.phase == 1) {
          phase = b == 'u' ? 2 : 0;
        } else {
          phase = k.phase == 5 ? 0 : k.phase + 1;
        }
        int n = k.n + inc;
        if (max_len < 0) n = std::min(n, min_len);
        if (max_len < 0 || n <= max_len) to = id_of({q, n, phase});
      }
      if (to != run_to) {
        flush(b);
        run_to = to;
        run_lo = b;
      }
    }
    flush(256);
  }
  a->num_states = int32_t(keys.size());
  return automaton(std::move(a));
}

}  // namespace pypto::structured
