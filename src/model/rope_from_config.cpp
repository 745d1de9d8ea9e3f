#include "model/rope_from_config.h"

namespace pypto {

RopeSpec rope_from_config(const ModelConfig& c) {
  RopeSpec s = RopeSpec::plain(c.rope_theta);
  const RopeScaling& r = c.rope_scaling;
  if (!r.yarn) return s;
  s.yarn_factor = r.factor;
  s.yarn_original_max_positions = double(r.original_max_position_embeddings);
  s.yarn_beta_fast = r.beta_fast;
  s.yarn_beta_slow = r.beta_slow;
  s.yarn_truncate = r.truncate;
  s.attention_factor = r.attention_factor;
  return s;
}

}  // namespace pypto
