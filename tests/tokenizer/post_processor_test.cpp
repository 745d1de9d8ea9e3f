// tokenizer.json post-processors (tokenizer/post_processor.h): ByteLevel adds nothing;
// Qwen3-Embedding's TemplateProcessing appends <|endoftext|> to a single sequence when
// add_special_tokens is set, once, and only then.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/post_processor.h"

namespace pypto {
namespace {

using nlohmann::json;

json eos_template() {
  return json::parse(R"({"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643], "tokens": ["<|endoftext|>"]}}})");
}

TEST(PostProcessor, ByteLevelAndNullAddNothing) {
  for (const json& j : {json(), json::parse(R"({"type": "ByteLevel", "add_prefix_space": false})")}) {
    const PostProcessor p = read_post_processor(j);
    EXPECT_TRUE(p.prefix.empty());
    EXPECT_TRUE(p.suffix.empty());
  }
}

TEST(PostProcessor, TemplateProcessingAppendsTheSpecialToken) {
  PostProcessor p = read_post_processor(eos_template());
  EXPECT_TRUE(p.prefix.empty());
  EXPECT_EQ(p.suffix, std::vector<int32_t>{151643});
  // Inside a Sequence next to ByteLevel, and with a token before the sequence too.
  json seq = {{"type", "Sequence"}, {"processors", {{{"type", "ByteLevel"}}, eos_template()}}};
  const json bos = json::parse(R"({"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}})");
  seq["processors"][1]["single"].insert(seq["processors"][1]["single"].begin(), bos);
  p = read_post_processor(seq);
  EXPECT_EQ(p.prefix, std::vector<int32_t>{151643});
  EXPECT_EQ(p.suffix, std::vector<int32_t>{151643});
}

TEST(PostProcessor, WhatIsNotImplementedIsNamed) {
  auto error = [](const json& j) {
    try {
      read_post_processor(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json unknown_token = eos_template();
  unknown_token["special_tokens"] = json::object();
  EXPECT_NE(error(unknown_token).find("<|endoftext|>"), std::string::npos);
  json no_seq = eos_template();
  no_seq["single"].erase(0);
  EXPECT_NE(error(no_seq).find("no sequence A"), std::string::npos);
  EXPECT_NE(error(json{{"type", "RobertaProcessing"}}).find("RobertaProcessing"), std::string::npos);
}

}  // namespace
}  // namespace pypto
