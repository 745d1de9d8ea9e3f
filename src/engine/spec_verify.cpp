#include "engine/spec_verify.h"

#include "core/error.h"

namespace pypto {

size_t accepted_prefix(std::span<const SampledToken> rows, std::span<const int32_t> drafts) {
  PYPTO_ASSERT(rows.size() == drafts.size() + 1, rows.size(), " rows for ", drafts.size(), " drafts");
  size_t a = 0;
  while (a < drafts.size() && rows[a].token_id == drafts[a]) ++a;
  return a;
}

}  // namespace pypto
