#include "model/hybrid_slabs.h"

#include <string>

#include "core/log.h"
#include "model/compile_cache.h"

namespace pypto {

Qwen3Weights stage_hybrid_cached(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt,
                                 const StagedFormats& fmt, int lb, int le,
                                 const std::function<Qwen3Weights(const std::shared_ptr<HybridSlabs>&)>& stage_into) {
  const ModelConfig& c = ck.config();
  auto measure = std::make_shared<HybridSlabs>();
  measure->mode = HybridSlabs::Mode::Measure;
  stage_into(measure);
  const size_t total = std::max<size_t>(measure->offset, 64);
  const std::string act = quantized_activations(fmt.layers, backend);
  const std::string weights =
      str_cat("hybrid ", c.architecture, " ", fmt.describe(), " layers [", lb, ", ", le, ")",
              fmt.expert_parallel && opt.tp_size > 1 && c.has_sparse_layers() ? " expert-parallel" : "",
              opt.mtp ? " mtp" : "", act.empty() ? "" : " " + act);
  const std::string key = staging_fingerprint(ck, backend, opt.tp_rank, opt.tp_size, weights);
  const std::string path = compile_cache_path(opt.compile_cache_dir, key);
  auto slabs = std::make_shared<HybridSlabs>();
  slabs->slab = AlignedBuffer(total);
  const bool hit = compile_cache_load(opt.compile_cache_dir, key, slabs->slab.data(), total);
  slabs->mode = hit ? HybridSlabs::Mode::Replay : HybridSlabs::Mode::Fill;
  Qwen3Weights w = stage_into(slabs);
  PYPTO_ASSERT(slabs->offset == measure->offset && slabs->bytes == measure->bytes, "hybrid staging passes disagree");
  if (hit) {
    log_info("compile cache: hit ", path);
    w.from_compile_cache = true;
    return w;
  }
  if (compile_cache_store(opt.compile_cache_dir, key, slabs->slab.data(), total))
    log_info("compile cache: stored ", path);
  return w;
}

}  // namespace pypto
