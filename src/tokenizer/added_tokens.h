#pragma once
// Added tokens (tokenizer.json "added_tokens"): strings such as <|im_start|> that are cut out of
// the text before normalisation and BPE and map straight to their id, with Hugging Face's
// matching rules: leftmost match first, the longest token at that position, and the lstrip,
// rstrip and single_word flags.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace pypto {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // also swallow whitespace on the left
  bool rstrip = false;       // also swallow whitespace on the right
  bool single_word = false;  // only match when not inside a word
  bool normalized = false;   // matched against the normalised text instead of the raw text

  static AddedToken from_json(const nlohmann::json& j);
};

// One piece of text after splitting out added tokens: either plain text or a token id.
struct TextPiece {
  std::string_view text;  // the plain text (empty for a token)
  int32_t token = -1;     // id of the added token, or -1 for plain text
};

// Finds one set of added tokens in text (those with normalized=false, or those with
// normalized=true after their content has been normalised).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // Looks for `pattern` (the token content, normalised if the token is) and yields `token`.
  void add(std::string pattern, const AddedToken& token);
  bool empty() const { return entries_.empty(); }

  // Splits `text` into plain pieces and token pieces, in order. Appends to `out`.
  void split(std::string_view text, std::vector<TextPiece>& out) const;

 private:
  struct Entry {
    std::string pattern;
    AddedToken token;
  };
  // Entries sorted by first byte then by decreasing length, so the first full match at a
  // position is the longest one.
  std::vector<Entry> entries_;
  bool first_byte_[256] = {};
};

}  // namespace pypto
