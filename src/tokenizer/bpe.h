#pragma once
// The byte-level BPE model of tokenizer.json ("model": {"type": "BPE", ...}). Tokens are held as
// raw bytes; a word (one pre-tokenized piece, as bytes) starts as one symbol per byte and the
// adjacent pair with the lowest merge rank is merged until no listed pair remains, leftmost
// first among equal ranks, as Hugging Face tokenizers does.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/merge_table.h"
#include "tokenizer/word_cache.h"

namespace pypto {

// The big parts of the "model" object, read without building a JSON tree for them (see
// tokenizer_load.cpp): 150k vocabulary entries and 150k merges dominate load time otherwise.
struct BpeTables {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // both spellings, split into parts
};

class BpeModel {
 public:
  // `options` is the "model" object (its vocab and merges, if present, are ignored in favour of
  // `tables`). Options we do not implement (dropout, byte_fallback, subword prefixes/suffixes)
  // are errors that name them; so are merges naming unknown tokens.
  BpeModel(const nlohmann::json& options, BpeTables tables);
  // From a complete "model" object.
  explicit BpeModel(const nlohmann::json& model);
  // Splits a merge written "a b" or ["a", "b"]; Error naming `index` otherwise.
  static std::pair<std::string, std::string> merge_parts(const nlohmann::json& merge, size_t index);

  // Appends the ids of one word (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // One past the highest id in the vocabulary.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  bool has_id(int32_t id) const { return id >= 0 && id < size() && present_[id]; }
  // The token as written in tokenizer.json (byte-level alphabet) and as raw bytes.
  const std::string& token(int32_t id) const { return tokens_[id]; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  std::optional<int32_t> token_to_id(std::string_view token) const;

  // The two merge loops, public so tests can check they agree on long and short words.
  // merge_small takes at most kSmallWord symbols.
  static constexpr size_t kSmallWord = 64;
  void merge_small(std::vector<int32_t>& symbols) const;
  void merge_large(std::vector<int32_t>& symbols) const;

 private:
  // Merges symbols[0..n) in place and returns the new count (n <= kSmallWord).
  size_t merge_small(int32_t* symbols, size_t n) const;

  std::vector<std::string> tokens_;
  std::vector<std::string> bytes_;
  std::vector<bool> present_;
  // Keys view the strings in tokens_ / bytes_, which are sized once and never move.
  std::unordered_map<std::string_view, int32_t> token_ids_;
  std::unordered_map<std::string_view, int32_t> byte_ids_;  // raw bytes -> id, only for ignore_merges
  int32_t byte_symbol_[256];                           // id of each single byte, -1 if none
  std::optional<int32_t> unk_id_;
  bool ignore_merges_ = false;
  MergeTable merges_;
  WordCache cache_;
};

}  // namespace pypto
