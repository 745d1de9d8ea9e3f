#pragma once
// A ForwardBatch as bytes, for the ranks that are processes: rank 0 builds each step's batch
// (block tables, slots, logits rows) and broadcasts it; the other ranks decode the same batch and
// run their slice of the model on it. Layout (host byte order: every rank of a job runs the same
// binary on the same architecture):
//   int64 n_tokens, n_query_start (S + 1, or 0), n_block_entries, n_logits; int32 max_blocks_per_seq, pad;
//   token_ids[T] i32, positions[T] i32, slot_mapping[T] i64, query_start[n_query_start] i32,
//   context_len[S] i32, block_tables[B] i32, logits_indices[L] i32.
#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace pypto {

// Replaces `out` with the encoding of `b` (its capacity is reused).
void encode_batch(const ForwardBatch& b, std::vector<uint8_t>& out);
// Replaces `b` with the batch in `bytes`; throws Error on a size that does not match the header.
void decode_batch(const uint8_t* bytes, size_t size, ForwardBatch& b);

}  // namespace pypto
