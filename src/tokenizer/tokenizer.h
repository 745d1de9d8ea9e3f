#pragma once
// The Qwen-family tokenizer, loaded from a Hugging Face tokenizer.json and giving the same ids
// as Hugging Face `tokenizers`: added tokens split out first, NFC, the checkpoint's Split regex,
// byte-level BPE; decoding through the ByteLevel decoder with U+FFFD for broken UTF-8.
//
// A Tokenizer is immutable once loaded and safe to share between threads; all per-call state is
// local to the call (the BPE word cache is internally locked).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"  // the Error that encode/decode/load throw
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/regex_split.h"

namespace pypto {

class Tokenizer {
 public:
  // `path` is a model directory (reads tokenizer.json and, if present, tokenizer_config.json)
  // or a tokenizer.json file (its sibling tokenizer_config.json is read if present). Any
  // component type we do not implement is an Error naming it.
  static std::shared_ptr<const Tokenizer> load(const std::string& path);
  // Builds from already-read JSON text (tokenizer_config may be empty).
  static std::shared_ptr<const Tokenizer> from_json_text(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json = {});

  // Text (valid UTF-8, else Error naming the byte offset) to ids. Added tokens written in the
  // text are always recognised, as in Hugging Face. add_special_tokens applies the
  // post-processor (for Qwen, ByteLevel, which adds nothing; Qwen3-Embedding's appends
  // <|endoftext|>: tokenizer/post_processor.h).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // Ids to text; an id outside [0, vocab_size()) is an Error naming it and the vocabulary size.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the highest id, added tokens included (151669 for Qwen3).
  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token as written in tokenizer.json (byte-level alphabet for BPE tokens).
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // Whether `id` is an added token (special or not); its text is then id_to_token(id).
  bool is_added(int32_t id) const { return added_index(id) >= 0; }
  // Raw bytes a BPE id stands for (not meaningful for added tokens). Checks the id.
  const std::string& token_bytes(int32_t id) const;
  // Throws the out-of-range Error if `id` is not a token of this vocabulary.
  void check_id(int32_t id) const;

  // From tokenizer_config.json when present.
  const std::optional<std::string>& bos_token() const { return bos_token_; }
  const std::optional<std::string>& eos_token() const { return eos_token_; }
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  // The "chat_template" source (the "default" one when the config lists several), if any.
  const std::optional<std::string>& chat_template() const { return chat_template_; }

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

 private:
  Tokenizer() = default;
  int added_index(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(added_by_id_.size()) ? added_by_id_[id] : -1;
  }
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;

  std::unique_ptr<BpeModel> model_;
  bool nfc_ = false;
  std::vector<std::unique_ptr<RegexSplit>> splits_;  // applied in order, each to every piece
  std::vector<AddedToken> added_;
  std::vector<int> added_by_id_;  // id -> index into added_, -1 for model tokens
  AddedTokenMatcher raw_matcher_;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher_;  // added tokens with normalized=true
  int32_t vocab_size_ = 0;
  PostProcessor post_;  // ids add_special_tokens puts around the text's

  std::optional<std::string> bos_token_, eos_token_, pad_token_;
  std::optional<std::string> chat_template_;
};

}  // namespace pypto
