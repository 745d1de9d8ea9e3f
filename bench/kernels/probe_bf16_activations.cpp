// Measures what rounding activations to bf16 inside linear (CpuBackendOptions::bf16_activations)
// does to a whole model's logits: runs the same prompt through the default f32-activation CPU
// backend and the bf16-activation one (fp32 KV both) and prints max |Δlogit| / max(1, max|logit|),
// the quantity the reference test bounds by 1e-3, and the prefill time of each.
//   probe_bf16_activations MODEL_DIR [PROMPT_LEN=64] [THREADS=2]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "io/checkpoint.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/prompt_logits.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"

using namespace pypto;

static std::vector<float> run(const Checkpoint& ck, Backend& be, const std::vector<int32_t>& ids, double* secs) {
  StagingOptions so;
  so.show_progress = false;
  Qwen3Weights w = stage_qwen3_weights(ck, be, so);
  Qwen3Model model(w, be);
  PromptLogitsOptions po;
  po.kv_dtype = DType::F32;
  prompt_logits(model, ids, po);  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  auto out = prompt_logits(model, ids, po);
  *secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
  CpuBackendOptions o;
  o.bf16_activations = true;
  auto bf = make_cpu_backend_for_isa(cpu_isa(), threads, {}, o);
  double t_f32 = 0, t_bf = 0;
  auto a = run(*ck, *f32, ids, &t_f32);
  auto b = run(*ck, *bf, ids, &t_bf);
  double max_logit = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_logit = std::max(max_logit, std::fabs(double(a[i])));
    max_diff = std::max(max_diff, std::fabs(double(a[i]) - b[i]));
  }
  std::printf("%s vs %s, %d tokens: max|logit| %.4f, max|Δlogit| %.4g, ratio to tolerance scale %.3g "
              "(limit 1e-3); prefill %.1f vs %.1f tokens/s\n",
              f32->name(), bf->name(), len, max_logit, max_diff, max_diff / std::max(1.0, max_logit), len / t_f32,
              len / t_bf);
  return 0;
}
