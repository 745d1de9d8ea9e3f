#pragma once
// Internal factory of the optimised CPU backend for a given ISA, so tests and benchmarks can run
// the AVX2 kernels on an AVX-512 machine (make_cpu_backend picks cpu_isa() itself).
#include <memory>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/backend.h"

namespace pypto {

// make_cpu_backend() maps MatmulPrecision (kernels/backend.h) onto these; both false = Highest.
struct CpuBackendOptions {
  // Medium: round activations to bf16 inside linear and use AVX512_BF16 dot products (only for
  // bf16 weights on the AVX-512 ISA; the f32 path elsewhere). About twice the prefill compute
  // rate, but x keeps 8 significant bits instead of 24 (see tests/kernels and the report).
  bool bf16_activations = false;
  // High (the default precision): split activations x ≈ hi + lo (two bf16 each) and two
  // VDPBF16PS per 32 k (bf16 weights, AVX-512 only): ~16 significant bits of x at the f32-FMA
  // multiply-add rate, with W read as stored. Ignored when bf16_activations is set.
  bool split_bf16_activations = false;
  // Int8 / Int4 weights (kernels/backend.h QuantActivations): Bf16Pair (High) where the ISA has
  // AVX512_BF16, Int8 (Medium) where it has AVX512_VNNI; else f32 activations.
  QuantActivations quant_activations = QuantActivations::F32;
  // The kernel for bf16 weights when one of the above is set (backend.h CpuLinearKernel).
  CpuLinearKernel linear_kernel = CpuLinearKernel::Auto;
};

// CpuLinearKernel::Auto without AMX takes the bf16 dot product where this is true (AMD: VDPBF16PS at
// twice the f32 FMA rate), f32 FMA elsewhere: a fixed rule of the CPU, never a timing, so a
// command's results do not depend on how loaded the machine was when it started.
bool bf16dot_at_full_rate(const CpuFeatures& f);

// isa must be supported by this CPU; Isa::Scalar gives the reference backend. num_threads <= 0
// means one per usable core.
std::unique_ptr<Backend> make_cpu_backend_for_isa(Isa isa, int num_threads, const std::vector<int>& cores = {},
                                                  const CpuBackendOptions& options = {});

}  // namespace pypto
