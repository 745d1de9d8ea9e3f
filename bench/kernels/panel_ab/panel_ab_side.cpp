// One side of panel_ab.sh: the column-panel linears (bf16 pair panels on f32 FMA, f16 panels) of
// one revision's headers, compiled into the ISA namespace PANEL_AB_NS so that two revisions link
// into one binary. Columns are split between OpenMP threads in whole panels, as the backend's
// column chunks are.
#define PYPTO_ISA_NS PANEL_AB_NS
#include <immintrin.h>
#include <omp.h>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/linear_bf16_panels_f32_impl.h"
#include "kernels/cpu/linear_f16_panels_impl.h"

#define PANEL_AB_CAT2(a, b) a##b
#define PANEL_AB_CAT(a, b) PANEL_AB_CAT2(a, b)

// y = x · Wᵀ for a LinearTask, W bf16 pair panels (f16 = false) or f16 panels (f16 = true).
void PANEL_AB_CAT(panel_linear_, PANEL_AB_NS)(const pypto::cpu::LinearTask& t, bool f16) {
#pragma omp parallel
  {
    const int th = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t panels = (t.n_out + 15) / 16, p0 = panels * th / nt, p1 = panels * (th + 1) / nt;
    const int64_t n1 = p1 * 16 < t.n_out ? p1 * 16 : t.n_out;
    if (f16)
      pypto::cpu::PANEL_AB_NS::linear_cols_f16_panels(t, p0 * 16, n1);
    else
      pypto::cpu::PANEL_AB_NS::linear_cols_bf16_panels_f32(t, p0 * 16, n1);
  }
}
