#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/kv_capacity.h"

namespace pypto {
namespace {

TEST(KvCapacity, BytesPerBlockQwen3) {
  // Qwen3-0.6B: 28 layers, 8 KV heads, head_dim 128; bf16, block 16: 28*2*16*8*128*2 = 1.75 MiB.
  EXPECT_EQ(kv_bytes_per_block(28, 16, 8, 128, DType::BF16), 1835008);
  EXPECT_EQ(kv_bytes_per_block(28, 16, 8, 128, DType::F32), 3670016);
  // 8-bit: 128 one-byte codes + a 4-byte scale per row = 132 bytes (bf16: 256).
  EXPECT_EQ(kv_bytes_per_block(28, 16, 8, 128, DType::I8), 28 * 2 * 16 * 8 * 132);
  EXPECT_EQ(kv_bytes_per_block(28, 16, 8, 128, DType::F8_E4M3), 946176);
  // Qwen3-14B as in the seed: 40 layers, page 128 -> 20 MiB.
  EXPECT_EQ(kv_bytes_per_block(40, 128, 8, 128, DType::BF16), 20971520);
}

TEST(KvCapacity, FromExplicitMemory) {
  KvCapacityRequest r;
  r.bytes_per_block = 1835008;
  r.block_size = 16;
  r.max_model_len = 4096;
  r.kv_cache_memory = int64_t(4) << 30;  // 4 GiB
  const KvCapacity c = plan_kv_capacity(r);
  EXPECT_EQ(c.num_blocks, 2340);  // floor(4 GiB / 1.75 MiB)
  EXPECT_EQ(c.token_capacity, 37440);
  EXPECT_DOUBLE_EQ(c.max_concurrency, 2340.0 / 256.0);
  EXPECT_EQ(c.summary(), "KV cache: 4.00 GiB, 2340 blocks, 37440 tokens; max concurrency at max-model-len: 9.14x");
}

TEST(KvCapacity, FromUtilizationOfAvailableMemory) {
  KvCapacityRequest r;
  r.bytes_per_block = 1000;
  r.block_size = 16;
  r.max_model_len = 160;
  r.available_bytes = 100000;
  r.memory_utilization = 0.9;
  const KvCapacity c = plan_kv_capacity(r);  // 0.9 * 100000 = 90000 -> 90 blocks
  EXPECT_EQ(c.kv_bytes, 90000);
  EXPECT_EQ(c.num_blocks, 90);
  EXPECT_DOUBLE_EQ(c.max_concurrency, 9.0);
  EXPECT_EQ(c.basis, "");
}

TEST(KvCapacity, DefaultIsWhatTheConfigurationCanUse) {
  // 16 sequences of 1024 tokens in blocks of 16: 16 * 64 = 1024 blocks, + 512 for the prefix cache.
  EXPECT_EQ(default_kv_blocks(16, 1024, 16, true), 1536);
  EXPECT_EQ(default_kv_blocks(16, 1024, 16, false), 1024);
  EXPECT_EQ(default_kv_blocks(3, 100, 16, true), 32);  // 3 * 7 = 21 -> 21 + 11
  KvCapacityRequest r;
  r.bytes_per_block = 1835008;  // qwen3-0.6b, bf16, block 16
  r.block_size = 16;
  r.max_model_len = 1024;
  r.max_num_seqs = 16;
  r.available_bytes = int64_t(24) << 30;
  const KvCapacity c = plan_kv_capacity(r);
  EXPECT_EQ(c.num_blocks, 1536);
  EXPECT_EQ(c.kv_bytes, 1536 * int64_t(1835008));  // 2.62 GiB, not 0.9 of 24 GiB
  EXPECT_EQ(c.summary(), "KV cache: 2.62 GiB, 1536 blocks, 24576 tokens; max concurrency at max-model-len: 24.00x "
                         "(default: --max-num-seqs 16 x --max-model-len 1024 + 50% for the prefix cache)");
}

TEST(KvCapacity, DefaultIsCappedByFreeMemory) {
  KvCapacityRequest r;
  r.bytes_per_block = 1000;
  r.block_size = 16;
  r.max_model_len = 160;  // 10 blocks per sequence
  r.max_num_seqs = 16;    // wants 160 + 80 blocks
  r.available_bytes = 100000;
  const KvCapacity c = plan_kv_capacity(r);
  EXPECT_EQ(c.num_blocks, 90);  // 0.9 * 100000
  EXPECT_NE(c.basis.find("capped at 0.9 of the free memory"), std::string::npos) << c.basis;
  r.available_bytes = 5000;  // not even one sequence
  try {
    plan_kv_capacity(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("free memory, give --kv-cache-memory, or lower --max-model-len"),
              std::string::npos) << e.what();
  }
}

// The MTP / EAGLE-3 drafter's kept hidden rows live beside the pool: the pool sized from the
// available memory is cut from what they leave, and the log line names them.
TEST(KvCapacity, TheDrafterBytesComeOutOfTheAvailableMemory) {
  KvCapacityRequest r;
  r.bytes_per_block = 1000;
  r.block_size = 16;
  r.max_model_len = 160;
  r.available_bytes = 100000;
  r.memory_utilization = 1.0;
  EXPECT_EQ(plan_kv_capacity(r).num_blocks, 100);
  r.drafter_bytes = 20000;
  const KvCapacity c = plan_kv_capacity(r);
  EXPECT_EQ(c.num_blocks, 80);  // exactly the drafter's 20 blocks' worth fewer
  EXPECT_EQ(c.drafter_bytes, 20000);
  EXPECT_EQ(c.summary(), "KV cache: 78.1 KiB, 80 blocks, 1280 tokens; max concurrency at max-model-len: 8.00x; "
                         "beside it the drafter's kept hidden rows, up to 19.5 KiB");
  r.memory_utilization.reset();  // the default's cap: 0.9 of what the drafter leaves
  r.max_num_seqs = 16;
  EXPECT_EQ(plan_kv_capacity(r).num_blocks, 72);
  r.kv_cache_memory = 50000;  // a given pool size is the pool's alone
  EXPECT_EQ(plan_kv_capacity(r).num_blocks, 50);
}

TEST(KvCapacity, TooSmallNamesTheFlags) {
  KvCapacityRequest r;
  r.bytes_per_block = 1024;
  r.block_size = 16;
  r.max_model_len = 1024;  // 64 blocks
  r.kv_cache_memory = 10 * 1024;
  try {
    plan_kv_capacity(r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "KV cache of 10.0 KiB (--kv-cache-memory) holds 10 blocks = 160 tokens, fewer than one sequence of "
                 "--max-model-len 1024 (64 blocks, 64.0 KiB): raise --kv-cache-memory or lower --max-model-len");
  }
  r.kv_cache_memory.reset();
  r.memory_utilization = 1.5;
  EXPECT_THROW(plan_kv_capacity(r), Error);
}

}  // namespace
}  // namespace pypto
