#pragma once
// The Split pre-tokenizer: cuts text into pieces with the checkpoint's own regular expression,
// compiled by PCRE2 exactly as written in tokenizer.json (UTF + UCP so that \p{L}, \s and (?i)
// follow Unicode, JIT for speed). Never hand-translated: a different model's pattern must work
// unchanged.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

class RegexSplit {
 public:
  // `pattern` is a regex, or a literal string when `literal` is set. Throws Error naming the
  // pattern and PCRE2's message if it does not compile.
  RegexSplit(const std::string& pattern, bool literal);
  ~RegexSplit();
  RegexSplit(const RegexSplit&) = delete;
  RegexSplit& operator=(const RegexSplit&) = delete;

  // "Isolated" behaviour: every match and every stretch between matches becomes its own piece,
  // in order, so the pieces concatenate back to `text`. `text` must be valid UTF-8. Appends to
  // `out`; thread-safe (match state lives on the calling thread).
  void split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace pypto
