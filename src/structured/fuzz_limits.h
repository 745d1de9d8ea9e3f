#pragma once
// The limits that bound a grammar's compile work (automaton states, compile steps, determinized
// states and configurations, length products, oneOf comparisons) are divided by
// kFuzzWorkDivisor in the fuzz build (PYPTO_FUZZ_LIMITS, set by cmake/pypto.cmake for
// scripts/fuzz.sh). Why: under address + undefined sanitizers one grammar at the release limits
// (EBNF rules doubling 25 times, stopped at kMaxNfaStates) takes ~70 s on a loaded 2-core host
// against ~1.3 s in release, past libFuzzer's 30 s per-input timeout, so a short CTest fuzz run
// failed whenever a mutation reached a limit. Divided, every limit is still reached and refused
// by name, within a few seconds. Release builds keep the documented limits (docs/api.md).
#include <cstdint>

namespace pypto::structured {

#ifdef PYPTO_FUZZ_LIMITS
inline constexpr int64_t kFuzzWorkDivisor = 16;
#else
inline constexpr int64_t kFuzzWorkDivisor = 1;
#endif

}  // namespace pypto::structured
