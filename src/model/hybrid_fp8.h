#pragma once
// Block-FP8 checkpoints of the Qwen3.5 / Qwen3.6 / Qwen3-Next hybrids (Qwen's *-FP8 releases:
// config.json quantization_config {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size":
// [128, 128]}; io/quant_config.h). Which projections are FP8 is read from the tensors themselves,
// not from modules_to_not_convert: a `<proj>.weight` stored F8_E4M3 with `<proj>.weight_scale_inv`
// [ceil(out / 128), ceil(in / 128)] beside it is FP8 (w = e4m3 · scale per 128 × 128 tile) and is
// staged in FP8 as stored (model/quantized_source.h, the reader the dense / MoE Qwen3 path uses);
// a projection stored in the checkpoint's float dtype stays float (the GDN's b / a projections,
// the router and the shared expert's gate in Qwen's releases, and whatever the list names). The
// embedding, lm_head, the router and the shared expert's gate must be float (the kernels that
// read them take float), and routed experts stored fused as 3-D FP8 tensors are refused by name
// (Qwen3.5's FP8 layout for them is not known here; per-expert 2-D tensors are read).
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/checkpoint.h"

namespace pypto {

// `name` (a "<proj>.weight") is stored F8_E4M3 in an fp8 checkpoint.
bool hybrid_fp8_tensor(const Checkpoint& ck, const std::string& name);
// "<proj>" of "<proj>.weight".
std::string fp8_stem(const std::string& name);

// Checks one projection tensor the config expects, `name` with logical shape [out, in] (or the
// fused experts' 3-D shape): the checkpoint's float dtype `wdt`, or (fp8 checkpoints, where
// allowed) F8_E4M3 with its weight_scale_inv of the tile grid's shape in a float dtype. Appends
// one line per problem; adds the scale tensor's name to `known` when it belongs to `name`.
void check_hybrid_projection(const Checkpoint& ck, const std::string& name, const Shape& shape,
                             DType wdt, std::vector<std::string>& problems, std::set<std::string>& known);

}  // namespace pypto
