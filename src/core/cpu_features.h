#pragma once
// CPU instruction-set detection (cpuid + xgetbv) used to pick kernels at run time.
#include <string>

namespace pypto {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
  bool avx512_vbmi = false;  // VPERMI2B and friends (Ice Lake, Sapphire Rapids, Zen 4 and later)
  bool avx_vnni = false;  // VEX-encoded VPDPBUSD (Alder Lake and later, Zen 5)
  // AMX: the cpuid bits (tile registers, bf16 and int8 tile products) and whether the OS saves
  // the tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA). Usable only once Linux has also
  // granted this process the tile data state: amx_usable().
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool amx_os_state = false;
  // cpuid.0's vendor string: which kernel is faster where rates differ by family (VDPBF16PS runs at
  // twice the f32 FMA rate on AMD Zen 4 / Zen 5, at half of it on Intel Xeons).
  bool vendor_amd = false;
};

const CpuFeatures& cpu_features();
// Best ISA this CPU supports, capped by $PYPTO_ISA (scalar|avx2|avx512) when set, so tests and
// benchmarks can force a lower path. Asking for more than the CPU has is an error.
Isa cpu_isa();
const char* isa_name(Isa isa);
int cpu_count();

// True when AMX-BF16 and AMX-INT8 tile products can run in this process: the cpuid bits, the OS
// tile state in XCR0, and Linux's per-process grant of the tile data state
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), requested once on the first call. A
// refusal is logged once (with errno) and the caller takes the AVX-512 kernels; never a crash.
bool amx_usable();
// One line for logs and --help: "amx-bf16+int8 (granted)", "amx absent", "amx refused by the OS".
std::string amx_status();  // online cores usable by this process (sched_getaffinity)

}  // namespace pypto
