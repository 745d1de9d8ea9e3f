#include "model/gdn_prefill.h"

#include "core/error.h"

namespace pypto {

const char* gdn_prefill_name(GdnPrefill m) { return m == GdnPrefill::Chunked ? "chunked" : "recurrent"; }

GdnPrefill parse_gdn_prefill(const std::string& s) {
  if (s == "recurrent") return GdnPrefill::Recurrent;
  if (s == "chunked") return GdnPrefill::Chunked;
  fail("--gdn-prefill: '", s, "' is not one of recurrent, chunked");
}

void check_gdn_prefill(const ModelConfig& c, GdnPrefill m) {
  if (m == GdnPrefill::Chunked && !c.hybrid())
    fail("--gdn-prefill chunked: the model (", c.architecture, ") has no Gated DeltaNet layers; the option is for "
         "hybrid models (Qwen3.5 / Qwen3.6 / Qwen3-Next)");
}

const char* const kGdnPrefillHelp =
    "hybrid models (Qwen3.5 / Qwen3.6): the gated delta rule on prefill rows. recurrent: token by token "
    "like decode, so cold prefill, chunked prefill and prefix-cached resumes give identical bits. "
    "chunked: whole 64-token chunks in the chunked (WY) form, faster prefill on AVX-512 (about even with "
    "recurrent on AVX2), equal to recurrent within float rounding; results then depend on where steps and "
    "cache snapshots split the prompt (last-bit differences, greedy tokens only on near-ties). Needs AVX2 "
    "or AVX-512; at --matmul-precision medium "
    "with AVX512_BF16 its matrix products take bf16 operands (the kernel about 2.7x faster, ~5e-3 relative "
    "rounding), elsewhere f32 FMAs";

}  // namespace pypto
