#pragma once
// Shared helpers for the structured-output tests: byte-level vocabularies, walking a grammar,
// the real Qwen3 tokenizer, and the ajv oracle.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/compiled_grammar.h"
#include "tokenizer/tokenizer.h"

namespace pypto::structured::test {

// 256 tokens, token b = the single byte b, plus EOS = 256.
std::shared_ptr<const TokenVocab> byte_vocab();
constexpr int32_t kByteEos = 256;

std::shared_ptr<const CompiledGrammar> compile(const Grammar& g, std::shared_ptr<const TokenVocab> vocab = nullptr);
// Whether the whole of `text` is in the grammar's language.
bool accepts(const CompiledGrammar& g, std::string_view text);
// Whether `text` is a prefix of some output of the grammar.
bool accepts_prefix(const CompiledGrammar& g, std::string_view text);
// A random output, byte by byte (stops with probability stop_p where it may).
std::string random_output(const CompiledGrammar& g, std::mt19937_64& rng, double stop_p = 0.3);

// The Qwen3 tokenizer from the pinned npm data (null and a test failure when missing).
std::shared_ptr<const Tokenizer> qwen3_tokenizer();
// Qwen3: logits width and EOS ids (<|im_end|>, <|endoftext|>).
constexpr int64_t kQwen3Logits = 151936;
std::shared_ptr<const TokenVocab> qwen3_vocab();

// ajv's verdict for each (schema, output) pair: {"valid": bool, "error": "..."}. Throws
// std::runtime_error (node or npm packages missing) so the calling test fails.
std::vector<nlohmann::json> ajv_validate(const std::vector<std::pair<nlohmann::json, std::string>>& cases);

}  // namespace pypto::structured::test
