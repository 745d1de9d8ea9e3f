// sample_row on one row of 151,936 logits (Qwen3's vocabulary) with the option sets clients
// send: greedy; temperature 1 alone (the OpenAI API's default); Qwen3's generation_config
// (temperature 0.6, top_k 20, top_p 0.95); top_p 0.9 alone; min_p 0.05; logprobs 5. Logits are a
// seeded, peaked random row (a few hundred plausible tokens over a long tail), copied fresh for
// each call (the sampler edits its row in place); the copy is timed too and reported alone as
// BM_SampleRow/copy, so the sampler's own time is the difference. µs per row.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace pypto {
namespace {

constexpr size_t kVocab = 151936;

std::vector<float> peaked_logits() {
  std::mt19937 rng(11);
  std::normal_distribution<float> tail(-4.0f, 2.0f);
  std::vector<float> x(kVocab);
  for (float& v : x) v = tail(rng);
  for (int i = 0; i < 300; ++i) x[(size_t(i) * 7919u) % kVocab] = 6.0f + 0.02f * float(i % 97);  // the plausible few
  return x;
}

struct Option {
  const char* name;
  SamplingParams params;
};

std::vector<Option> options() {
  std::vector<Option> o;
  SamplingParams p;
  p.temperature = 0.0f;
  o.push_back({"greedy", p});
  p = SamplingParams{};
  o.push_back({"temperature_1", p});
  p.temperature = 0.6f;
  p.top_k = 20;
  p.top_p = 0.95f;
  o.push_back({"qwen3_t0.6_k20_p0.95", p});
  p = SamplingParams{};
  p.top_p = 0.9f;
  o.push_back({"top_p_0.9", p});
  p = SamplingParams{};
  p.min_p = 0.05f;
  o.push_back({"min_p_0.05", p});
  p = SamplingParams{};
  p.logprobs = 5;
  o.push_back({"temperature_1_logprobs_5", p});
  return o;
}

void BM_SampleRow(benchmark::State& state) {
  const std::vector<float> logits = peaked_logits();
  std::vector<float> row(kVocab);
  const int which = int(state.range(0));
  if (which < 0) {  // the copy alone
    for (auto _ : state) {
      std::memcpy(row.data(), logits.data(), kVocab * sizeof(float));
      benchmark::DoNotOptimize(row.data());
      benchmark::ClobberMemory();
    }
    state.SetLabel("copy");
    return;
  }
  const Option opt = options()[size_t(which)];
  std::vector<int32_t> out_ids;
  SamplerRow r;
  r.params = &opt.params;
  r.output_token_ids = out_ids;
  r.seed = 1234;
  int64_t sum = 0;
  for (auto _ : state) {
    std::memcpy(row.data(), logits.data(), kVocab * sizeof(float));
    sum += sample_row(row, r).token_id;
    out_ids.push_back(0);  // a new draw each call (the draw counter is the output length)
    r.output_token_ids = out_ids;
  }
  benchmark::DoNotOptimize(sum);
  state.SetLabel(opt.name);
}
BENCHMARK(BM_SampleRow)->DenseRange(-1, 5)->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace
}  // namespace pypto
