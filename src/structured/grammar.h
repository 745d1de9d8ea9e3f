#pragma once
// The grammar IR every constraint compiles to: JSON schemas (json_schema.h), regexes (regex.h),
// EBNF text (ebnf.h) and the tool-call formats (serve/structured_request.cpp) all build an Expr
// tree over *bytes*, so UTF-8 is spelled out as byte sequences and a BPE token that ends inside
// a multi-byte character is judged byte by byte like any other.
//
// Expr is immutable and shared (a sub-expression may appear under several parents). Recursion
// goes through named rules: Ref(i) stands for rule i's body. CompiledGrammar
// (compiled_grammar.h) turns a Grammar into one NFA, inlining references; a recursive reference
// becomes a call with a return stack, so nesting has no fixed limit. A rule that reaches itself
// before any byte (left recursion) is refused.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pypto::structured {

// A set of byte values, bit b of words[b / 64].
struct ByteSet {
  std::array<uint64_t, 4> words{};
  void add(uint8_t b) { words[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  bool has(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return !(words[0] | words[1] | words[2] | words[3]); }
  ByteSet complement() const {
    ByteSet s;
    for (int i = 0; i < 4; ++i) s.words[i] = ~words[i];
    return s;
  }
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

// An explicit byte automaton, for languages built state by state (length_limit.h): states
// 0..num_states-1, byte-range edges, accepting states.
struct ByteAutomaton {
  struct Edge {
    int32_t from;
    uint8_t lo, hi;
    int32_t to;
  };
  int32_t num_states = 0;
  int32_t start = 0;
  std::vector<int32_t> finals;
  std::vector<Edge> edges;
};

struct Expr {
  enum class Kind {
    Bytes,   // one byte from `set`
    Seq,     // kids in order (empty Seq = the empty string)
    Alt,     // one of kids (empty Alt = nothing matches)
    Repeat,  // kids[0] repeated min..max times (max < 0: unbounded)
    Ref,     // the body of rule `rule`
    List,    // kids[0] (kids[1] kids[0])*, or nothing when min == 0: one copy of the item in
             // the automaton, where item (sep item)* would inline it twice
    Automaton,  // the language of `automaton`
  };
  Kind kind = Kind::Seq;
  ByteSet set;
  std::vector<ExprPtr> kids;
  int32_t min = 0, max = 0;
  int32_t rule = -1;
  std::shared_ptr<const ByteAutomaton> automaton;
};

// Builders. All return shared immutable nodes.
ExprPtr bytes(const ByteSet& set);
ExprPtr byte_range(uint8_t lo, uint8_t hi);
ExprPtr literal(std::string_view text);  // exactly these bytes
ExprPtr seq(std::vector<ExprPtr> kids);
ExprPtr alt(std::vector<ExprPtr> kids);
ExprPtr repeat(ExprPtr e, int32_t min, int32_t max);  // max < 0: unbounded
ExprPtr optional(ExprPtr e);
ExprPtr ref(int32_t rule);
// item (sep item)* ; min_one false: also the empty string.
ExprPtr list(ExprPtr item, ExprPtr sep, bool min_one);
ExprPtr automaton(std::shared_ptr<const ByteAutomaton> a);
ExprPtr empty_string();
ExprPtr nothing();
// Code points lo..hi (ranges of Unicode scalar values, surrogates excluded) as UTF-8 bytes.
ExprPtr code_points(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);
// Any Unicode scalar value as UTF-8 (1-4 bytes, well formed).
ExprPtr any_char();

// Bytes of literal text and of patterns the front ends may put into one grammar (docs/api.md,
// "Input limits"). Every byte becomes at least one expression node (~100 bytes of memory) and
// one automaton state, so a grammar with more could never compile under
// CompiledGrammar::kMaxNfaStates; refusing it while it is built bounds the memory it takes first.
inline constexpr int64_t kMaxGrammarTextBytes = 1'000'000;

struct Grammar {
  struct Rule {
    std::string name;
    ExprPtr body;  // set once the rule is defined (a rule may be referenced before)
  };
  std::vector<Rule> rules;
  ExprPtr root;
  int64_t text_bytes = 0;  // literal and pattern bytes added so far (kMaxGrammarTextBytes)

  // Counts `n` more bytes of literal text or pattern; throws Error naming `what` past the limit.
  void add_text(size_t n, std::string_view what);

  int32_t add_rule(std::string name, ExprPtr body = nullptr) {
    rules.push_back({std::move(name), std::move(body)});
    return int32_t(rules.size()) - 1;
  }
};

}  // namespace pypto::structured
