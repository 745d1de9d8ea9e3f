#pragma once
// Where the tokenizer tests find the real Qwen3 tokenizer and the npm oracle, and how they run it.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace pypto::test {

// third_party/npm/node_modules (scripts/setup.sh installs it).
std::string npm_modules_dir();
// The directory holding the Qwen3 tokenizer.json and tokenizer_config.json.
std::string qwen3_tokenizer_dir();
// The real Qwen3 tokenizer, loaded once. Fails the calling test (ADD_FAILURE) and returns null
// when the files are missing.
std::shared_ptr<const Tokenizer> qwen3_tokenizer();

// Runs tests/tokenizer/oracle_encode.mjs on `requests` (one JSON object per line) and returns
// its answers, one per request. Throws std::runtime_error with the reason (node missing, npm
// packages missing: run scripts/setup.sh, script failed) so the calling test fails.
// tokenizer_dir: a directory whose tokenizer.json / tokenizer_config.json the oracle loads instead
// of its package's (empty: the package's Qwen3 files).
std::vector<nlohmann::json> run_oracle(const std::vector<nlohmann::json>& requests, const std::string& tokenizer_dir = "");

}  // namespace pypto::test
