#pragma once
// The measurement tests' engine: the tiny random-weight test model (made once under the test
// temp dir, in `subdir`-<hash>, safely under parallel test processes) loaded as one engine with a 16 MiB KV pool, 2 threads and max-model-len
// 256; max_num_seqs > 0 overrides the scheduler's default.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/model_runner.h"
#include "parallel/replicas/load_replicas.h"
#include "model/test_model_cache.h"

namespace pypto::bench {

// The model's directory (made on first use).
inline std::string tiny_model_dir(const std::string& subdir) {
  TestModelOptions o;
  o.preset = "tiny";
  o.show_progress = false;
  return cached_test_model(::testing::TempDir(), subdir, o);
}

inline LoadedEngine load_tiny_engine(const std::string& subdir, int max_num_seqs = 0) {
  EngineLoadOptions lo;
  lo.model_dir = tiny_model_dir(subdir);
  lo.kv_cache_memory = 16 << 20;
  lo.threads = 2;
  lo.show_progress = false;
  lo.scheduler.max_model_len = 256;
  if (max_num_seqs > 0) lo.scheduler.max_num_seqs = max_num_seqs;
  return load_engine(lo);
}

}  // namespace pypto::bench
