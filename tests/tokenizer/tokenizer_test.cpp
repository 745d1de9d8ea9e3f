// Unit tests of the tokenizer's parts and its error handling. Ids are checked against the npm
// oracle in parity_test.cpp; here: UTF-8 rules from the Unicode standard, load-time rejection of
// components we do not implement, both merge spellings, thread safety, and the API's edges.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/corpus.h"
#include "tokenizer/test_data.h"
#include "tokenizer/utf8.h"

namespace pypto::test {
namespace {

using nlohmann::json;

// Unicode 15, section 3.9, Table 3-8: U+FFFD for each maximal subpart of an ill-formed sequence.
TEST(Utf8, LossyFollowsUnicodeMaximalSubparts) {
  std::string out;
  utf8::append_lossy(out, "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64");
  EXPECT_EQ(out, "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd");
  out.clear();
  utf8::append_lossy(out, "\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41");  // overlongs: one U+FFFD per byte
  EXPECT_EQ(out, "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\x41");
  out.clear();
  utf8::append_lossy(out, "\xED\xA0\x80\xF4\x90\x80\x80");  // surrogate, above U+10FFFF
  EXPECT_EQ(out, "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD");
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(utf8::incomplete_tail(""), 0u);
  EXPECT_EQ(utf8::incomplete_tail("abc"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE4\xB8"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("a\xE4"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("\xF0\x9F\x98\x80"), 0u);  // complete emoji
  EXPECT_EQ(utf8::incomplete_tail("\xE4\xB8\xE4"), 1u);      // broken char, then a new start
  EXPECT_EQ(utf8::incomplete_tail("\xE0\x80"), 0u);          // can never become valid
  EXPECT_EQ(utf8::incomplete_tail("\x80\x80"), 0u);
}

TEST(ByteLevel, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string token = byte_level::bytes_to_token(all);
  EXPECT_EQ(byte_level::token_to_bytes(token), all);
  EXPECT_EQ(byte_level::bytes_to_token(" \n"), "\u0120\u010A");  // "Ġ" and "Ċ"
  EXPECT_FALSE(byte_level::token_to_bytes("\u4E00").has_value());
}

TEST(Tokenizer, Qwen3Basics) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 151669);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{9707, 1879}));  // ids from the npm oracle
  EXPECT_EQ(tok->eos_token_id(), 151645);
  EXPECT_EQ(tok->pad_token_id(), 151643);
  EXPECT_FALSE(tok->bos_token().has_value());
  ASSERT_TRUE(tok->chat_template().has_value());
  EXPECT_NE(tok->chat_template()->find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok->id_to_token(151667), "<think>");
  EXPECT_TRUE(tok->is_special(151645));
  EXPECT_FALSE(tok->is_special(151667));  // <think> is added but not special
  EXPECT_FALSE(tok->is_special(9707));
  EXPECT_EQ(tok->token_to_id("\u0120world"), 1879);
  EXPECT_EQ(tok->id_to_token(1879), "\u0120world");
  const std::vector<int32_t> chat{151644, 872, 198, 6023, 151645};
  EXPECT_EQ(tok->decode(chat), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok->decode(chat, true), "user\nhi");
  EXPECT_EQ(tok->decode({}), "");
  EXPECT_EQ(tok->encode(""), std::vector<int32_t>{});
}

TEST(Tokenizer, InvalidUtf8IsAnErrorNamingTheOffset) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  try {
    tok->encode("ok \xC3\x28 then");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offset 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0xC3"), std::string::npos) << e.what();
  }
}

TEST(Tokenizer, OutOfRangeIdIsAnErrorNamingIdAndVocabSize) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  for (int32_t bad : {151669, 151935, -1, 1 << 30}) {
    const std::vector<int32_t> ids{9707, bad};
    try {
      tok->decode(ids);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("151669"), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(tok->id_to_token(200000), Error);
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  std::vector<std::string> corpus = tokenizer_corpus();
  corpus.resize(600);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& s : corpus) expected.push_back(tok->encode(s));
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        for (size_t i = t; i < corpus.size() + t; ++i) {
          const size_t k = (i * 7 + t) % corpus.size();
          bad[t] += tok->encode(corpus[k]) != expected[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// The short-word scan and the long-word heap must merge identically.
TEST(BpeModel, SmallAndLargeMergeLoopsAgree) {
  std::ifstream f(qwen3_tokenizer_dir() + "/tokenizer.json");
  ASSERT_TRUE(f) << "run scripts/setup.sh";
  const json j = json::parse(f);
  const BpeModel model(j.at("model"));
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  size_t checked = 0;
  for (const std::string& text : tokenizer_corpus()) {
    for (size_t start = 0; start + 1 < text.size() && start < 2000; start += 37) {
      const std::string word = text.substr(start, 1 + start % 47);
      std::vector<int32_t> a, b;
      for (unsigned char c : word) {
        const std::string tokname = byte_level::bytes_to_token(std::string(1, static_cast<char>(c)));
        a.push_back(*model.token_to_id(tokname));
      }
      b = a;
      model.merge_small(a);
      model.merge_large(b);
      ASSERT_EQ(a, b) << json(word).dump();
      ++checked;
    }
  }
  EXPECT_GT(checked, 5000u);
}

// A small byte-level tokenizer.json to exercise loading rules.
json tiny_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::bytes_to_token(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["abc"] = 257;
  vocab["\u0120ab"] = 258;
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 300}, {"content", "<eos>"}, {"special", true}, {"normalized", false}},
                                    {{"id", 301}, {"content", "<R>"}, {"special", false}, {"normalized", false}, {"rstrip", true}},
                                    {{"id", 302}, {"content", "<L>"}, {"special", false}, {"normalized", false}, {"lstrip", true}},
                                    {{"id", 303}, {"content", "W"}, {"special", false}, {"normalized", false}, {"single_word", true}}})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", " ?\\p{L}+|\\s+|."}}}, {"behavior", "Isolated"}, {"invert", false}},
                                       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({json::array({"a", "b"}), json::array({"ab", "c"}), json::array({"\u0120", "ab"})})}}}};
}

std::string load_error(const json& j) {
  try {
    Tokenizer::from_json_text(j.dump());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerLoad, BothMergeSpellingsGiveTheSameIds) {
  json pairs = tiny_tokenizer();
  json strings = pairs;
  strings["model"]["merges"] = json::array({"a b", "ab c", "\u0120 ab"});
  auto a = Tokenizer::from_json_text(pairs.dump());
  auto b = Tokenizer::from_json_text(strings.dump());
  for (const char* text : {"abc ab abcab", "cab  ab", "xyz"}) EXPECT_EQ(a->encode(text), b->encode(text)) << text;
  EXPECT_EQ(a->encode("abc ab"), (std::vector<int32_t>{257, 258}));
}

TEST(TokenizerLoad, AddedTokenFlags) {
  auto t = Tokenizer::from_json_text(tiny_tokenizer().dump());
  const int32_t sp = ' ';
  EXPECT_EQ(t->encode("ab<eos>ab"), (std::vector<int32_t>{256, 300, 256}));
  EXPECT_EQ(t->encode("ab <R>  ab"), (std::vector<int32_t>{256, sp, 301, 256}));  // rstrip eats the right spaces
  EXPECT_EQ(t->encode("ab  <L> ab"), (std::vector<int32_t>{256, 302, 258}));     // lstrip eats the left spaces
  EXPECT_EQ(t->encode("a W b"), (std::vector<int32_t>{'a', sp, 303, sp, 'b'}));   // a word on its own
  EXPECT_EQ(t->encode("aWb"), (std::vector<int32_t>{'a', 'W', 'b'}));             // inside a word: not the token
  EXPECT_EQ(t->decode(std::vector<int32_t>{256, 300, 256}, true), "abab");
}

TEST(TokenizerLoad, UnimplementedComponentsAreNamed) {
  struct Case {
    const char* pointer;
    json value;
    const char* must_mention;
  };
  const std::vector<Case> cases = {
      {"/normalizer", {{"type", "NFKC"}}, "NFKC"},
      {"/pre_tokenizer", {{"type", "Metaspace"}}, "Metaspace"},
      {"/decoder", {{"type", "WordPiece"}}, "WordPiece"},
      {"/post_processor", {{"type", "TemplateProcessing"}}, "TemplateProcessing"},
      {"/model/type", "Unigram", "Unigram"},
      {"/model/byte_fallback", true, "byte_fallback"},
      {"/pre_tokenizer/pretokenizers/0/behavior", "MergedWithPrevious", "MergedWithPrevious"},
      {"/pre_tokenizer/pretokenizers/0/pattern/Regex", "(unclosed", "(unclosed"},
      {"/model/merges/0", json::array({"a", "zz"}), "merge #0"},
      {"/truncation", {{"max_length", 8}}, "truncation"},
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer();
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string err = load_error(j);
    EXPECT_NE(err.find(c.must_mention), std::string::npos) << c.pointer << " -> \"" << err << "\"";
  }
  EXPECT_NE(load_error(json::parse("[1, 2]")).find("tokenizer.json"), std::string::npos);
  EXPECT_THROW(Tokenizer::from_json_text("{not json"), Error);
  EXPECT_THROW(Tokenizer::load("/nonexistent/dir"), Error);
}

}  // namespace
}  // namespace pypto::test
