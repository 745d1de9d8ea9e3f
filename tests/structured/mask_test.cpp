// Token masks over the real Qwen3 vocabulary (151,936 logits). A mask bit must say exactly
// whether the token's bytes keep the output a valid prefix (checked token by token, outside the
// trie walk), EOS must appear only where the output is complete, and sampling random allowed
// tokens until EOS must give text that ajv accepts once decoded by the tokenizer.
#include <gtest/gtest.h>

#include <random>

#include "schemas.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

using nlohmann::json;

bool bit(const TokenMask& m, int32_t id) { return (m[size_t(id) >> 5] >> (id & 31)) & 1; }

TEST(TokenMask, EveryBitAgreesWithStepping) {
  auto vocab = qwen3_vocab();
  ASSERT_NE(vocab, nullptr);
  auto g = compile(json_schema_grammar(json::parse(test_schemas()[0]), "s"), vocab);
  // States along one valid output, including inside a string and after a partial UTF-8 char.
  for (const std::string prefix : {"", "{", "{\"age\": 1", "{\"age\": 12, \"name\": \"J\xC3", "{\"age\": 12, \"name\": \"Jo\"}"}) {
    const int32_t s = g->step_text(g->start_state(), prefix);
    ASSERT_GE(s, 0) << prefix;
    const TokenMask& m = *g->mask(s);
    int64_t allowed = 0;
    for (int32_t id = 0; id < int32_t(kQwen3Logits); ++id) {
      const std::string& text = vocab->token_text(id);
      const bool is_eos = id == 151645 || id == 151643;
      const bool expect = is_eos ? g->is_accepting(s) : !text.empty() && g->step_text(s, text) >= 0;
      ASSERT_EQ(bit(m, id), expect) << "token " << id << " '" << text << "' after '" << prefix << "'";
      allowed += expect;
    }
    EXPECT_GT(allowed, 0) << prefix;
  }
  // Inside a string most of the vocabulary is allowed, and continuation bytes are too.
  const int32_t in_string = g->step_text(g->start_state(), "{\"age\": 1, \"name\": \"");
  const int32_t mid_char = g->step_text(in_string, "\xE4");
  ASSERT_GE(mid_char, 0);
  EXPECT_FALSE(g->is_accepting(mid_char));
  EXPECT_FALSE(bit(*g->mask(g->start_state()), 151645));
  EXPECT_TRUE(bit(*g->mask(g->step_text(g->start_state(), "{\"age\": 1, \"name\": \"x\"}")), 151645));
}

TEST(TokenMask, SpecialTokensAndPaddingRowsAreNeverAllowed) {
  auto vocab = qwen3_vocab();
  ASSERT_NE(vocab, nullptr);
  Grammar gr;
  gr.root = repeat(any_char(), 0, -1);  // any text
  auto g = compile(gr, vocab);
  const TokenMask& m = *g->mask(g->start_state());
  EXPECT_FALSE(bit(m, 151644));  // <|im_start|> (special)
  EXPECT_TRUE(bit(m, 151657));   // <tool_call> is text
  EXPECT_TRUE(bit(m, 151645));   // EOS: empty text is complete
  for (int32_t id = 151669; id < int32_t(kQwen3Logits); ++id) ASSERT_FALSE(bit(m, id)) << id;
}

TEST(TokenMask, RandomTokenWalksDecodeToValidJson) {
  auto vocab = qwen3_vocab();
  auto tok = qwen3_tokenizer();
  ASSERT_NE(vocab, nullptr);
  std::mt19937_64 rng(11);
  std::vector<std::pair<json, std::string>> cases;
  for (const std::string& text : test_schemas()) {
    auto g = compile(json_schema_grammar(json::parse(text), "s"), vocab);
    for (int rep = 0; rep < 4; ++rep) {
      GrammarMatcher m(g, {});
      std::vector<int32_t> ids;
      for (int step = 0; step < 4000; ++step) {
        const TokenMask* mask = m.next_mask();
        ASSERT_NE(mask, nullptr);
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < int32_t(kQwen3Logits); ++id)
          if (bit(*mask, id)) allowed.push_back(id);
        ASSERT_FALSE(allowed.empty());
        // Prefer EOS half the time where it is allowed, so outputs end.
        int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (bit(*mask, 151645) && rng() % 2 == 0) pick = 151645;
        ASSERT_TRUE(m.accept(pick));
        if (pick == 151645 || pick == 151643) break;
        ids.push_back(pick);
      }
      ASSERT_TRUE(m.is_complete()) << "schema " << text;
      cases.push_back({json::parse(text), tok->decode(ids)});
    }
  }
  const std::vector<json> verdicts = ajv_validate(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verdicts[i]["valid"].get<bool>())
        << "schema " << cases[i].first.dump() << "\noutput " << cases[i].second << "\najv: " << verdicts[i]["error"];
}

TEST(Matcher, ConstraintStartsAfterThinkEnd) {
  Grammar gr;
  gr.root = literal("ok");
  auto g = compile(gr);  // byte vocabulary: token b is byte b
  GrammarMatcher m(g, {.start_after = 'T'});
  EXPECT_EQ(m.next_mask(), nullptr);
  EXPECT_TRUE(m.accept('z'));
  EXPECT_TRUE(m.accept('T'));
  const TokenMask* mask = m.next_mask();
  ASSERT_NE(mask, nullptr);
  EXPECT_TRUE(bit(*mask, 'o'));
  EXPECT_FALSE(bit(*mask, 'z'));
  EXPECT_FALSE(bit(*mask, kByteEos));
  EXPECT_TRUE(m.accept('o'));
  EXPECT_FALSE(m.next_mask_is_cached());  // "o" reached for the first time: its mask needs a walk
  m.next_mask();
  EXPECT_TRUE(m.next_mask_is_cached());
  EXPECT_TRUE(m.accept('k'));
  EXPECT_TRUE(bit(*m.next_mask(), kByteEos));
  EXPECT_TRUE(m.is_complete());
}

TEST(Matcher, OptionalThinkBlockBeforeTheConstraint) {
  Grammar gr;
  gr.root = literal("ok");
  auto g = compile(gr);
  for (bool thinks : {true, false}) {
    GrammarMatcher m(g, {.start_after = 'T', .think_open = 't'});
    const TokenMask* first = m.next_mask();
    ASSERT_NE(first, nullptr);
    EXPECT_TRUE(bit(*first, 't'));
    EXPECT_TRUE(bit(*first, 'o'));
    EXPECT_FALSE(bit(*first, 'k'));
    if (thinks) {
      EXPECT_TRUE(m.accept('t'));
      EXPECT_EQ(m.next_mask(), nullptr);  // reasoning is free
      EXPECT_TRUE(m.accept('k'));
      EXPECT_TRUE(m.accept('T'));
    }
    EXPECT_TRUE(m.accept('o'));
    EXPECT_FALSE(bit(*m.next_mask(), 'o'));
    EXPECT_TRUE(m.accept('k'));
    EXPECT_TRUE(m.is_complete());
  }
}

TEST(Matcher, LazyGrammarArmsOnTriggerAndLimitsRounds) {
  Grammar gr;
  gr.root = literal("ab");  // what must follow the trigger
  auto g = compile(gr);
  GrammarMatcher m(g, {.trigger = '<', .max_triggers = 1});
  EXPECT_EQ(m.next_mask(), nullptr);
  EXPECT_TRUE(m.accept('x'));
  EXPECT_TRUE(m.accept('<'));
  const TokenMask* mask = m.next_mask();
  ASSERT_NE(mask, nullptr);
  EXPECT_TRUE(bit(*mask, 'a'));
  EXPECT_FALSE(bit(*mask, 'x'));
  EXPECT_TRUE(m.accept('a'));
  EXPECT_TRUE(m.accept('b'));
  // Round used up: free text again, but the trigger is masked.
  mask = m.next_mask();
  ASSERT_NE(mask, nullptr);
  EXPECT_FALSE(bit(*mask, '<'));
  EXPECT_TRUE(bit(*mask, 'x'));
  EXPECT_TRUE(bit(*mask, kByteEos));
  EXPECT_FALSE(m.accept('b' + 100) && false);
}

TEST(Matcher, RejectedTokenBreaksTheMatcher) {
  Grammar gr;
  gr.root = literal("ab");
  GrammarMatcher m(compile(gr), {});
  EXPECT_FALSE(m.accept('x'));
  EXPECT_TRUE(m.is_broken());
  EXPECT_TRUE(bit(*m.next_mask(), kByteEos));
}

}  // namespace
}  // namespace pypto::structured::test
