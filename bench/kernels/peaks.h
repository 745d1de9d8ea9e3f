#pragma once
// The measured compute peaks with their wall-clock and per-CPU-second figures (peaks.cpp).
namespace pypto::bench {

struct Peak {
  double wall = 0, per_cpu = 0;  // flops/s (ops/s for int8)
};
Peak bf16_peak();
Peak f32_peak();
Peak amx_bf16_peak();
Peak amx_int8_peak();

}  // namespace pypto::bench
