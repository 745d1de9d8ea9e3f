#include "engine/block_hash.h"

#include <openssl/evp.h>

#include <vector>

#include "core/error.h"

namespace pypto {

BlockHash sha256_block_hash(const BlockHash* parent, std::span<const int32_t> tokens) {
  // The root "parent" is all zero bytes; a real parent is a SHA-256 output, so a first block and
  // a later block with the same tokens hash differently.
  std::vector<uint8_t> buf(32 + tokens.size() * 4, 0);
  if (parent) std::memcpy(buf.data(), parent->bytes.data(), 32);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = uint32_t(tokens[i]);
    for (int b = 0; b < 4; ++b) buf[32 + i * 4 + b] = uint8_t(t >> (8 * b));
  }
  BlockHash h;
  unsigned int len = 0;
  const int ok = EVP_Digest(buf.data(), buf.size(), h.bytes.data(), &len, EVP_sha256(), nullptr);
  PYPTO_ASSERT(ok == 1 && len == 32, "EVP_Digest(sha256) failed");
  return h;
}

}  // namespace pypto
