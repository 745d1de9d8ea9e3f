#include "core/cpu_features.h"

#include <cpuid.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace pypto {

static CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) f.vendor_amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "AuthenticAMD"
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
    f.avx512_vbmi = zmm_ok && (c & bit_AVX512VBMI);
    // cpuid.7.0 EDX: 22 AMX-BF16, 24 AMX-TILE, 25 AMX-INT8.
    f.amx_bf16 = d & (1u << 22);
    f.amx_tile = d & (1u << 24);
    f.amx_int8 = d & (1u << 25);
    f.amx_os_state = (xcr0 & (3ull << 17)) == (3ull << 17);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx512_bf16 = zmm_ok && (a & bit_AVX512BF16);
    f.avx_vnni = ymm_ok && (a & (1u << 4));
  }
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

namespace {
// Linux: arch_prctl codes of the dynamically enabled tile data state (asm/prctl.h, since 5.16).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

enum class AmxGrant { Absent, Refused, Granted };

AmxGrant request_amx() {
  const CpuFeatures& f = cpu_features();
  if (!(f.amx_tile && f.amx_bf16 && f.amx_int8 && f.amx_os_state)) return AmxGrant::Absent;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    log_warn("AMX: the kernel refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ", std::strerror(errno),
             "); matrix products use the AVX-512 kernels");
    return AmxGrant::Refused;
  }
  return AmxGrant::Granted;
}

AmxGrant amx_grant() {
  static const AmxGrant g = request_amx();
  return g;
}
}  // namespace

bool amx_usable() { return amx_grant() == AmxGrant::Granted; }

std::string amx_status() {
  switch (amx_grant()) {
    case AmxGrant::Absent: return "amx absent";
    case AmxGrant::Refused: return "amx refused by the OS";
    case AmxGrant::Granted: return "amx-bf16+int8";
  }
  return "?";
}

int cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return 1;
}

}  // namespace pypto
