#include "tokenizer/detokenizer.h"

#include "tokenizer/utf8.h"

namespace pypto {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  tokenizer_->check_id(id);
  std::string delta;
  if (tokenizer_->is_added(id)) {
    if (skip_special_tokens_ && tokenizer_->is_special(id)) return delta;
    // Same rule as decode(): bytes before an added token are finished, broken or not.
    delta = flush();
    delta += tokenizer_->id_to_token(id);
    return delta;
  }
  pending_ += tokenizer_->token_bytes(id);
  // Everything up to an unfinished final character decodes the same whatever comes next, so it
  // can go out now; ill-formed bytes become U+FFFD as soon as they are known to be ill-formed.
  const size_t keep = utf8::incomplete_tail(pending_);
  utf8::append_lossy(delta, std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return delta;
}

std::string IncrementalDetokenizer::flush() {
  std::string delta;
  utf8::append_lossy(delta, pending_);
  pending_.clear();
  return delta;
}

}  // namespace pypto
