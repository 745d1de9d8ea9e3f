// The Qwen3 reasoning split, whole and streamed (tags split across deltas at every offset).
#include <gtest/gtest.h>

#include <chrono>

#include "serve/reasoning_parser.h"

namespace pypto {
namespace {

struct Split {
  std::string reasoning, content;
};

Split run(ReasoningStart start, const std::vector<std::string>& pieces) {
  ReasoningParser p(start);
  Split s;
  for (const std::string& piece : pieces) {
    auto d = p.append(piece);
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  auto d = p.flush();
  s.reasoning += d.reasoning;
  s.content += d.content;
  return s;
}

TEST(ReasoningParser, PromptTailDecidesTheStart) {
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
            ReasoningStart::Detect);
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n<think>\n\n</think>\n\n"), ReasoningStart::ContentOnly);
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n<think>\n"), ReasoningStart::InReasoning);
  // A closed block in an earlier turn does not count.
  EXPECT_EQ(reasoning_start_from_prompt("<|im_start|>assistant\n<think>x</think>y<|im_end|>\n<|im_start|>assistant\n"),
            ReasoningStart::Detect);
}

TEST(ReasoningParser, WholeOutput) {
  Split s = run(ReasoningStart::Detect, {"<think>\nplan\n</think>\n\nanswer"});
  EXPECT_EQ(s.reasoning, "plan\n");
  EXPECT_EQ(s.content, "answer");
  s = run(ReasoningStart::Detect, {"plain answer with <think> later"});
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "plain answer with <think> later");
  s = run(ReasoningStart::InReasoning, {"still thinking when cut"});
  EXPECT_EQ(s.reasoning, "still thinking when cut");
  EXPECT_EQ(s.content, "");
  s = run(ReasoningStart::ContentOnly, {"<think>x</think>y"});
  EXPECT_EQ(s.content, "<think>x</think>y");
  s = run(ReasoningStart::InReasoning, {"r</think>c"});
  EXPECT_EQ(s.reasoning, "r");
  EXPECT_EQ(s.content, "c");
  s = run(ReasoningStart::Detect, {"<thi"});  // a partial tag at the end is text
  EXPECT_EQ(s.content, "<thi");
}

TEST(ReasoningParser, TagsSplitAtEveryOffset) {
  const std::string text = "<think>\nab</think>\n\ncd";
  for (size_t i = 0; i <= text.size(); ++i)
    for (size_t j = i; j <= text.size(); ++j) {
      Split s = run(ReasoningStart::Detect, {text.substr(0, i), text.substr(i, j - i), text.substr(j)});
      EXPECT_EQ(s.reasoning, "ab") << i << "," << j;
      EXPECT_EQ(s.content, "cd") << i << "," << j;
    }
}

TEST(ReasoningParser, NoTagTextLeaksWhileStreaming) {
  ReasoningParser p(ReasoningStart::InReasoning);
  auto d = p.append("abc</th");
  EXPECT_EQ(d.reasoning, "abc");
  EXPECT_EQ(d.content, "");
  d = p.append("ink>xyz");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "xyz");
}

TEST(ReasoningParser, LeadingWhitespaceIsScannedOnce) {
  // 300,000 bytes of whitespace one delta at a time while the parser still decides whether a
  // <think> follows: each delta costs its own length (the whole prefix was rescanned on every
  // delta before: ~4.5e10 byte reads, minutes).
  ReasoningParser p(ReasoningStart::Detect);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 300000; ++i) EXPECT_TRUE(p.append(i % 2 ? " " : "\n").content.empty());
  auto d = p.append("<think>r</think>c");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "c");
}

}  // namespace
}  // namespace pypto
