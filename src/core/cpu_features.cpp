#include "core/cpu_features.h"

#include <cpuid.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace pypto {

static CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  bool osxsave = c & bit_OSXSAVE;
  f.fma = c & bit_FMA;
  f.f16c = c & bit_F16C;
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  bool ymm_ok = (xcr0 & 0x6) == 0x6;
  bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm_ok && (b & bit_AVX2);
    f.avx512f = zmm_ok && (b & bit_AVX512F);
    f.avx512bw = zmm_ok && (b & bit_AVX512BW);
    f.avx512vl = zmm_ok && (b & bit_AVX512VL);
    f.avx512dq = zmm_ok && (b & bit_AVX512DQ);
    f.avx512_vnni = zmm_ok && (c & bit_AVX512VNNI);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = zmm_ok && (a & bit_AVX512BF16);
  if (!ymm_ok) f.fma = f.f16c = false;
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

static Isa best_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16 && f.fma && f.f16c) return Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
  return Isa::Scalar;
}

Isa cpu_isa() {
  static const Isa isa = [] {
    Isa best = best_isa();
    const char* e = std::getenv("PYPTO_ISA");
    if (!e || !*e) return best;
    Isa want;
    if (!std::strcmp(e, "scalar")) want = Isa::Scalar;
    else if (!std::strcmp(e, "avx2")) want = Isa::Avx2;
    else if (!std::strcmp(e, "avx512")) want = Isa::Avx512;
    else fail("PYPTO_ISA='", e, "' is not one of scalar, avx2, avx512");
    if (static_cast<int>(want) > static_cast<int>(best))
      fail("PYPTO_ISA=", e, " but this CPU supports at most ", isa_name(best));
    return want;
  }();
  return isa;
}

int cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 1;
}

}  // namespace pypto
