// Peak vs final resident memory of layer-by-layer weight staging.
//
//   bench_staging --model DIR [--tp N --rank R] [--quantization int8|int4 [--quantization-group G]]
//   bench_staging --model DIR --compile-cache DIR     cold vs warm start (medians of 5)
//
// Loads DIR (make it with `pypto-serving make-test-model --preset qwen3-0.6b --out DIR`), stages
// its weights for the CPU backend, and reports the process's RSS before, its high-water mark
// during staging and its RSS after, against the bound peak ≤ final + 2 × largest layer. Runs in a
// fresh process so VmHWM measures staging alone. Prints one JSON line at the end for scripts.
#include <algorithm>
#include <chrono>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/memory.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/weight_staging.h"

using namespace pypto;

// Start-up time (checkpoint open + weights ready) without the cache (cold: staging from the
// checkpoint) and with a warm cache entry, medians of 5 runs each; the checkpoint's pages are in
// the OS page cache in both cases after the first run.
static WeightFormat g_quant = WeightFormat::Float;  // --quantization
static int g_group = 64;                           // --quantization-group
static int g_threads = 1;                          // --threads: the backend's worker threads
static int g_runs = 5;                             // --runs: timed runs each way (medians)

static int compare_compile_cache(const std::string& model, const std::string& dir) {
  auto backend = make_cpu_backend(g_threads);
  auto time_once = [&](bool cached, bool* hit) {
    auto t0 = std::chrono::steady_clock::now();
    auto ck = Checkpoint::open(model);
    StagingOptions opt;
    opt.show_progress = false;
    opt.quantization = g_quant;
    opt.int4_group = g_group;
    if (cached) opt.compile_cache_dir = dir;
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, opt);
    *hit = w.from_compile_cache;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  bool hit = false;
  time_once(false, &hit);  // bring the checkpoint into the page cache
  std::vector<double> cold, warm;
  for (int i = 0; i < g_runs; i++) cold.push_back(time_once(false, &hit));
  double first = time_once(true, &hit);  // miss: stage + store
  if (hit) std::printf("note: the cache already held this entry\n");
  for (int i = 0; i < g_runs; i++) {
    warm.push_back(time_once(true, &hit));
    if (!hit) {
      std::fprintf(stderr, "bench_staging: expected a compile-cache hit\n");
      return 1;
    }
  }
  std::printf("model            %s\n", model.c_str());
  std::printf("cold start       %.3f s (staging from the checkpoint, median of %d)\n", median(cold), g_runs);
  std::printf("first cached run %.3f s (staging + writing the entry)\n", first);
  std::printf("warm start       %.3f s (compile-cache hit, median of %d): %.2fx\n", median(warm), g_runs,
              median(cold) / median(warm));
  std::printf("{\"cold_s\": %.4f, \"warm_s\": %.4f, \"first_cached_s\": %.4f}\n", median(cold), median(warm), first);
  return 0;
}

int main(int argc, char** argv) {
  std::string model;
  int tp = 1, rank = 0;
  std::string cache_dir, quantization = "none";
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
    else if (!std::strcmp(argv[i], "--tp") && i + 1 < argc) tp = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rank") && i + 1 < argc) rank = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--compile-cache") && i + 1 < argc) cache_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization") && i + 1 < argc) quantization = argv[++i];
    else if (!std::strcmp(argv[i], "--quantization-group") && i + 1 < argc) g_group = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) g_threads = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) g_runs = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: bench_staging --model DIR [--tp N --rank R]\n");
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "usage: bench_staging --model DIR [--tp N --rank R]\n");
    return 2;
  }
  try {
    g_quant = parse_quantization(quantization);
    if (!cache_dir.empty()) return compare_compile_cache(model, cache_dir);
    auto backend = make_cpu_backend(1);
    const size_t rss0 = rss_bytes();
    auto t0 = std::chrono::steady_clock::now();
    auto ck = Checkpoint::open(model);
    const ModelConfig& c = ck->config();
    // Largest layer as it sits in the checkpoint (the unit staging reads at a time).
    size_t largest_layer = 0;
    for (int l = 0; l < c.num_hidden_layers; l++) {
      size_t bytes = 0;
      std::string prefix = "model.layers." + std::to_string(l) + ".";
      for (const auto& name : ck->tensor_names())
        if (name.rfind(prefix, 0) == 0) bytes += ck->get(name).info->end - ck->get(name).info->begin;
      largest_layer = std::max(largest_layer, bytes);
    }
    StagingOptions opt;
    opt.tp_rank = rank;
    opt.tp_size = tp;
    opt.quantization = g_quant;
    opt.int4_group = g_group;
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, opt);
    // A layer as staged (quantized formats are smaller than in the checkpoint): the tighter bound.
    const StagedFormats fmts = staged_formats(*ck, g_quant, g_group);
    const size_t staged_layer = c.num_hidden_layers > 0
        ? (w.resident_bytes - staged_slab_bytes(*ck, *backend, rank, tp, 0, &fmts)) / size_t(c.num_hidden_layers) : 0;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const size_t peak = peak_rss_bytes(), final_rss = rss_bytes();
    const size_t bound = final_rss + 2 * largest_layer;
    char a[32], b[32], cbuf[32], d[32], e[32];
    std::printf("model            %s (%d layers, tp %d rank %d)\n", model.c_str(), c.num_hidden_layers, tp, rank);
    std::printf("staged slab      %s in %.2f s (%.2f GB/s)\n", format_bytes(w.resident_bytes, a, sizeof a), secs,
                ck->total_tensor_bytes() / secs / 1e9);
    std::printf("rss before       %s\n", format_bytes(rss0, b, sizeof b));
    std::printf("peak rss         %s\n", format_bytes(peak, cbuf, sizeof cbuf));
    std::printf("final rss        %s\n", format_bytes(final_rss, d, sizeof d));
    std::printf("weights          %s\n", w.weight_formats.c_str());
    std::printf("largest layer    %s (checkpoint), %s (staged)\n", format_bytes(largest_layer, e, sizeof e),
                format_bytes(staged_layer, a, sizeof a));
    std::printf("staged bound     peak <= final + 2 x staged layer = %s: %s\n",
                format_bytes(final_rss + 2 * staged_layer, b, sizeof b), peak <= final_rss + 2 * staged_layer ? "OK" : "EXCEEDED");
    std::printf("bound            peak <= final + 2 x largest layer = %s: %s (peak - final = %.1f MiB)\n",
                format_bytes(bound, a, sizeof a), peak <= bound ? "OK" : "EXCEEDED",
                (static_cast<double>(peak) - static_cast<double>(final_rss)) / (1 << 20));
    std::printf("{\"peak_rss\": %zu, \"final_rss\": %zu, \"largest_layer\": %zu, \"slab\": %zu, \"seconds\": %.3f, "
                "\"within_bound\": %s}\n",
                peak, final_rss, largest_layer, w.resident_bytes, secs, peak <= bound ? "true" : "false");
    return peak <= bound ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_staging: error: %s\n", e.what());
    return 1;
  }
}
