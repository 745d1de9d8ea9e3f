#include "parallel/replicas/batch_codec.h"

#include <cstring>

#include "core/error.h"

namespace pypto {
namespace {

struct Header {
  int64_t n_tokens, n_query_start, n_block_entries, n_logits;
  int32_t max_blocks_per_seq, pad;
  // Hybrid models: the sequences' GDN state slots, snapshot restores and saves.
  int64_t n_state_slots, n_state_restore, n_state_saves;
  int64_t n_draft_rows;  // speculative decoding on a hybrid (model/gdn_rollback.h)
};

template <typename T>
void put(std::vector<uint8_t>& out, const std::vector<T>& v) {
  const size_t at = out.size();
  out.resize(at + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data() + at, v.data(), v.size() * sizeof(T));
}

template <typename T>
void take(const uint8_t*& p, const uint8_t* end, int64_t n, std::vector<T>& v) {
  const size_t bytes = size_t(n) * sizeof(T);
  if (n < 0 || size_t(end - p) < bytes) fail("batch message is truncated");
  v.resize(size_t(n));
  if (n > 0) std::memcpy(v.data(), p, bytes);
  p += bytes;
}

}  // namespace

void encode_batch(const ForwardBatch& b, std::vector<uint8_t>& out) {
  out.clear();
  Header h{b.num_tokens(),
           int64_t(b.query_start.size()),
           int64_t(b.block_tables.size()),
           b.num_logits(),
           b.max_blocks_per_seq,
           0,
           int64_t(b.state_slots.size()),
           int64_t(b.state_restore.size()),
           int64_t(b.state_saves.size()),
           int64_t(b.draft_rows.size())};
  PYPTO_ASSERT(b.context_len.size() == size_t(b.num_seqs()), "context_len size");
  out.resize(sizeof h);
  std::memcpy(out.data(), &h, sizeof h);
  put(out, b.token_ids);
  put(out, b.positions);
  put(out, b.slot_mapping);
  put(out, b.query_start);
  put(out, b.context_len);
  put(out, b.block_tables);
  put(out, b.logits_indices);
  put(out, b.state_slots);
  put(out, b.state_restore);
  put(out, b.state_saves);
  put(out, b.draft_rows);
}

void decode_batch(const uint8_t* bytes, size_t size, ForwardBatch& b) {
  if (size < sizeof(Header)) fail("batch message of ", size, " bytes is shorter than its header");
  Header h;
  std::memcpy(&h, bytes, sizeof h);
  const uint8_t* p = bytes + sizeof h;
  const uint8_t* end = bytes + size;
  take(p, end, h.n_tokens, b.token_ids);
  take(p, end, h.n_tokens, b.positions);
  take(p, end, h.n_tokens, b.slot_mapping);
  take(p, end, h.n_query_start, b.query_start);
  take(p, end, h.n_query_start > 0 ? h.n_query_start - 1 : 0, b.context_len);
  take(p, end, h.n_block_entries, b.block_tables);
  take(p, end, h.n_logits, b.logits_indices);
  take(p, end, h.n_state_slots, b.state_slots);
  take(p, end, h.n_state_restore, b.state_restore);
  take(p, end, h.n_state_saves, b.state_saves);
  take(p, end, h.n_draft_rows, b.draft_rows);
  b.max_blocks_per_seq = h.max_blocks_per_seq;
  if (p != end) fail("batch message has ", end - p, " trailing bytes");
}

}  // namespace pypto
