#include "model/hybrid_fp8.h"

#include "core/error.h"
#include "io/quant_config.h"

namespace pypto {
namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Projections whose consumers read float weights: the embedding table (looked up by rows),
// lm_head (staged with the embedding when tied), the router and the shared expert's gate (both
// kept float like the GDN's b / a rows under --quantization, and stored bf16 by Qwen's FP8 releases).
bool must_stay_float(const std::string& name) {
  return ends_with(name, "embed_tokens.weight") || name == "lm_head.weight" || ends_with(name, "mlp.gate.weight") ||
         ends_with(name, "mlp.shared_expert_gate.weight");
}

}  // namespace

bool hybrid_fp8_tensor(const Checkpoint& ck, const std::string& name) {
  if (ck.config().quant.method != QuantMethod::Fp8 || !ends_with(name, ".weight")) return false;
  const TensorRef* r = ck.find(name);
  return r != nullptr && r->info->dtype == DType::F8_E4M3;
}

std::string fp8_stem(const std::string& name) {
  PYPTO_ASSERT(ends_with(name, ".weight"), name);
  return name.substr(0, name.size() - 7);
}

void check_hybrid_projection(const Checkpoint& ck, const std::string& name, const Shape& shape, DType wdt,
                             std::vector<std::string>& problems, std::set<std::string>& known) {
  const TensorRef* r = ck.find(name);
  PYPTO_ASSERT(r != nullptr, name);
  const DType dt = r->info->dtype;
  const QuantConfig& q = ck.config().quant;
  const std::string scale = name + "_scale_inv";  // <proj>.weight_scale_inv
  if (dt != DType::F8_E4M3) {
    if (dt != wdt)
      problems.push_back(str_cat(name, ": dtype ", dtype_name(dt), ", expected ", dtype_name(wdt), " like ",
                                 ck.config().tensor_prefix, "embed_tokens.weight"));
    if (ck.find(scale) != nullptr) {
      known.insert(scale);
      problems.push_back(str_cat(scale, ": a block-FP8 scale beside ", name, ", which is ", dtype_name(dt),
                                 " (expected F8_E4M3 codes)"));
    }
    return;
  }
  if (q.method != QuantMethod::Fp8) {
    problems.push_back(str_cat(name, ": dtype F8_E4M3, but config.json has no quantization_config with quant_method fp8"));
    return;
  }
  if (shape.size() != 2 || !ends_with(name, ".weight")) {
    problems.push_back(str_cat(name, ": block FP8 in a fused 3-D expert tensor is not supported (per-expert ",
                               "experts.{e}.{gate,up,down}_proj.weight FP8 tensors are)"));
    return;
  }
  if (must_stay_float(name)) {
    problems.push_back(str_cat(name, ": stored F8_E4M3; it must stay ", dtype_name(wdt),
                               " (embedding, lm_head, router and shared-expert gate are read as float)"));
    return;
  }
  known.insert(scale);
  const TensorRef* s = ck.find(scale);
  const Shape grid = {ceil_div(shape[0], q.fp8_block_n), ceil_div(shape[1], q.fp8_block_k)};
  if (s == nullptr) {
    problems.push_back(str_cat(scale, ": missing (expected a float ", shape_str(grid), " beside the F8_E4M3 ", name, ")"));
    return;
  }
  if (s->info->shape != grid)
    problems.push_back(str_cat(scale, ": shape ", shape_str(s->info->shape), ", expected ", shape_str(grid),
                               " (weight_block_size [", q.fp8_block_n, ", ", q.fp8_block_k, "])"));
  if (s->info->dtype != DType::BF16 && s->info->dtype != DType::F16 && s->info->dtype != DType::F32)
    problems.push_back(str_cat(scale, ": dtype ", dtype_name(s->info->dtype), " (allowed: BF16, F16, F32)"));
}

}  // namespace pypto
