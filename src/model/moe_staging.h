#pragma once
// Qwen3-MoE's share of weight staging (model/weight_staging.h): what a sparse layer must hold in
// the checkpoint, its slots in the slab, and how its router and experts are staged into them.
// A sparse layer (ModelConfig::sparse_layer) replaces the dense MLP with
//   mlp.gate.weight                           router [num_experts, hidden], staged as stored (float)
//   mlp.experts.{e}.{gate,up,down}_proj       per expert, 2-D nn.Linear weights as Qwen publishes
//                                             them: gate/up [moe_inter, hidden], down [hidden, moe_inter]
// and stages each expert like the dense MLP at width moe_inter: gate rows then up rows fused into
// gate_up [2 moe_inter, hidden], down [hidden, moe_inter], expert after expert in the slab.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"

namespace pypto {

// "mlp.experts.{e}.{proj}": below a layer's "model.layers.{i}." prefix.
std::string expert_proj(int64_t e, const char* proj);

// One expert projection of a sparse layer: `name` below the layer prefix (no ".weight"), W [out, in].
struct MoeProjection {
  std::string name;
  int64_t out = 0, in = 0;
};
// Every expert projection of a sparse layer of `c`, expert by expert (gate, up, down).
std::vector<MoeProjection> moe_expert_projections(const ModelConfig& c);

// The part of every sparse layer's experts that tensor-parallel rank `rank` of `tp` holds.
//   split by TP (the default): every expert, intermediate columns [inter_begin, inter_begin + inter)
//     of its gate and up rows and of its down inputs; the ranks' partial outputs are summed by the
//     all-reduce that follows the MLP, as for the dense MLP.
//   expert parallel (--enable-expert-parallel): whole experts [first, first + count); a token's
//     experts held elsewhere contribute zero here, the all-reduce adds them.
struct ExpertShard {
  int64_t first = 0, count = 0;        // experts held
  int64_t inter_begin = 0, inter = 0;  // columns of each held expert's moe_intermediate_size
};
// The shard, or an Error naming the field that does not divide (num_experts under expert
// parallelism; moe_intermediate_size, or the int4 / fp8 groups of `group` inputs that a rank's
// down_proj columns must cover whole, under the TP split) and the other split to use.
ExpertShard expert_shard(const ModelConfig& c, int rank, int tp, bool expert_parallel, WeightFormat layers,
                         int32_t group);

// A sparse layer's slots in the slab.
struct MoeLayerSlots {
  uint8_t* router = nullptr;
  std::vector<uint8_t*> expert_gate_up, expert_down;  // [experts]
};

// Lays out a sparse layer: the router, then per expert gate_up and down (a decode reads two runs
// per chosen expert). take(bytes) hands out the next slab slot (null while only measuring).
void plan_moe_layer(int64_t experts, size_t router_bytes, size_t gate_up_bytes, size_t down_bytes,
                    const std::function<uint8_t*(size_t)>& take, MoeLayerSlots& slots);

// Points L's router (Float, [router_rows, H]: every expert) and the held experts (slots.expert_*,
// layer format: gate_up [2 mI, H], down [H, mI], mI this rank's columns) at the slots, and marks
// L sparse; L.expert_first is the id of slots' first expert.
void bind_moe_layer(const MoeLayerSlots& s, DType wdt, int64_t router_rows, int64_t expert_first, int64_t H,
                    int64_t moe_inter, WeightFormat format, int32_t group, Qwen3LayerWeights& L);

// One part of a staged projection: rows [r0, r1) × columns [c0, c1) (c1 < 0: all) of the tensor
// `proj` below a layer's prefix; the parts of a projection are stacked by rows.
struct ProjectionPart {
  const char* proj;
  int64_t r0, r1, c0, c1;
};
// Stages the parts of a [n, k] projection of `layer` at dst in the layer format.
using StageProjection =
    std::function<void(int layer, std::span<const ProjectionPart> parts, int64_t n, int64_t k, uint8_t* dst)>;

// Stages sparse layer `layer` for the rank holding `shard`: the whole router as stored (every rank
// routes every token; packed for the backend in the checkpoint's float dtype — quantized
// checkpoints and vLLM leave it unquantized too: it is small and decides the routing), then each
// held expert's share through stage_projection. Returns the checkpoint bytes of the router (for
// the progress line).
size_t stage_moe_layer(const Checkpoint& ck, const Backend& backend, int layer, const ExpertShard& shard,
                       const MoeLayerSlots& slots, const StageProjection& stage_projection);

}  // namespace pypto
