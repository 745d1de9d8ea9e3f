#include "tokenizer/tokenizer.h"

#include <cstdio>

#include "core/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace pypto {

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (auto bad = utf8::find_invalid(text)) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", static_cast<unsigned char>(text[*bad]));
    fail("text is not valid UTF-8: byte ", hex, " at offset ", *bad, " of ", text.size());
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids = post_.prefix;
  std::vector<TextPiece> pieces;
  raw_matcher_.split(text, pieces);
  for (const TextPiece& p : pieces) {
    if (p.token >= 0) {
      ids.push_back(p.token);
    } else {
      encode_plain(p.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), post_.suffix.begin(), post_.suffix.end());
  return ids;
}

// Text between raw added tokens: normalise, then look for normalised added tokens.
void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  std::string normalized_storage;
  std::string_view normalized = text;
  if (nfc_) {
    normalized_storage = nfc(text);
    normalized = normalized_storage;
  }
  if (normalized_matcher_.empty()) {
    encode_normalized(normalized, out);
    return;
  }
  std::vector<TextPiece> pieces;
  normalized_matcher_.split(normalized, pieces);
  for (const TextPiece& p : pieces) {
    if (p.token >= 0) {
      out.push_back(p.token);
    } else {
      encode_normalized(p.text, out);
    }
  }
}

// Normalised text: pre-tokenize into words, BPE each word.
void Tokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<std::string_view> words{text};
  std::vector<std::string_view> next;
  for (const auto& split : splits_) {
    next.clear();
    for (std::string_view w : words) split->split(w, next);
    words.swap(next);
  }
  for (std::string_view w : words) {
    if (!w.empty()) model_->encode_word(w, out);
  }
}

void Tokenizer::check_id(int32_t id) const {
  const bool known = id >= 0 && id < vocab_size_ && (added_index(id) >= 0 || model_->has_id(id));
  if (!known) {
    fail("token id ", id, " is out of range: the vocabulary has ", vocab_size_, " tokens (ids 0..", vocab_size_ - 1,
         id >= 0 && id < vocab_size_ ? "; this id is unassigned" : "", ")");
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text;
  std::string bytes;  // byte-level tokens since the last added token
  for (int32_t id : ids) {
    check_id(id);
    const int a = added_index(id);
    if (a < 0) {
      bytes += model_->bytes(id);
      continue;
    }
    const AddedToken& tok = added_[a];
    if (skip_special_tokens && tok.special) continue;
    // Added tokens are text, not bytes: the bytes before one are decoded on their own, as
    // Hugging Face does, so a broken character never merges with the token's text.
    utf8::append_lossy(text, bytes);
    bytes.clear();
    text += tok.content;
  }
  utf8::append_lossy(text, bytes);
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& a : added_) {
    if (a.content == token) return a.id;
  }
  return model_->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  check_id(id);
  const int a = added_index(id);
  return a >= 0 ? added_[a].content : model_->token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  const int a = added_index(id);
  return a >= 0 && added_[a].special;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return model_->bytes(id);
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
  return eos_token_ ? token_to_id(*eos_token_) : std::nullopt;
}

std::optional<int32_t> Tokenizer::pad_token_id() const {
  return pad_token_ ? token_to_id(*pad_token_) : std::nullopt;
}

}  // namespace pypto
