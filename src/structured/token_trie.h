#pragma once
// The model's vocabulary as a byte trie, for computing token masks: a token is allowed in a
// grammar state when walking its bytes from that state never leaves the language, so one walk
// of the trie decides every token, and a prefix that is rejected prunes all tokens under it.
//
// Nodes are stored in preorder: node i's subtree is [i, nodes[i].next), its parent's depth is
// depth - 1, so the walk needs no pointers, only a stack of automaton states indexed by depth.
// Node 0 is the root (empty prefix). Qwen3: 151,669 tokens, ~0.6 M nodes.
//
// Special tokens (<|im_start|>, <|im_end|>, ...) are not in the trie: they are never text of the
// constrained output; EOS ids are allowed separately, only where the output is complete.
// Non-special added tokens (<tool_call>, <think>, ...) are in it with their text as bytes.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pypto {
class Tokenizer;
}

namespace pypto::structured {

class TokenVocab {
 public:
  struct Node {
    uint32_t next = 0;       // one past the last node of this node's subtree
    uint32_t tok_begin = 0;  // tokens spelled exactly by this node's prefix: ids[tok_begin, tok_end)
    uint32_t tok_end = 0;
    uint16_t depth = 0;      // prefix length in bytes
    uint8_t byte = 0;        // the last byte of the prefix (unused for the root)
  };

  // model_vocab: the logits' width (151,936 for Qwen3); ids past the tokenizer are never
  // allowed, and tokenizer ids past the logits are not in the vocabulary. eos_ids: allowed where the output is complete.
  static std::shared_ptr<const TokenVocab> build(const Tokenizer& tokenizer, int64_t model_vocab,
                                                 std::vector<int32_t> eos_ids);
  // For tests and benchmarks without a tokenizer: token i is spelled by tokens[i].
  static std::shared_ptr<const TokenVocab> from_strings(const std::vector<std::string>& tokens,
                                                        int64_t model_vocab, std::vector<int32_t> eos_ids);

  int64_t size() const { return size_; }
  int64_t mask_words() const { return (size_ + 31) / 32; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::span<const int32_t> ids() const { return ids_; }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  // The bytes of token `id` ("" for special tokens and ids past the tokenizer).
  const std::string& token_text(int32_t id) const { return text_[size_t(id)]; }
  int max_depth() const { return max_depth_; }

 private:
  void build_trie();

  int64_t size_ = 0;
  std::vector<std::string> text_;  // per id
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;       // token ids grouped by node
  std::vector<int32_t> eos_ids_;
  int max_depth_ = 0;
};

}  // namespace pypto::structured
