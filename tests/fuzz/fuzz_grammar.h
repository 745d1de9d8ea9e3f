#pragma once
// Shared by the grammar fuzz targets: a small vocabulary (every byte, a few multi-byte tokens)
// and a walk of a compiled grammar that exercises determinization and masks, bounded so one
// input stays fast.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "structured/compiled_grammar.h"

namespace pypto::fuzz {

inline std::shared_ptr<const structured::TokenVocab> small_vocab() {
  static const auto v = [] {
    std::vector<std::string> toks;
    for (int b = 0; b < 256; ++b) toks.push_back(std::string(1, char(b)));
    for (const char* t : {"{\"", "\":", "\"}", "true", "null", "  ", "\n", "12", "ab", "é", "😀", "</tool_call>"})
      toks.push_back(t);
    const int32_t eos = int32_t(toks.size());
    toks.push_back("");  // EOS: no text
    return structured::TokenVocab::from_strings(toks, int64_t(toks.size()), {eos});
  }();
  return v;
}

// Compiles `g` and walks it along `steer` (each byte picks an allowed token), checking that a
// mask never allows a token the grammar then rejects. Throws pypto::Error as compilation does.
inline void compile_and_walk(const structured::Grammar& g, std::string_view steer) {
  const structured::CompiledGrammar cg(g, small_vocab());
  int32_t state = cg.start_state();
  for (size_t i = 0; i < steer.size() && i < 64; ++i) {
    const auto mask = cg.mask(state);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < int32_t(cg.vocab().size()); ++id)
      if (((*mask)[size_t(id) >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    if (allowed.empty()) __builtin_trap();  // every live state can continue or end
    const int32_t tok = allowed[uint8_t(steer[i]) % allowed.size()];
    const std::string& text = cg.vocab().token_text(tok);
    if (text.empty()) {  // EOS: allowed only where the output is complete
      if (!cg.is_accepting(state)) __builtin_trap();
      return;
    }
    state = cg.step_text(state, text);
    if (state < 0) __builtin_trap();  // the mask allowed a token the grammar rejects
  }
}

}  // namespace pypto::fuzz
