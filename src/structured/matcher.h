#pragma once
// One sequence's position in a compiled grammar, plus when the grammar applies.
//
// Phases, in order:
//   0. With `think_open` set (the output may or may not open with <think>): the first token is
//      the grammar's first token or `think_open`; the latter leads to phase 1.
//   1. Before `start_after` (the </think> id when the model reasons first): unconstrained.
//   2. Lazy grammars (tool_choice "auto"): unconstrained until the model writes `trigger`
//      (<tool_call>); then the grammar (which describes what follows the trigger) applies until
//      it is complete and nothing more can follow, and the matcher waits for the trigger again.
//      After `max_triggers` such rounds the trigger itself is masked.
//   3. Otherwise the grammar applies from the first token (after phase 1) to the end; EOS ids
//      are allowed only where the output is complete.
// The engine asks next_mask() before sampling a row and calls accept() with the sampled token.
#include <cstdint>
#include <memory>
#include <string>

#include "structured/compiled_grammar.h"

namespace pypto::structured {

struct MatcherOptions {
  int32_t start_after = -1;   // token id ending the unconstrained prefix (-1: none)
  int32_t trigger = -1;       // lazy grammar's trigger token (-1: the grammar is not lazy)
  int32_t max_triggers = -1;  // lazy rounds allowed (-1: any number)
  int32_t think_open = -1;    // with start_after: the output may open a reasoning block first
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, MatcherOptions options);

  // The allowed tokens for the next step, or null when this step is unconstrained. The pointer
  // stays valid until the next call on this matcher.
  const TokenMask* next_mask();
  // Whether next_mask() is only a lookup now (false: it will walk the vocabulary trie).
  bool next_mask_is_cached() const;
  // Advances past `token`. False when the grammar does not allow it (then the matcher is
  // broken: every later mask allows only EOS).
  bool accept(int32_t token);
  // Whether the constrained part is complete (EOS allowed now), or the grammar never started.
  bool is_complete() const;
  bool is_broken() const { return broken_; }
  // Why the matcher broke when the grammar itself failed (its automaton outgrew
  // CompiledGrammar::kMaxDfaStates / kMaxDfaConfigs): the output then ends, as after a token
  // the grammar does not allow, and the engine reports finish_reason "error" with this message.
  // Empty otherwise.
  const std::string& error() const { return error_; }
  int32_t num_triggers() const { return triggers_; }

 private:
  enum class Phase { MaybeThink, BeforeStart, WaitTrigger, Active };
  void enter_after_start();
  const TokenMask* next_mask_unchecked();
  bool accept_unchecked(int32_t token);

  std::shared_ptr<const CompiledGrammar> g_;
  MatcherOptions opt_;
  Phase phase_;
  int32_t state_ = 0;
  int32_t triggers_ = 0;
  bool broken_ = false;
  std::string error_;
  std::shared_ptr<const TokenMask> current_;  // keeps next_mask()'s result alive
  int32_t current_state_ = -1;                // the state current_ is the mask of
  std::shared_ptr<const TokenMask> no_trigger_;  // everything but the trigger (lazily built)
  std::shared_ptr<const TokenMask> eos_only_;
  std::shared_ptr<const TokenMask> first_;  // MaybeThink: the grammar's first tokens + think_open
};

}  // namespace pypto::structured
