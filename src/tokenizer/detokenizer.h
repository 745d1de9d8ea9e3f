#pragma once
// Streaming detokenization: one per request. Each push() returns only text that can no longer
// change, so a character whose bytes are spread over several tokens is held back until it is
// complete. The deltas are always whole UTF-8 characters and, after flush(), concatenate to
// exactly Tokenizer::decode of all pushed ids.
#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pypto {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens = false);

  // Adds one id (Error if out of range, and the state is unchanged) and returns the new text.
  std::string push(int32_t id);
  // Returns whatever is still held back (a broken character becomes U+FFFD) and resets.
  std::string flush();

  // Bytes held back because they may be the start of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

}  // namespace pypto
