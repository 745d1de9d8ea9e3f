// A Qwen3.5-style tokenizer: the real one is not obtainable here, so the test builds one from
// Qwen3's files with what the fact sheet says differs (docs/status.md, issue 36 point 7):
//   - the Split pattern's letter runs take combining marks, [\p{L}\p{M}]+ where Qwen3 has \p{L}+
//     (the exact Qwen3.5 pattern is unverified; this one has that property);
//   - the added tokens sit 96,401 ids higher (<|endoftext|> 248044, <|im_start|> 248045,
//     <|im_end|> 248046, <think> 248068, </think> 248069), past a gap of unused ids, as in the
//     248,320-row vocabulary.
// Our tokenizer must read both from tokenizer.json (nothing of Qwen3's is built in) and give the
// ids the npm tokenizer gives for the same files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "test_data.h"
#include "tokenizer/tokenizer.h"

namespace pypto {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

constexpr int32_t kShift = 248044 - 151643;
const char* kQwen35StylePattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

ojson read_json(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return ojson::parse(f);
}

void write_json(const fs::path& p, const ojson& j) {
  std::ofstream f(p, std::ios::binary);
  f << j.dump();
}

// Qwen3's files, rewritten Qwen3.5-style into `dir`.
void write_qwen35_style(const fs::path& dir) {
  const fs::path src(test::qwen3_tokenizer_dir());
  ojson tok = read_json(src / "tokenizer.json");
  ojson& split = tok["pre_tokenizer"]["pretokenizers"][0];
  ASSERT_EQ(split["type"], "Split");
  split["pattern"]["Regex"] = kQwen35StylePattern;
  for (ojson& t : tok["added_tokens"]) t["id"] = t["id"].get<int32_t>() + kShift;
  ojson cfg = read_json(src / "tokenizer_config.json");
  ojson decoder = ojson::object();
  for (auto it = cfg["added_tokens_decoder"].begin(); it != cfg["added_tokens_decoder"].end(); ++it)
    decoder[std::to_string(std::stoi(it.key()) + kShift)] = it.value();
  cfg["added_tokens_decoder"] = decoder;
  fs::create_directories(dir);
  write_json(dir / "tokenizer.json", tok);
  write_json(dir / "tokenizer_config.json", cfg);
}

// Letters with combining marks that have no precomposed form (NFC keeps them apart).
const std::vector<std::string> kTexts = {
    "q\u0303uick x\u0308 and y\u0331es",       // Latin + combining tilde / diaeresis / macron below
    "नमस्ते दुनिया, हिन्दी में",                  // Devanagari: virama and vowel signs are \p{M}
    "ที่นี่ภาษาไทย",                             // Thai tone marks and vowels above
    "שָׁלוֹם עוֹלָם",                              // Hebrew points
    "<|im_start|>user\nq\u0303<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nok<|endoftext|>",
};

TEST(Qwen35StyleTokenizer, PatternAndAddedIdsFromTokenizerJsonMatchTheOracle) {
  const fs::path dir = fs::temp_directory_path() / ("pypto-qwen35-tok-" + std::to_string(::getpid()));
  ASSERT_NO_FATAL_FAILURE(write_qwen35_style(dir));
  const auto tok = Tokenizer::load(dir.string());
  const auto qwen3 = test::qwen3_tokenizer();
  ASSERT_TRUE(qwen3);

  EXPECT_EQ(tok->token_to_id("<|endoftext|>"), 248044);
  EXPECT_EQ(tok->token_to_id("<|im_start|>"), 248045);
  EXPECT_EQ(tok->token_to_id("<|im_end|>"), 248046);
  EXPECT_EQ(tok->token_to_id("<think>"), 248068);
  EXPECT_EQ(tok->token_to_id("</think>"), 248069);
  EXPECT_EQ(tok->vocab_size(), 248070);
  EXPECT_EQ(tok->eos_token_id(), 248046);  // tokenizer_config's eos_token, looked up by text

  std::vector<nlohmann::json> requests;
  for (const std::string& t : kTexts) requests.push_back({{"text", t}});
  const std::vector<nlohmann::json> answers = test::run_oracle(requests, dir.string());
  int differs_from_qwen3 = 0;
  for (size_t i = 0; i < kTexts.size(); ++i) {
    const std::vector<int32_t> ids = tok->encode(kTexts[i]);
    EXPECT_EQ(ids, answers[i]["ids"].get<std::vector<int32_t>>()) << kTexts[i];
    EXPECT_EQ(tok->decode(ids), answers[i]["nfc"].get<std::string>()) << kTexts[i];
    // The same text under Qwen3's pattern (and ids) splits marks off their letters.
    std::vector<int32_t> shifted = qwen3->encode(kTexts[i]);
    for (int32_t& id : shifted)
      if (id >= 151643) id += kShift;
    differs_from_qwen3 += shifted != ids;
  }
  EXPECT_GE(differs_from_qwen3, 1) << "the combining-mark pattern made no difference: is it read from tokenizer.json?";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pypto
