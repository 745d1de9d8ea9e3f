#include "model/hybrid_prequant.h"

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
// kept float like the GDN's b / a rows under --quantization, and stored so by Qwen's releases).
bool must_stay_float(const std::string& name) {
  return ends_with(name, "embed_tokens.weight") || name == "lm_head.weight" || ends_with(name, "mlp.gate.weight") ||
         ends_with(name, "mlp.shared_expert_gate.weight");
}

std::string stem_of(const std::string& name) { return ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : ""; }

}  // namespace

std::string prequantized_stem(const Checkpoint& ck, const std::string& name) {
  const QuantMethod m = ck.config().quant.method;
  const std::string stem = stem_of(name);
  if (m == QuantMethod::None || stem.empty()) return "";
  if (m == QuantMethod::Fp8) {
    const TensorRef* r = ck.find(name);
    return r != nullptr && r->info->dtype == DType::F8_E4M3 ? stem : "";
  }
  return ck.find(name) == nullptr && ck.find(stem + ".qweight") != nullptr ? stem : "";
}

Shape prequantized_shape(const Checkpoint& ck, const std::string& stem) {
  const QuantMethod m = ck.config().quant.method;
  if (m == QuantMethod::Fp8) return ck.get(stem + ".weight").info->shape;
  const Shape& q = ck.get(stem + ".qweight").info->shape;  // awq [in, out / 8]; gptq [in / 8, out]
  PYPTO_ASSERT(q.size() == 2, stem);
  return m == QuantMethod::Awq ? Shape{q[1] * 8, q[0]} : Shape{q[1], q[0] * 8};
}

bool check_hybrid_projection(const Checkpoint& ck, const std::string& name, const Shape& shape, DType wdt,
                             std::vector<std::string>& problems, std::set<std::string>& known) {
  const QuantConfig& q = ck.config().quant;
  const std::string stem = stem_of(name);
  const TensorRef* r = ck.find(name);
  auto expect = [&](const std::string& t, std::initializer_list<DType> dtypes, const Shape& want) {
    known.insert(t);
    const TensorRef* x = ck.find(t);
    if (x == nullptr) {
      problems.push_back(str_cat(t, ": missing (expected ", shape_str(want), " beside ", stem, ")"));
      return;
    }
    if (x->info->shape != want)
      problems.push_back(str_cat(t, ": shape ", shape_str(x->info->shape), ", expected ", shape_str(want)));
    bool ok = false;
    std::string allowed;
    for (DType d : dtypes) {
      ok |= x->info->dtype == d;
      allowed += std::string(allowed.empty() ? "" : " or ") + dtype_name(d);
    }
    if (!ok) problems.push_back(str_cat(t, ": dtype ", dtype_name(x->info->dtype), ", expected ", allowed));
  };
  const bool fp8_codes = r != nullptr && r->info->dtype == DType::F8_E4M3;
  const bool int4_codes = r == nullptr && !stem.empty() && ck.find(stem + ".qweight") != nullptr;
  if (r == nullptr && !int4_codes) {
    problems.push_back(str_cat(name, ": missing (expected ", shape_str(shape), ")"));
    return false;
  }
  if (!fp8_codes && !int4_codes) {  // a float tensor
    if (r->info->shape != shape)
      problems.push_back(str_cat(name, ": shape ", shape_str(r->info->shape), ", expected ", shape_str(shape)));
    else if (r->info->dtype != wdt)
      problems.push_back(str_cat(name, ": dtype ", dtype_name(r->info->dtype), ", expected ", dtype_name(wdt), " like ",
                                 ck.config().tensor_prefix, "embed_tokens.weight"));
    for (const char* companion : {".weight_scale_inv", ".qweight"})
      if (!stem.empty() && ck.find(stem + companion) != nullptr) {
        known.insert(stem + companion);
        problems.push_back(str_cat(stem, companion, ": quantized codes or scales beside the ", dtype_name(r->info->dtype),
                                   " ", name));
      }
    return true;
  }
  const QuantMethod stored = fp8_codes ? QuantMethod::Fp8 : QuantMethod::Gptq;  // (awq or gptq)
  if (q.method == QuantMethod::None || (stored == QuantMethod::Fp8) != (q.method == QuantMethod::Fp8)) {
    problems.push_back(str_cat(name, ": stored ", fp8_codes ? "F8_E4M3" : "as 4-bit qweight", ", but config.json's ",
                               "quantization_config is ", quant_method_name(q.method)));
    return true;
  }
  if (shape.size() != 2 || stem.empty()) {
    problems.push_back(str_cat(name, ": a quantized fused 3-D expert tensor is not supported (per-expert ",
                               "experts.{e}.{gate,up,down}_proj tensors are)"));
    return true;
  }
  if (must_stay_float(name)) {
    problems.push_back(str_cat(name, ": stored quantized (", quant_method_name(q.method), "); it must stay ",
                               dtype_name(wdt), " (embedding, lm_head, router and shared-expert gate are read as float)"));
    return true;
  }
  const std::initializer_list<DType> floats = {DType::BF16, DType::F16, DType::F32};
  const int64_t out = shape[0], in = shape[1];
  if (q.method == QuantMethod::Fp8) {
    if (r->info->shape != shape)
      problems.push_back(str_cat(name, ": shape ", shape_str(r->info->shape), ", expected ", shape_str(shape)));
    expect(stem + ".weight_scale_inv", floats, {ceil_div(out, q.fp8_block_n), ceil_div(in, q.fp8_block_k)});
    return true;
  }
  const int64_t G = q.int4_group();
  if (in % G != 0 || in % 8 != 0 || out % 8 != 0) {
    problems.push_back(str_cat(stem, ": [out ", out, ", in ", in, "] cannot be ", quant_method_name(q.method),
                               "-packed (in a multiple of 8 and of group_size ", G, ", out of 8)"));
    return true;
  }
  if (q.method == QuantMethod::Awq) {
    expect(stem + ".qweight", {DType::I32}, {in, out / 8});
  } else {
    expect(stem + ".qweight", {DType::I32}, {in / 8, out});
    if (ck.find(stem + ".g_idx") != nullptr) expect(stem + ".g_idx", {DType::I32}, {in});
  }
  expect(stem + ".qzeros", {DType::I32}, {in / G, out / 8});
  expect(stem + ".scales", {DType::F16, DType::BF16}, {in / G, out});
  return true;
}

}  // namespace pypto
