#pragma once
// Decoders of a pre-quantized checkpoint's projection weights into a neutral, kernel-independent
// form (W[n_out, k_in], PyTorch nn.Linear orientation) that staging packs for the backend.
// Formats: io/quant_config.h.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/checkpoint.h"

namespace pypto {

// Block FP8: w[r][c] = e4m3_to_f32(e4m3[r * ld + c]) * scale[((r + row_phase) / block_n) * grid_k +
// (c + col_phase) / block_k]. For the whole tensor (or a slice starting on a tile boundary) the
// phases are 0 and ld = k, i.e. scale[(r / block_n) * grid_k + c / block_k]. A tensor-parallel
// slice starting inside a tile has phase r0 % block_n (c0 % block_k): its first tile row is short.
struct Fp8Source {
  const uint8_t* e4m3 = nullptr;  // [n, k] with row stride ld, points into the checkpoint mapping
  int64_t n = 0, k = 0;
  int64_t ld = 0;                 // row stride of e4m3 in bytes: the whole tensor's in_features
  int32_t block_n = 128, block_k = 128;
  int32_t row_phase = 0, col_phase = 0;  // r0 % block_n, c0 % block_k of the slice
  int64_t grid_n = 0, grid_k = 0;  // ceil((n + row_phase) / block_n), ceil((k + col_phase) / block_k)
  std::vector<float> scale;        // [grid_n, grid_k] widened to f32 (exact from bf16/f16)

  float scale_at(int64_t r, int64_t c) const {
    return scale[static_cast<size_t>(((r + row_phase) / block_n) * grid_k + (c + col_phase) / block_k)];
  }
  float at(int64_t r, int64_t c) const {  // the dequantized weight (for reference code and tests)
    return e4m3_to_f32(e4m3[r * ld + c]) * scale_at(r, c);
  }
};

// 4-bit groups, unpacked (AWQ, and GPTQ with g_idx = k / group decodes into the same form):
// w[r][c] = (q[r * k + c] - zero[r * groups + c / group]) * scale[r * groups + c / group].
struct AwqSource {
  int64_t n = 0, k = 0;
  int32_t group = 128;
  int64_t groups = 0;          // k / group
  std::vector<uint8_t> q;      // [n, k] values 0..15
  std::vector<uint8_t> zero;   // [n, groups] values 0..15
  std::vector<float> scale;    // [n, groups] (exact from f16)

  float at(int64_t r, int64_t c) const {  // the dequantized weight (for reference code and tests)
    const size_t g = static_cast<size_t>(r * groups + c / group);
    return (static_cast<float>(q[static_cast<size_t>(r * k + c)]) - static_cast<float>(zero[g])) * scale[g];
  }
};

// `proj` is a projection's prefix, e.g. "model.layers.3.mlp.down_proj". Rows [r0, r1) and
// columns [c0, c1) of the logical W select a tensor-parallel slice (whole tensor by default:
// r1 = c1 = -1). Errors name the tensor, its shape/dtype and what was expected. FP8 slices may
// start anywhere (see the phases above); AWQ slices must start and end on a group boundary in
// columns and on a multiple of 8 in rows (the packing unit), else an Error names the slice.
// The checkpoint's config must have the matching quant method (asserted). Both only read the
// mapping, so several projections can be decoded at once from different threads. Cost at the
// qwen3-14b shape, one layer (7 projections), one thread: FP8 ~0 (a pointer and the scales),
// AWQ 0.35-0.45 s on the shared 2-core Xeon (330 M nibbles unpacked and transposed).
Fp8Source read_fp8_projection(const Checkpoint& ck, const std::string& proj, int64_t r0 = 0, int64_t r1 = -1,
                              int64_t c0 = 0, int64_t c1 = -1);
AwqSource read_awq_projection(const Checkpoint& ck, const std::string& proj, int64_t r0 = 0, int64_t r1 = -1,
                              int64_t c0 = 0, int64_t c1 = -1);
// GPTQ (io/quant_config.h): qweight [in / 8, out] unpacked along the input dimension, qzeros
// along the output dimension (+1 under the v1 convention), scales, and g_idx checked to be
// k / group (else an Error naming the tensor and desc_act: act-order is not served). A decoded
// zero point above 15 (v1's stored 15, the wrapped zero 0) does not fit the int4 layer format: an
// Error naming the tensor. Slices as AWQ's (rows multiples of 8, columns of the group and of 8).
AwqSource read_gptq_projection(const Checkpoint& ck, const std::string& proj, int64_t r0 = 0, int64_t r1 = -1,
                               int64_t c0 = 0, int64_t c1 = -1);
// Any 4-bit format of the checkpoint's method (awq or gptq).
AwqSource read_int4_projection(const Checkpoint& ck, const std::string& proj, int64_t r0 = 0, int64_t r1 = -1,
                               int64_t c0 = 0, int64_t c1 = -1);
// Releases the checkpoint pages behind a projection's tensors (after staging it).
void release_projection(const Checkpoint& ck, const std::string& proj);

// Checks that every quantized projection of the config's method is present with the shapes and
// dtypes above (and the unquantized tensors: embeddings, lm_head, norms, Qwen2's q/k/v biases, in
// BF16/F16/F32; a Qwen3-MoE router `mlp.gate.weight` [experts, hidden] unquantized in the dtype
// of the embedding table), appending one line per problem ("<tensor>: missing (expected ...)", "<tensor>:
// shape [..], expected [..]", "<tensor>: dtype .., expected .."); nothing for an unquantized
// checkpoint. validate_qwen3_checkpoint calls it for fp8 / awq / gptq checkpoints in place of its own
// per-tensor checks and throws one Error listing them all.
void validate_quantized_projections(const Checkpoint& ck, std::vector<std::string>& problems);

}  // namespace pypto
