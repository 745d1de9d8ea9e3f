#include "io/quant_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_fields.h"

namespace pypto {

const char* quant_method_name(QuantMethod m) {
  switch (m) {
    case QuantMethod::None: return "none";
    case QuantMethod::Fp8: return "fp8";
    case QuantMethod::Awq: return "awq";
    case QuantMethod::Gptq: return "gptq";
  }
  PYPTO_ASSERT(false, "bad quant method");
}

namespace {

// `quantization_config.<key>` with the value as written, for messages.
[[noreturn]] void unsupported(const std::string& path, const char* key, const nlohmann::json& v,
                              const char* supported) {
  fail(path, ": quantization_config.", key, " is ", v.dump(), " (supported: ", supported, ")");
}

// The first of `keys` present and not null, or nullptr (AutoAWQ's own names are w_bit and
// q_group_size; transformers writes bits and group_size).
const nlohmann::json* find_field(const nlohmann::json& q, std::initializer_list<const char*> keys,
                                 const char** found) {
  for (const char* k : keys)
    if (q.contains(k) && !q.at(k).is_null()) {
      *found = k;
      return &q.at(k);
    }
  return nullptr;
}

// A list of module names the checkpoint left unquantized (lm_head and the like): null or strings.
// Which tensors are quantized is checked against the tensors themselves
// (validate_quantized_projections), so the list's content is not needed here.
void check_module_list(const nlohmann::json& q, const char* key, const std::string& path) {
  if (!q.contains(key) || q.at(key).is_null()) return;
  const auto& v = q.at(key);
  bool ok = v.is_array();
  for (const auto& e : v) ok = ok && e.is_string();
  if (!ok) fail(path, ": quantization_config.", key, " must be null or a list of module names, got ", v.dump());
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

QuantConfig parse_fp8(const nlohmann::json& q, const std::string& path) {
  QuantConfig c;
  c.method = QuantMethod::Fp8;
  if (q.contains("fmt") && !q["fmt"].is_null() && q["fmt"] != "e4m3") unsupported(path, "fmt", q["fmt"], "\"e4m3\"");
  if (q.contains("activation_scheme") && !q["activation_scheme"].is_null() && q["activation_scheme"] != "dynamic")
    unsupported(path, "activation_scheme", q["activation_scheme"], "\"dynamic\"");
  // Without weight_block_size an fp8 checkpoint is per-tensor (one `weight_scale`), not served.
  if (!q.contains("weight_block_size") || q["weight_block_size"].is_null())
    fail(path, ": quantization_config.weight_block_size is missing: per-tensor FP8 is not supported (supported: block "
               "FP8 with weight_block_size [n, k], e.g. [128, 128])");
  const auto& b = q["weight_block_size"];
  if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer() ||
      b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0 || b[0].get<int64_t>() > (1 << 20) ||
      b[1].get<int64_t>() > (1 << 20))
    unsupported(path, "weight_block_size", b, "[n, k] of two positive integers");
  c.fp8_block_n = static_cast<int32_t>(b[0].get<int64_t>());
  c.fp8_block_k = static_cast<int32_t>(b[1].get<int64_t>());
  check_module_list(q, "modules_to_not_convert", path);
  check_module_list(q, "ignored_layers", path);
  return c;
}

QuantConfig parse_awq(const nlohmann::json& q, const std::string& path) {
  QuantConfig c;
  c.method = QuantMethod::Awq;
  const char* key = nullptr;
  if (const auto* v = find_field(q, {"bits", "w_bit"}, &key)) {
    if (!v->is_number_integer() || v->get<int64_t>() != 4) unsupported(path, key, *v, "4");
    c.awq_bits = 4;
  }
  if (const auto* v = find_field(q, {"group_size", "q_group_size"}, &key)) {
    // -1 (one group over the whole input) is an AutoAWQ option no Qwen checkpoint uses.
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (1 << 20))
      unsupported(path, key, *v, "a positive group size, e.g. 128");
    c.awq_group = static_cast<int32_t>(v->get<int64_t>());
  }
  if (const auto* v = find_field(q, {"zero_point"}, &key)) {
    if (!v->is_boolean() || !v->get<bool>()) unsupported(path, key, *v, "true (asymmetric groups with zero points)");
  }
  if (const auto* v = find_field(q, {"version"}, &key)) {
    // AutoAWQ writes "GEMM", transformers "gemm": the same packing. GEMV, GEMV_fast, exllama,
    // ipex and marlin pack differently.
    if (!v->is_string() || lower(v->get<std::string>()) != "gemm") unsupported(path, key, *v, "\"gemm\"");
  }
  check_module_list(q, "modules_to_not_convert", path);
  return c;
}

QuantConfig parse_gptq(const nlohmann::json& q, const std::string& path) {
  QuantConfig c;
  c.method = QuantMethod::Gptq;
  const char* key = nullptr;
  if (const auto* v = find_field(q, {"bits"}, &key)) {
    // 8-bit GPTQ has a scale per group of inputs, which the per-row int8 layer format cannot hold.
    if (!v->is_number_integer() || v->get<int64_t>() != 4) unsupported(path, key, *v, "4");
  }
  if (const auto* v = find_field(q, {"group_size"}, &key)) {
    // -1 (one group over each whole input row) is a GPTQ option Qwen's releases do not use.
    if (!v->is_number_integer() || v->get<int64_t>() <= 0 || v->get<int64_t>() > (1 << 20))
      unsupported(path, key, *v, "a positive group size, e.g. 128");
    c.gptq_group = static_cast<int32_t>(v->get<int64_t>());
  }
  if (const auto* v = find_field(q, {"sym"}, &key)) {
    if (!v->is_boolean()) unsupported(path, key, *v, "true or false");
    c.gptq_sym = v->get<bool>();
  }
  if (const auto* v = find_field(q, {"desc_act"}, &key)) {
    if (!v->is_boolean()) unsupported(path, key, *v, "true or false");
    c.gptq_desc_act = v->get<bool>();
  }
  // GPTQModel writes the convention as checkpoint_format (older releases as format).
  if (const auto* v = find_field(q, {"checkpoint_format", "format"}, &key)) {
    const std::string f = v->is_string() ? lower(v->get<std::string>()) : "";
    if (f == "gptq") c.gptq_v1_zeros = true;
    else if (f == "gptq_v2") c.gptq_v1_zeros = false;
    else unsupported(path, key, *v, "\"gptq\" (zero points stored minus one) or \"gptq_v2\"");
  }
  if (const auto* v = find_field(q, {"lm_head"}, &key)) {
    if (!v->is_boolean() || v->get<bool>()) unsupported(path, key, *v, "false (an unquantized lm_head)");
  }
  if (const auto* v = find_field(q, {"pack_dtype"}, &key)) {
    if (!v->is_string() || v->get<std::string>() != "int32") unsupported(path, key, *v, "\"int32\"");
  }
  check_module_list(q, "modules_to_not_convert", path);
  return c;
}

}  // namespace

QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& path) {
  if (!q.is_object())
    fail(path, ": field 'quantization_config' must be an object, got ", json_type_name(q), " ", q.dump());
  if (!q.contains("quant_method") || !q["quant_method"].is_string())
    fail(path, ": quantization_config has no string 'quant_method' (supported: \"fp8\", \"awq\", \"gptq\")");
  const std::string method = q["quant_method"].get<std::string>();
  if (method == "fp8") return parse_fp8(q, path);
  if (method == "awq") return parse_awq(q, path);
  if (method == "gptq") return parse_gptq(q, path);
  fail(path, ": quantization_config.quant_method '", method,
       "' is not supported (supported: \"fp8\" block FP8 with 128x128-style tiles, \"awq\" 4-bit GEMM with zero "
       "points, \"gptq\" 4-bit)");
}

}  // namespace pypto
