#pragma once
// --gdn-prefill: which form of the gated delta rule a Gated DeltaNet layer runs on prefill rows.
//   recurrent (default): every row token by token (kernels/gdn_recurrence.h), the arithmetic decode
//     uses, so a cold prefill, any chunked-prefill split and a prefix-cached resume give the same
//     bits.
//   chunked: each run of rows between the step's state save points goes through the chunked WY /
//     UT-transform form (kernels/gdn_chunked.h) in whole 64-token chunks, its remainder (< 64 rows,
//     decode rows included) through the recurrence. Equal to the recurrence up to rounding (the
//     products sum in another order), so results depend on where steps and save points split a
//     prompt: a cached resume or another --max-num-batched-tokens may differ from a cold prefill
//     in the last bits (greedy tokens only on near-ties). Transformers likewise prefills with a
//     chunked form and decodes with the recurrence.
#include <string>

#include "io/model_config.h"

namespace pypto {

enum class GdnPrefill { Recurrent, Chunked };

const char* gdn_prefill_name(GdnPrefill m);           // "recurrent" | "chunked"
GdnPrefill parse_gdn_prefill(const std::string& s);   // else an error naming --gdn-prefill and the values

// Refuses --gdn-prefill chunked for a model without Gated DeltaNet layers (it would be ignored).
void check_gdn_prefill(const ModelConfig& c, GdnPrefill m);

// The --help text, shared by the commands that take the flag.
extern const char* const kGdnPrefillHelp;

}  // namespace pypto
