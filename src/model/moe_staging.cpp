#include "model/moe_staging.h"

#include "core/error.h"

namespace pypto {

std::string expert_proj(int64_t e, const char* proj) { return str_cat("mlp.experts.", e, ".", proj); }

std::vector<MoeProjection> moe_expert_projections(const ModelConfig& c) {
  const int64_t H = c.hidden_size, mI = c.moe_intermediate_size;
  std::vector<MoeProjection> v;
  v.reserve(static_cast<size_t>(3 * c.num_experts));
  for (int64_t e = 0; e < c.num_experts; e++) {
    v.push_back({expert_proj(e, "gate_proj"), mI, H});
    v.push_back({expert_proj(e, "up_proj"), mI, H});
    v.push_back({expert_proj(e, "down_proj"), H, mI});
  }
  return v;
}

ExpertShard expert_shard(const ModelConfig& c, int rank, int tp, bool expert_parallel, WeightFormat layers,
                         int32_t group) {
  PYPTO_ASSERT(tp >= 1 && rank >= 0 && rank < tp, "rank ", rank, " of ", tp);
  const int64_t E = c.num_experts, mI = c.moe_intermediate_size;
  ExpertShard s;
  if (expert_parallel) {
    if (E % tp)
      fail("--enable-expert-parallel with --tp ", tp, ": num_experts (", E, ") is not divisible by it; leave the flag ",
           "out to split every expert's intermediate columns instead");
    s.count = E / tp;
    s.first = rank * s.count;
    s.inter = mI;
    return s;
  }
  if (mI % tp)
    fail("--tp ", tp, ": moe_intermediate_size (", mI, ") is not divisible by it; use --enable-expert-parallel to ",
         "give each rank whole experts");
  s.count = E;
  s.inter = mI / tp;
  s.inter_begin = rank * s.inter;
  if (tp > 1 && (layers == WeightFormat::Int4 || layers == WeightFormat::Fp8) && s.inter % group)
    fail("--tp ", tp, ": each rank's share of an expert's down_proj would hold ", s.inter,
         " input columns (moe_intermediate_size ", mI, " / ", tp, "), not a multiple of the ", weight_format_name(layers),
         " group of ", group, " inputs; use --enable-expert-parallel to give each rank whole experts");
  return s;
}

void plan_moe_layer(int64_t experts, size_t router_bytes, size_t gate_up_bytes, size_t down_bytes,
                    const std::function<uint8_t*(size_t)>& take, MoeLayerSlots& slots) {
  slots.router = take(router_bytes);
  slots.expert_gate_up.resize(size_t(experts));
  slots.expert_down.resize(size_t(experts));
  for (int64_t e = 0; e < experts; e++) {
    slots.expert_gate_up[size_t(e)] = take(gate_up_bytes);
    slots.expert_down[size_t(e)] = take(down_bytes);
  }
}

void bind_moe_layer(const MoeLayerSlots& s, DType wdt, int64_t router_rows, int64_t expert_first, int64_t H,
                    int64_t moe_inter, WeightFormat format, int32_t group, Qwen3LayerWeights& L) {
  L.sparse = true;
  L.router = LinearWeight{s.router, wdt, router_rows, H, WeightFormat::Float, 0};
  L.expert_first = expert_first;
  for (size_t e = 0; e < s.expert_gate_up.size(); e++)
    L.experts.push_back({LinearWeight{s.expert_gate_up[size_t(e)], wdt, 2 * moe_inter, H, format, group},
                         LinearWeight{s.expert_down[size_t(e)], wdt, H, moe_inter, format, group}});
}

size_t stage_moe_layer(const Checkpoint& ck, const Backend& backend, int layer, const ExpertShard& shard,
                       const MoeLayerSlots& slots, const StageProjection& stage_projection) {
  const ModelConfig& c = ck.config();
  const int64_t H = c.hidden_size, mI = shard.inter, i0 = shard.inter_begin, i1 = i0 + mI;
  PYPTO_ASSERT(int64_t(slots.expert_gate_up.size()) == shard.count, "expert slots ", slots.expert_gate_up.size());
  const TensorRef& router = ck.get(str_cat("model.layers.", layer, ".mlp.gate.weight"));
  backend.pack_weight(router.data(), router.info->dtype, c.num_experts, H, slots.router);
  const size_t router_bytes = router.info->end - router.info->begin;
  router.file->release(*router.info);
  for (int64_t j = 0; j < shard.count; j++) {
    const int64_t e = shard.first + j;
    const std::string gate = expert_proj(e, "gate_proj"), up = expert_proj(e, "up_proj"),
                      down = expert_proj(e, "down_proj");
    // gate_up: the rank's intermediate rows of gate then of up; down: the same columns (row-parallel).
    const ProjectionPart gate_up[] = {{gate.c_str(), i0, i1, 0, -1}, {up.c_str(), i0, i1, 0, -1}};
    stage_projection(layer, gate_up, 2 * mI, H, slots.expert_gate_up[size_t(j)]);
    const bool whole = i0 == 0 && mI == c.moe_intermediate_size;
    const ProjectionPart d[] = {{down.c_str(), 0, H, whole ? 0 : i0, whole ? -1 : i1}};
    stage_projection(layer, d, H, mI, slots.expert_down[size_t(j)]);
  }
  return router_bytes;
}

}  // namespace pypto
