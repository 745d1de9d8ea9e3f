#pragma once
// A Grammar compiled for one vocabulary: a byte NFA with call edges for recursion (a pushdown
// automaton), determinized lazily, and a token mask cached per determinized state.
//
// References are inlined, except a reference to a rule that is already being inlined on the way
// there (recursion): that one becomes a call of the rule's own sub-automaton (its fragment),
// which pushes the state to return to. A configuration is (NFA state, stack of return states);
// stacks are interned as a tree (node = return state + parent node), so a configuration is two
// ints and nesting is bounded only by the output length (max_tokens). A non-recursive grammar
// never pushes and is a plain finite automaton.
//
// Why determinize: a constrained step then needs only "which state are we in" (one int per
// request), and the mask of a state, once computed by one trie walk (~1-3 ms for the 151,936
// Qwen3 tokens when most are allowed, far less when few are), is reused by every later step and
// every later request with the same grammar (GrammarCache shares compiled grammars). A state
// of a recursive grammar includes the stacks, so each nesting depth reached has its own states
// (and masks, computed on first visit).
//
// Thread-safety: shared by requests on several threads; the lazy DFA and the mask cache are
// behind one mutex, taken once per mask and once per accepted token.
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/token_trie.h"
#include "structured/fuzz_limits.h"

namespace pypto::structured {

// One token mask: bit (id % 32) of word id / 32 set when the token is allowed; [mask_words].
using TokenMask = std::vector<uint32_t>;

class CompiledGrammar {
 public:
  static constexpr int32_t kDead = -1;
  // Limits (docs/api.md, "Input limits"); a grammar past one is refused with an Error naming it.
  // NFA states: a schema that expands to more is refused instead of eating memory.
  static constexpr int64_t kMaxNfaStates = 1'000'000 / kFuzzWorkDivisor;
  // Expressions nested inside each other once references are inlined (the builder recurses once
  // per level): a chain of rules each naming the next is as deep as it is long.
  static constexpr int kMaxGrammarNesting = 2000;
  // Work of the passes over the whole automaton at compile time (which states can still
  // complete, which rules are left-recursive), in states and edges visited: they repeat until
  // nothing changes, so their work can grow faster than the automaton.
  static constexpr int64_t kMaxCompileSteps = 50'000'000 / kFuzzWorkDivisor;
  // The lazily determinized automaton: states, and configurations stored over all of them
  // (8 bytes each). Bounds the memory a grammar can take while it is used; a grammar whose
  // start state alone exceeds them is refused at compile time, one that grows past them later
  // ends its output (the matcher reports the error; see GrammarMatcher::error()).
  static constexpr int64_t kMaxDfaStates = 200'000 / kFuzzWorkDivisor;
  static constexpr int64_t kMaxDfaConfigs = 16'000'000 / kFuzzWorkDivisor;
  // Masks kept per grammar (19 KB each for Qwen3: 2,048 = 38 MiB); past it, a state's mask is
  // recomputed when needed instead of cached.
  static constexpr int64_t kMaxCachedMasks = 2048;

  // Throws Error when the grammar is too large or matches nothing at all.
  CompiledGrammar(const Grammar& grammar, std::shared_ptr<const TokenVocab> vocab);

  int32_t start_state() const { return start_; }
  // The DFA state after `byte` from `state` (kDead when the byte leaves the language). This and
  // step_text / mask may determinize new states: past kMaxDfaStates / kMaxDfaConfigs they throw
  // Error.
  int32_t step(int32_t state, uint8_t byte) const;
  // The state after all of `text` (kDead if any byte is rejected).
  int32_t step_text(int32_t state, std::string_view text) const;
  bool is_accepting(int32_t state) const;
  // Whether any byte can follow (false: the output must end here).
  bool can_continue(int32_t state) const;
  // The tokens allowed in `state` (EOS ids included when it is accepting). Cached.
  std::shared_ptr<const TokenMask> mask(int32_t state) const;
  bool has_cached_mask(int32_t state) const;

  const TokenVocab& vocab() const { return *vocab_; }
  int64_t num_nfa_states() const { return int64_t(nfa_.size()); }
  int64_t num_dfa_states() const;
  int64_t num_cached_masks() const;
  // Bytes held now, approximately: the NFA, the determinized states so far and the cached masks
  // (grows as the grammar is used, within kMaxDfaStates / kMaxDfaConfigs / kMaxCachedMasks).
  int64_t memory_bytes() const;

 private:
  struct NfaEdge {
    uint8_t lo, hi;
    int32_t to;
  };
  struct NfaState {
    std::vector<NfaEdge> edges;
    std::vector<int32_t> eps;
    int32_t call = -1;      // a call state: the called fragment's entry state ...
    int32_t call_ret = -1;  // ... and the state to continue at once it returns
    bool ret = false;       // a fragment's exit: pop the stack and continue at its top
  };
  // A configuration: NFA state + interned stack (-1: empty).
  struct Config {
    int32_t state, stack;
    bool operator<(const Config& o) const { return state != o.state ? state < o.state : stack < o.stack; }
  };
  struct StackNode {
    int32_t ret, parent;
  };
  struct Builder;

  int32_t step_locked(int32_t state, uint8_t byte) const;
  struct Fragment {
    int32_t entry = -1, exit = -1;  // NFA states; -1 when the rule is never called
  };
  struct StepBudget;  // kMaxCompileSteps
  void check_left_recursion(const Grammar& g, const std::vector<Fragment>& fragments, StepBudget& budget) const;
  int32_t intern_locked(std::vector<Config> set) const;  // epsilon-closes `set` first
  int32_t push_locked(int32_t stack, int32_t ret) const;
  std::shared_ptr<const TokenMask> compute_mask_locked(int32_t state) const;

  std::shared_ptr<const TokenVocab> vocab_;
  std::vector<NfaState> nfa_;
  int32_t nfa_final_ = 0;
  uint8_t byte_class_[256] = {};
  std::vector<uint8_t> class_rep_;  // one byte per class
  int32_t num_classes_ = 0;
  int32_t start_ = 0;
  int64_t nfa_bytes_ = 0;  // set once the NFA is final

  // Lazy DFA: state d's transitions are trans_[d * num_classes_ + class], kUnknown until computed.
  static constexpr int32_t kUnknown = -2;
  mutable std::mutex mu_;
  mutable std::vector<int32_t> trans_;
  mutable std::vector<std::vector<Config>> sets_;  // configurations (byte-consuming or final) per DFA state
  mutable std::vector<StackNode> stacks_;
  mutable std::unordered_map<uint64_t, int32_t> stack_ids_;
  mutable std::vector<int32_t> closure_mark_;  // scratch for epsilon closures (empty-stack configurations)
  mutable int32_t closure_epoch_ = 0;
  mutable std::vector<uint8_t> accepting_, continues_;
  mutable std::unordered_map<std::string, int32_t> by_set_;
  mutable std::vector<std::shared_ptr<const TokenMask>> masks_;
  mutable int64_t num_masks_ = 0;
  mutable int64_t num_configs_ = 0;  // over sets_ (kMaxDfaConfigs)
};

}  // namespace pypto::structured
