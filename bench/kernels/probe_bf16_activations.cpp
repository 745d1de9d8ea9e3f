// Measures what rounding activations to bf16 inside linear (CpuBackendOptions::bf16_activations)
// does to a whole model's logits: runs the same prompt through the default f32-activation CPU
// backend and the bf16-activation one (fp32 KV both) and prints max |Δlogit| / max(1, max|logit|),
// the quantity the reference test bounds by 1e-3, and the prefill rate of each; then the f32
// backend's token-by-token rate (one forward call per token, i.e. decode steps over a growing
// context). Rates are given per wall second and per CPU second of the process (with THREADS=1
// the latter is what one core does when it is not shared with other processes).
//   probe_bf16_activations MODEL_DIR [PROMPT_LEN=64] [THREADS=2] [bf16|split]
// (split: CpuBackendOptions::split_bf16_activations instead of bf16_activations)
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "io/checkpoint.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/prompt_logits.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"

using namespace pypto;

static double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Timing {
  double wall = 0, cpu = 0;
};

static std::vector<float> run(const Checkpoint& ck, Backend& be, const std::vector<int32_t>& ids, Timing* prefill,
                              Timing* decode) {
  StagingOptions so;
  so.show_progress = false;
  Qwen3Weights w = stage_qwen3_weights(ck, be, so);
  Qwen3Model model(w, be);
  PromptLogitsOptions po;
  po.kv_dtype = DType::F32;
  prompt_logits(model, ids, po);  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_now();
  auto out = prompt_logits(model, ids, po);
  prefill->wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  prefill->cpu = cpu_now() - c0;
  if (decode) {
    po.chunk = 1;
    t0 = std::chrono::steady_clock::now();
    c0 = cpu_now();
    prompt_logits(model, ids, po);
    decode->wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    decode->cpu = cpu_now() - c0;
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [PROMPT_LEN] [THREADS]\n", argv[0]);
    return 2;
  }
  const int len = argc > 2 ? std::atoi(argv[2]) : 64, threads = argc > 3 ? std::atoi(argv[3]) : 2;
  auto ck = Checkpoint::open(argv[1]);
  std::mt19937 rng(7);
  std::vector<int32_t> ids(len);
  for (auto& t : ids) t = static_cast<int32_t>(rng() % 151643);
  auto f32 = make_cpu_backend_for_isa(cpu_isa(), threads);
  const bool split = argc > 4 && std::string(argv[4]) == "split";
  CpuBackendOptions o;
  o.bf16_activations = !split;
  o.split_bf16_activations = split;
  auto bf = make_cpu_backend_for_isa(cpu_isa(), threads, {}, o);
  Timing p_f32, p_bf, d_f32;
  auto a = run(*ck, *f32, ids, &p_f32, &d_f32);
  auto b = run(*ck, *bf, ids, &p_bf, nullptr);
  double max_logit = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(double(a[i])));
    max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
  }
  std::printf("%s vs %s, %d tokens, %d threads: max|logit| %.4f, max|dlogit| %.4g, dlogit / max(1, max|logit|) "
              "= %.3g (limit 1e-3)\n",
              f32->name(), bf->name(), len, threads, max_logit, max_diff, max_diff / std::max(1.0, max_logit));
  std::printf("prefill %d tokens: %s %.1f tok/s wall, %.1f tok/CPU-s; %s %.1f tok/s wall, %.1f tok/CPU-s\n", len,
              f32->name(), len / p_f32.wall, len / p_f32.cpu, bf->name(), len / p_bf.wall, len / p_bf.cpu);
  std::printf("token by token (decode steps, context 1..%d), f32: %.2f tok/s wall, %.2f tok/CPU-s\n", len,
              len / d_f32.wall, len / d_f32.cpu);
  return 0;
}
