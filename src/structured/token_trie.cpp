#include "structured/token_trie.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace pypto::structured {

std::shared_ptr<const TokenVocab> TokenVocab::build(const Tokenizer& tok, int64_t model_vocab,
                                                    std::vector<int32_t> eos_ids) {
  if (model_vocab < 1) fail("model vocabulary size ", model_vocab, " must be >= 1");
  // A model with fewer logits than the tokenizer has ids (small test models) can only write
  // the ids it has.
  std::vector<std::string> text(static_cast<size_t>(model_vocab));
  for (int32_t id = 0; id < std::min<int64_t>(tok.vocab_size(), model_vocab); ++id) {
    if (tok.is_added(id)) {
      if (!tok.is_special(id)) text[size_t(id)] = tok.id_to_token(id);
    } else {
      text[size_t(id)] = tok.token_bytes(id);
    }
  }
  return from_strings(text, model_vocab, std::move(eos_ids));
}

std::shared_ptr<const TokenVocab> TokenVocab::from_strings(const std::vector<std::string>& tokens,
                                                           int64_t model_vocab, std::vector<int32_t> eos_ids) {
  PYPTO_ASSERT(int64_t(tokens.size()) <= model_vocab);
  auto v = std::shared_ptr<TokenVocab>(new TokenVocab());
  v->size_ = model_vocab;
  v->text_ = tokens;
  v->text_.resize(size_t(model_vocab));
  for (int32_t id : eos_ids)
    if (id < 0 || id >= model_vocab) fail("eos token id ", id, " is outside the vocabulary of ", model_vocab);
  v->eos_ids_ = std::move(eos_ids);
  // An EOS token is never text of the output, even when it is a plain token.
  for (int32_t id : v->eos_ids_) v->text_[size_t(id)].clear();
  v->build_trie();
  return v;
}

void TokenVocab::build_trie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < int32_t(size_); ++id)
    if (!text_[size_t(id)].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return text_[size_t(a)] != text_[size_t(b)] ? text_[size_t(a)] < text_[size_t(b)] : a < b;
  });
  nodes_.clear();
  ids_ = order;
  nodes_.push_back(Node{});  // root
  std::vector<uint32_t> path = {0};  // node index per depth along the current prefix
  const std::string* prev = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& s = text_[size_t(order[k])];
    size_t lcp = 0;
    if (prev)
      while (lcp < s.size() && lcp < prev->size() && s[lcp] == (*prev)[lcp]) ++lcp;
    // Close the nodes below the common prefix.
    while (path.size() > lcp + 1) {
      nodes_[path.back()].next = uint32_t(nodes_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      Node n;
      n.byte = uint8_t(s[d]);
      n.depth = uint16_t(d + 1);
      n.tok_begin = n.tok_end = uint32_t(k);
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back(n);
    }
    Node& leaf = nodes_[path.back()];
    if (leaf.tok_end == leaf.tok_begin) leaf.tok_begin = uint32_t(k);
    leaf.tok_end = uint32_t(k + 1);
    max_depth_ = std::max(max_depth_, int(s.size()));
    prev = &s;
  }
  while (!path.empty()) {
    nodes_[path.back()].next = uint32_t(nodes_.size());
    path.pop_back();
  }
}

}  // namespace pypto::structured
