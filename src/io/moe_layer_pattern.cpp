#include "io/moe_layer_pattern.h"

#include <climits>

#include "core/error.h"

namespace pypto {

void parse_moe_layer_pattern(const JsonFields& f, ModelConfig& c) {
  const std::string& path = f.path();
  if (auto v = f.opt_int("decoder_sparse_step")) {
    if (*v <= 0 || *v > INT32_MAX) fail(path, ": field 'decoder_sparse_step' must be a positive integer, got ", *v);
    c.decoder_sparse_step = static_cast<int32_t>(*v);
  }
  c.mlp_only_layers.clear();
  if (!f.has("mlp_only_layers")) return;
  const auto& list = f.at("mlp_only_layers");
  if (!list.is_array()) f.bad("mlp_only_layers", "a list of layer indices");
  for (const auto& v : list) {
    if (!v.is_number_integer()) f.bad("mlp_only_layers", "a list of layer indices");
    const int64_t i = v.get<int64_t>();
    if (i < 0 || i >= c.num_hidden_layers)
      fail(path, ": field 'mlp_only_layers' lists layer ", i, ", outside [0, num_hidden_layers = ", c.num_hidden_layers,
           ")");
    c.mlp_only_layers.push_back(static_cast<int32_t>(i));
  }
}

}  // namespace pypto
