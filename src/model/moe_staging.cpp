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

void bind_moe_layer(const MoeLayerSlots& s, DType wdt, int64_t experts, int64_t H, int64_t moe_inter,
                    WeightFormat format, int32_t group, Qwen3LayerWeights& L) {
  L.sparse = true;
  L.router = LinearWeight{s.router, wdt, experts, H, WeightFormat::Float, 0};
  for (int64_t e = 0; e < experts; e++)
    L.experts.push_back({LinearWeight{s.expert_gate_up[size_t(e)], wdt, 2 * moe_inter, H, format, group},
                         LinearWeight{s.expert_down[size_t(e)], wdt, H, moe_inter, format, group}});
}

size_t stage_moe_layer(const Checkpoint& ck, const Backend& backend, int layer, int64_t moe_inter,
                       const MoeLayerSlots& slots, const StageProjection& stage_projection) {
  const ModelConfig& c = ck.config();
  const int64_t H = c.hidden_size, mI = moe_inter;
  const TensorRef& router = ck.get(str_cat("model.layers.", layer, ".mlp.gate.weight"));
  backend.pack_weight(router.data(), router.info->dtype, c.num_experts, H, slots.router);
  const size_t router_bytes = router.info->end - router.info->begin;
  router.file->release(*router.info);
  for (int64_t e = 0; e < c.num_experts; e++) {
    const std::string gate = expert_proj(e, "gate_proj"), up = expert_proj(e, "up_proj"),
                      down = expert_proj(e, "down_proj");
    const ProjectionPart gate_up[] = {{gate.c_str(), 0, mI, 0, -1}, {up.c_str(), 0, mI, 0, -1}};
    stage_projection(layer, gate_up, 2 * mI, H, slots.expert_gate_up[size_t(e)]);
    const ProjectionPart d[] = {{down.c_str(), 0, H, 0, -1}};
    stage_projection(layer, d, H, mI, slots.expert_down[size_t(e)]);
  }
  return router_bytes;
}

}  // namespace pypto
