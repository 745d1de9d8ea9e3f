#include "model/pooling_head.h"

#include <cstring>

#include "core/error.h"

namespace pypto {

int64_t PoolingHead::width(int64_t vocab, int64_t hidden) const {
  switch (kind) {
    case Kind::None: return vocab;
    case Kind::Hidden: return hidden;
    case Kind::TokenLogits: return int64_t(token_ids.size());
  }
  return vocab;
}

void pooling_head_forward(const PoolingHead& head, const float* h, int64_t n, int64_t hidden, float* out) {
  PYPTO_ASSERT(head.kind != PoolingHead::Kind::None, "pooling head without a kind");
  if (head.kind == PoolingHead::Kind::Hidden) {
    std::memcpy(out, h, sizeof(float) * size_t(n * hidden));
    return;
  }
  const int64_t k = int64_t(head.token_ids.size());
  PYPTO_ASSERT(int64_t(head.rows.size()) == k * hidden, "pooling head rows ", head.rows.size(), " for ", k, " x ", hidden);
  // A double accumulator in index order: exact enough that the score's error is the hidden
  // state's, and the same for a row whatever else is in the step.
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const float* w = head.rows.data() + j * hidden;
      const float* x = h + r * hidden;
      double acc = 0;
      for (int64_t i = 0; i < hidden; ++i) acc += double(x[i]) * double(w[i]);
      out[r * k + j] = float(acc);
    }
}

}  // namespace pypto
