#include "model/prompt_logits.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace pypto {

std::vector<float> prompt_logits(Qwen3Model& model, const std::vector<int32_t>& ids, const PromptLogitsOptions& opt) {
  if (ids.empty()) fail("the prompt has no tokens");
  if (opt.chunk < 0) fail("--chunk must be >= 0, got ", opt.chunk);
  if (opt.last < 0) fail("--last must be >= 0, got ", opt.last);
  const int32_t T = static_cast<int32_t>(ids.size());
  const int32_t bs = opt.block_size;
  const int32_t n_blocks = (T + bs - 1) / bs;
  KvCache cache(model.kv_cache_spec(n_blocks, bs, opt.kv_dtype));
  // The sequence owns blocks in reverse order, so a wrong block-table lookup cannot pass by luck.
  std::vector<int32_t> blocks(n_blocks);
  std::iota(blocks.rbegin(), blocks.rend(), 0);

  const int64_t V = model.vocab_size();
  const int32_t rows = opt.last > 0 ? std::min(opt.last, T) : T, first = T - rows;
  std::vector<float> logits(size_t(rows) * V);
  const int32_t chunk = opt.chunk == 0 ? T : opt.chunk;
  ForwardBatch batch;
  // Chunks end at `first` too, so each chunk wants all of its logits or none (where the chunks
  // fall does not change a result: the forward pass is batch- and chunk-invariant).
  for (int32_t start = 0; start < T;) {
    const int32_t end = std::min(start + chunk, start < first ? first : T), n = end - start;
    const bool want = start >= first;
    batch.clear();
    batch.max_blocks_per_seq = n_blocks;
    batch.add_sequence(ids.data() + start, n, start, blocks.data(), (end + bs - 1) / bs, bs,
                       want ? ForwardBatch::Logits::All : ForwardBatch::Logits::None);
    if (model.hybrid()) batch.state_slots.push_back(0);  // the one sequence's GDN state, carried chunk to chunk
    model.forward(batch, cache, want ? logits.data() + size_t(start - first) * V : nullptr);
    start = end;
  }
  return logits;
}

}  // namespace pypto
