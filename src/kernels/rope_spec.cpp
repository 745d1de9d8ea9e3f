#include "kernels/rope_spec.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pypto {

std::vector<double> rope_inv_freq(const RopeSpec& s, int32_t head_dim) {
  PYPTO_ASSERT(head_dim > 0 && head_dim % 2 == 0 && s.theta > 0, "head_dim ", head_dim, " theta ", s.theta);
  const int32_t half = head_dim / 2;
  const double d = head_dim;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int32_t j = 0; j < half; ++j) inv[size_t(j)] = std::pow(s.theta, -2.0 * j / d);
  if (s.yarn_factor <= 0) return inv;
  PYPTO_ASSERT(s.yarn_original_max_positions > 0, "YaRN without its original context length");
  // The dimension at which a frequency turns r times over the original context.
  auto correction_dim = [&](double r) {
    return d * std::log(s.yarn_original_max_positions / (r * 2 * M_PI)) / (2 * std::log(s.theta));
  };
  double low = correction_dim(s.yarn_beta_fast), high = correction_dim(s.yarn_beta_slow);
  if (s.yarn_truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, d - 1);
  if (low == high) high += 0.001;
  for (int32_t j = 0; j < half; ++j) {
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    const double extrapolation = inv[size_t(j)], interpolation = extrapolation / s.yarn_factor;
    inv[size_t(j)] = interpolation * ramp + extrapolation * (1 - ramp);
  }
  return inv;
}

}  // namespace pypto
