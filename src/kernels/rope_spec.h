#pragma once
// Rotary position embedding (rotate-half convention) as the backends apply it: per pair j of a
// head (0 <= j < head_dim / 2) an inverse frequency inv_freq[j], the angle position · inv_freq[j],
// and cos / sin scaled by attention_factor. Plain RoPE: inv_freq[j] = theta^(-2j / head_dim),
// attention_factor 1. YaRN (config.json rope_scaling {"rope_type": "yarn", ...}) as transformers
// defines it (modeling_rope_utils.py, _compute_yarn_parameters):
//   d = head_dim, extrapolation e_j = theta^(-2j/d), interpolation i_j = e_j / factor;
//   correction dims c(r) = d · ln(original / (2π r)) / (2 ln theta) for r = beta_fast (low) and
//   beta_slow (high), floored / ceiled when truncate (the default), clamped to [0, d − 1];
//   ramp_j = clamp((j − low) / (high − low), 0, 1) (high += 0.001 when equal);
//   inv_freq[j] = i_j · ramp_j + e_j · (1 − ramp_j);
//   attention_factor = as given, else 0.1 · ln(factor) + 1 for factor > 1 (1 otherwise), or the
//   ratio of that formula at mscale and at mscale_all_dim when both are set.
// All in double here (the engine's tables and the reference backend both start from these).
#include <cstdint>
#include <vector>

namespace pypto {

struct RopeSpec {
  double theta = 10000.0;
  double yarn_factor = 0;                  // > 0: YaRN with this scaling factor; 0: plain RoPE
  double yarn_original_max_positions = 0;  // the pre-YaRN context length
  double yarn_beta_fast = 32, yarn_beta_slow = 1;
  bool yarn_truncate = true;
  double attention_factor = 1.0;  // cos and sin are multiplied by it

  static RopeSpec plain(double theta) {
    RopeSpec s;
    s.theta = theta;
    return s;
  }
  bool operator==(const RopeSpec&) const = default;
};

// inv_freq[j] for j in [0, head_dim / 2).
std::vector<double> rope_inv_freq(const RopeSpec& s, int32_t head_dim);

}  // namespace pypto
