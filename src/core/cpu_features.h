#pragma once
// CPU instruction-set detection (cpuid + xgetbv) used to pick kernels at run time.
#include <string>

namespace pypto {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
};

const CpuFeatures& cpu_features();
// Best ISA this CPU supports, capped by $PYPTO_ISA (scalar|avx2|avx512) when set, so tests and
// benchmarks can force a lower path. Asking for more than the CPU has is an error.
Isa cpu_isa();
const char* isa_name(Isa isa);
int cpu_count();  // online cores usable by this process (sched_getaffinity)

}  // namespace pypto
