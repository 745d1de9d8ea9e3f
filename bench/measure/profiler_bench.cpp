// Cost of the profiling hooks (core/profiler.h). "off": the branch every hook costs when
// profiling is off — compare with the empty loop. "on": a span or op mark that is recorded.
// A decode step of a 28-layer model runs ~16 hooks per layer, so a hook's cost × 450 is the
// per-step overhead at --profile-level kernel.
#include <benchmark/benchmark.h>

#include "core/profiler.h"

namespace {

using pypto::prof::Level;

void BM_empty_loop(benchmark::State& st) {
  int x = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(x);
    x++;
  }
}
BENCHMARK(BM_empty_loop);

void BM_span_off(benchmark::State& st) {
  pypto::prof::set_level(Level::Off);
  int x = 0;
  for (auto _ : st) {
    PYPTO_PROF_SPAN(Level::Kernel, "layer");
    benchmark::DoNotOptimize(x);
    x++;
  }
}
BENCHMARK(BM_span_off);

void BM_op_off(benchmark::State& st) {
  pypto::prof::set_level(Level::Off);
  int x = 0;
  for (auto _ : st) {
    PYPTO_PROF_OP("mlp.down");
    benchmark::DoNotOptimize(x);
    x++;
  }
}
BENCHMARK(BM_op_off);

// Spans with a phase each, recorded; the buffer is drained every 64k events so memory stays flat.
void BM_span_with_op_on(benchmark::State& st) {
  pypto::prof::set_level(Level::Kernel);
  int64_t n = 0;
  for (auto _ : st) {
    {
      PYPTO_PROF_SPAN(Level::Kernel, "layer", "norm.input", 0, "op");
      PYPTO_PROF_OP("mlp.down");
    }
    if (++n % 16384 == 0) {
      st.PauseTiming();
      pypto::prof::reset();
      st.ResumeTiming();
    }
  }
  pypto::prof::set_level(Level::Off);
  pypto::prof::reset();
  st.counters["events_per_iter"] = 3;
}
BENCHMARK(BM_span_with_op_on);

void BM_op_on(benchmark::State& st) {
  pypto::prof::set_level(Level::Kernel);
  PYPTO_PROF_SPAN(Level::Kernel, "layer", "norm.input", 0, "op");
  int64_t n = 0;
  for (auto _ : st) {
    PYPTO_PROF_OP("mlp.down");
    if (++n % 65536 == 0) {
      st.PauseTiming();
      pypto::prof::reset();
      st.ResumeTiming();
    }
  }
  pypto::prof::set_level(Level::Off);
  pypto::prof::reset();
}
BENCHMARK(BM_op_on);

}  // namespace
