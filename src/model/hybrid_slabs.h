#pragma once
// Where the hybrids' staged tensors live (model/hybrid_staging.cpp), and the compile-cache pass
// over them (--use-compile-cache).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"
#include "model/weight_staging.h"

namespace pypto {

// Staged tensors (kept alive by Qwen3Weights::storage). Without the compile cache each tensor
// has its own aligned buffer. With it, the staging code runs up to twice over one slab: Measure
// (nothing computed, take() only counts) sizes the slab, then Fill stages into it (a miss, stored
// afterwards) or Replay only binds the pointers over bytes read back from the cache (a hit).
// Every pass takes the same sizes in the same order, so the offsets agree.
struct HybridSlabs {
  enum class Mode { Buffers, Measure, Fill, Replay };
  Mode mode = Mode::Buffers;
  std::vector<AlignedBuffer> buffers;
  AlignedBuffer slab;
  size_t bytes = 0;   // as the buffers would hold them (resident_bytes, staged_slab_bytes)
  size_t offset = 0;  // the next 64-byte aligned offset into the slab
  bool compute() const { return mode == Mode::Buffers || mode == Mode::Fill; }
  uint8_t* take(size_t n) {
    n = std::max<size_t>(n, 64);
    bytes += n;
    if (mode == Mode::Buffers) return buffers.emplace_back(n).data();
    const size_t at = offset;
    offset += (n + 63) & ~size_t(63);
    if (mode == Mode::Measure) return nullptr;
    PYPTO_ASSERT(offset <= slab.size(), "hybrid staging took more bytes than it measured");
    return slab.data() + at;
  }
};

// --use-compile-cache: measures the slab, then reads it back from the cache (a hit: a replay binds
// the pointers over its bytes) or stages into it and stores it (a miss; a corrupt or partial entry
// is removed and counts as one, model/compile_cache.h). The key is the checkpoint, backend and
// rank (staging_fingerprint) plus what else shapes the bytes here: the architecture, the staged
// formats (--quantization, int4 group, a pre-quantized checkpoint's own), the --pp layer range,
// expert parallelism, the MTP head and the activations quantized products run with.
Qwen3Weights stage_hybrid_cached(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt,
                                 const StagedFormats& fmt, int lb, int le,
                                 const std::function<Qwen3Weights(const std::shared_ptr<HybridSlabs>&)>& stage_into);

}  // namespace pypto
