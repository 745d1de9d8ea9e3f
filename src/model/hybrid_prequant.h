#pragma once
// Pre-quantized checkpoints of the Qwen3.5 / Qwen3.6 / Qwen3-Next hybrids (config.json
// quantization_config; io/quant_config.h):
//   fp8 (Qwen's *-FP8 releases: {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size":
//     [128, 128]}): `<proj>.weight` F8_E4M3 [out, in] with `<proj>.weight_scale_inv`
//     [ceil(out / 128), ceil(in / 128)] beside it; w = e4m3 · scale per tile.
//   awq / gptq (4-bit, AutoAWQ GEMM / AutoGPTQ): `<proj>.qweight`, `.qzeros`, `.scales` (and
//     GPTQ's `.g_idx`) in place of `<proj>.weight`.
// Which projections are quantized is read from the tensors themselves, not from
// modules_to_not_convert: a projection stored that way is staged in its format as stored (the
// readers of model/quantized_source.h, which the dense / MoE Qwen3 path uses), one stored in the
// checkpoint's float dtype stays float (the GDN's b / a projections, the router and the shared
// expert's gate in Qwen's releases, and whatever the list names). The embedding, lm_head, the
// router and the shared expert's gate must be float (the kernels that read them take float), and
// routed experts stored fused as 3-D tensors must be float (per-expert 2-D tensors are read
// quantized; the fused form of a quantized release is not known here).
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/checkpoint.h"

namespace pypto {

// "<proj>" when the projection `name` ("<proj>.weight") is stored pre-quantized in the
// checkpoint's method, else "".
std::string prequantized_stem(const Checkpoint& ck, const std::string& name);
// The logical [out, in] of a pre-quantized projection (from its codes / qweight).
Shape prequantized_shape(const Checkpoint& ck, const std::string& stem);

// Checks one projection tensor the config expects: `name` with logical shape `shape` (or the
// fused experts' 3-D shape), stored in the checkpoint's float dtype `wdt`, or pre-quantized where
// allowed with its companion tensors in the shapes and dtypes of the method. Appends one line per
// problem; adds the companion tensors' names to `known`. Returns false when `name` is missing
// altogether (neither float nor quantized), having appended that.
bool check_hybrid_projection(const Checkpoint& ck, const std::string& name, const Shape& shape, DType wdt,
                             std::vector<std::string>& problems, std::set<std::string>& known);

}  // namespace pypto
