#pragma once
// The tokenizer parity corpus: >= 2,000 strings built from a fixed seed, so every run (the
// parity test and the benchmark) sees the same text. See corpus.cpp for what it covers.
#include <string>
#include <vector>

namespace pypto::test {

std::vector<std::string> tokenizer_corpus();

}  // namespace pypto::test
