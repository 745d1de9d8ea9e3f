#pragma once
// The RoPE the model applies (kernels/rope_spec.h), from config.json's rope_theta and
// rope_scaling (io/rope_scaling.h).
#include "io/model_config.h"
#include "kernels/rope_spec.h"

namespace pypto {

RopeSpec rope_from_config(const ModelConfig& c);

}  // namespace pypto
