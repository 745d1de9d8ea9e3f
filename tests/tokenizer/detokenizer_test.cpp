// Streaming: for random id sequences the deltas of IncrementalDetokenizer concatenate to
// Tokenizer::decode of the same ids, and no delta ends inside (or holds a piece of) a UTF-8
// character. Ids are drawn so that multi-byte characters are split across tokens often.
#include <gtest/gtest.h>

#include "tokenizer/corpus.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/test_data.h"
#include "tokenizer/utf8.h"

namespace pypto::test {
namespace {

struct Lcg {
  uint64_t s;
  uint64_t below(uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  }
};

// Streams `ids` and checks every delta and the total against decode().
void check_stream(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string delta = detok.push(ids[i]);
    ASSERT_FALSE(utf8::find_invalid(delta).has_value()) << "delta after id #" << i << " (" << ids[i] << ") is not whole UTF-8";
    ASSERT_LE(detok.pending_bytes(), 3u) << "holds back more than an unfinished character";
    streamed += delta;
  }
  const std::string rest = detok.flush();
  ASSERT_FALSE(utf8::find_invalid(rest).has_value());
  streamed += rest;
  EXPECT_EQ(streamed, tok->decode(ids, skip_special));
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

// Ids of tokens that are single bytes 0x80..0xFF: pieces of multi-byte characters.
std::vector<int32_t> byte_token_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_added(id)) continue;
    const std::string& b = tok.token_bytes(id);
    if (!b.empty() && static_cast<unsigned char>(b[0]) >= 0x80 && b.size() <= 2) ids.push_back(id);
  }
  return ids;
}

TEST(IncrementalDetokenizer, RandomIdSequences) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  const std::vector<int32_t> pieces = byte_token_ids(*tok);
  ASSERT_GT(pieces.size(), 128u);
  Lcg rng{42};
  for (int c = 0; c < 3000; ++c) {
    std::vector<int32_t> ids;
    for (size_t n = rng.below(40) + 1; n > 0; --n) {
      switch (rng.below(5)) {
        case 0: ids.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(tok->vocab_size())))); break;
        case 1: ids.push_back(static_cast<int32_t>(151643 + rng.below(26))); break;
        default: ids.push_back(pieces[rng.below(pieces.size())]); break;
      }
    }
    check_stream(tok, ids, rng.below(2) == 1);
    if (HasFatalFailure()) return;
  }
}

// Real text: emoji, CJK and other multi-byte characters whose bytes BPE spreads over tokens.
TEST(IncrementalDetokenizer, CorpusTextStreamsBack) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  size_t split_chars = 0;  // how many times a character really was held back
  for (const std::string& text : tokenizer_corpus()) {
    if (text.size() > 4000) continue;
    const auto ids = tok->encode(text);
    IncrementalDetokenizer probe(tok);
    for (int32_t id : ids) {
      probe.push(id);
      split_chars += probe.pending_bytes() > 0;
    }
    check_stream(tok, ids, false);
    check_stream(tok, ids, true);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(split_chars, 100u) << "the corpus should split characters across tokens";
}

TEST(IncrementalDetokenizer, HoldsBackAnUnfinishedCharacter) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  // "€" is E2 82 AC; feed its bytes as three single-byte tokens.
  std::vector<int32_t> ids;
  // Find the single-byte tokens by their bytes.
  for (unsigned char want : std::string("\xE2\x82\xAC")) {
    for (int32_t id = 0; id < 151643; ++id) {
      const std::string& b = tok->token_bytes(id);
      if (b.size() == 1 && static_cast<unsigned char>(b[0]) == want) {
        ids.push_back(id);
        break;
      }
    }
  }
  ASSERT_EQ(ids.size(), 3u);
  IncrementalDetokenizer d(tok);
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.push(ids[1]), "");
  EXPECT_EQ(d.push(ids[2]), "\xE2\x82\xAC");
  // A broken character is replaced once it can no longer complete, or at flush().
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.push(*tok->token_to_id("a")), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, OutOfRangeIdIsAnErrorAndLeavesStateAlone) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  IncrementalDetokenizer d(tok);
  EXPECT_THROW(d.push(tok->vocab_size()), Error);
  EXPECT_THROW(d.push(-1), Error);
  EXPECT_EQ(d.push(*tok->token_to_id("a")), "a");
}

}  // namespace
}  // namespace pypto::test
