#include "structured/matcher.h"

#include "core/error.h"

namespace pypto::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, MatcherOptions options)
    : g_(std::move(grammar)), opt_(options) {
  PYPTO_ASSERT(g_ != nullptr);
  state_ = g_->start_state();
  if (opt_.start_after >= 0) phase_ = opt_.think_open >= 0 ? Phase::MaybeThink : Phase::BeforeStart;
  else enter_after_start();
}

void GrammarMatcher::enter_after_start() {
  phase_ = opt_.trigger >= 0 ? Phase::WaitTrigger : Phase::Active;
  state_ = g_->start_state();
}

const TokenMask* GrammarMatcher::next_mask() {
  try {
    return next_mask_unchecked();
  } catch (const Error& e) {  // the automaton outgrew its limits (CompiledGrammar::kMaxDfaStates)
    broken_ = true;
    error_ = e.what();
    return next_mask_unchecked();
  }
}

bool GrammarMatcher::accept(int32_t token) {
  try {
    return accept_unchecked(token);
  } catch (const Error& e) {
    broken_ = true;
    error_ = e.what();
    return false;
  }
}

const TokenMask* GrammarMatcher::next_mask_unchecked() {
  if (broken_) {
    if (!eos_only_) {
      auto m = std::make_shared<TokenMask>(size_t(g_->vocab().mask_words()), 0u);
      for (int32_t id : g_->vocab().eos_ids()) (*m)[size_t(id) >> 5] |= 1u << (id & 31);
      eos_only_ = m;
    }
    return eos_only_.get();
  }
  switch (phase_) {
    case Phase::MaybeThink:
      if (opt_.trigger >= 0) return nullptr;  // lazy: the first token is free anyway
      if (!first_) {
        auto m = std::make_shared<TokenMask>(*g_->mask(g_->start_state()));
        (*m)[size_t(opt_.think_open) >> 5] |= 1u << (opt_.think_open & 31);
        first_ = m;
      }
      return first_.get();
    case Phase::BeforeStart: return nullptr;
    case Phase::WaitTrigger:
      if (opt_.max_triggers < 0 || triggers_ < opt_.max_triggers) return nullptr;
      if (!no_trigger_) {
        auto m = std::make_shared<TokenMask>(size_t(g_->vocab().mask_words()), ~0u);
        const int64_t v = g_->vocab().size();
        for (int64_t id = v; id < int64_t(m->size()) * 32; ++id) (*m)[size_t(id) >> 5] &= ~(1u << (id & 31));
        (*m)[size_t(opt_.trigger) >> 5] &= ~(1u << (opt_.trigger & 31));
        no_trigger_ = m;
      }
      return no_trigger_.get();
    case Phase::Active:
      // Asked twice per step (ahead of the model, then at sampling): the same state's mask.
      if (!current_ || current_state_ != state_) {
        current_ = g_->mask(state_);
        current_state_ = state_;
      }
      return current_.get();
  }
  return nullptr;
}

bool GrammarMatcher::accept_unchecked(int32_t token) {
  if (broken_) return false;
  switch (phase_) {
    case Phase::MaybeThink:
      if (token == opt_.think_open) {
        phase_ = Phase::BeforeStart;
        return true;
      }
      enter_after_start();
      return accept_unchecked(token);
    case Phase::BeforeStart:
      if (token == opt_.start_after) enter_after_start();
      return true;
    case Phase::WaitTrigger:
      if (token != opt_.trigger) return true;
      if (opt_.max_triggers >= 0 && triggers_ >= opt_.max_triggers) {
        broken_ = true;
        return false;
      }
      ++triggers_;
      phase_ = Phase::Active;
      state_ = g_->start_state();
      return true;
    case Phase::Active: {
      const TokenVocab& v = g_->vocab();
      for (int32_t id : v.eos_ids())
        if (id == token) {
          if (g_->is_accepting(state_)) return true;
          broken_ = true;
          return false;
        }
      if (token < 0 || token >= v.size() || v.token_text(token).empty()) {
        broken_ = true;
        return false;
      }
      state_ = g_->step_text(state_, v.token_text(token));
      if (state_ < 0) {
        broken_ = true;
        return false;
      }
      if (opt_.trigger >= 0 && !g_->can_continue(state_)) phase_ = Phase::WaitTrigger;
      return true;
    }
  }
  return true;
}

bool GrammarMatcher::next_mask_is_cached() const {
  if (broken_ || phase_ != Phase::Active) return true;  // no mask, or one built once per matcher
  if (current_ && current_state_ == state_) return true;
  return g_->has_cached_mask(state_);
}

bool GrammarMatcher::is_complete() const {
  if (broken_) return false;
  if (phase_ == Phase::MaybeThink) return g_->is_accepting(g_->start_state());
  if (phase_ != Phase::Active) return true;
  return g_->is_accepting(state_);
}

}  // namespace pypto::structured
