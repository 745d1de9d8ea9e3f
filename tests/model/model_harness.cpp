#include "model_harness.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "core/error.h"
#include "model/test_model_cache.h"
#include "model/weight_staging.h"

namespace fs = std::filesystem;

namespace pypto::test {

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
  if (!f) fail("cannot write ", p.string());
}

}  // namespace

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::string ensure_test_model(const std::string& name, TestModelOptions opt) {
  opt.show_progress = false;
  return cached_test_model((fs::path(PYPTO_BINARY_DIR) / "test_models").string(), name, std::move(opt));
}

std::vector<int32_t> random_prompt(int n, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 17);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 151643);
  return ids;
}

std::string torch_python() {
  if (const char* p = std::getenv("PYPTO_PYTHON"); p && *p) return p;
  return PYPTO_TORCH_PYTHON;
}

ReferenceRun run_reference(const std::string& model_dir, const std::vector<std::vector<int32_t>>& prompts,
                           int greedy_n) {
  const std::string python = torch_python();
  PYPTO_ASSERT(!python.empty(), "no Python with torch: callers skip first");
  std::string prompt_text;
  for (const auto& p : prompts) prompt_text += join_ids(p) + "\n";
  const std::string script = std::string(PYPTO_SOURCE_DIR) + "/tests/reference/qwen3_reference.py";
  // The cache key covers the inputs and the reference's own source, so editing it reruns it.
  const size_t key = std::hash<std::string>{}(prompt_text + "greedy=" + std::to_string(greedy_n) + read_text(script) +
                                              read_text(fs::path(PYPTO_SOURCE_DIR) / "tests/reference/checkpoint_reader.py"));
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016zx", key);
  const fs::path out = fs::path(model_dir + ".ref") / hex;
  build_directory_once(out.string(), [&](const std::string& tmp_dir) {
    const fs::path tmp(tmp_dir);
    write_text(tmp / "prompts.txt", prompt_text);
    const std::string cmd = str_cat("'", python, "' '", script, "' --model '", model_dir, "' --prompts '",
                                    (tmp / "prompts.txt").string(), "' --out-dir '", tmp.string(), "' --greedy ",
                                    greedy_n, " > '", (tmp / "log.txt").string(), "' 2>&1");
    if (std::system(cmd.c_str()) != 0) fail("reference failed: ", cmd, "\n", read_text(tmp / "log.txt"));
  });
  ReferenceRun run;
  for (size_t i = 0; i < prompts.size(); ++i) {
    run.logits.push_back(read_npy_f32((out / str_cat("logits_", i, ".npy")).string()));
    std::vector<int32_t> toks;
    if (greedy_n > 0) {
      std::stringstream ss(read_text(out / str_cat("greedy_", i, ".txt")));
      std::string item;
      while (std::getline(ss, item, ',')) toks.push_back(std::stoi(item));
    }
    run.greedy.push_back(std::move(toks));
  }
  return run;
}

std::unique_ptr<LoadedModel> load_model(const std::string& dir, bool scalar, int threads) {
  return load_model(dir, scalar, threads, StagingOptions{});
}

std::unique_ptr<LoadedModel> load_model(const std::string& dir, bool scalar, int threads, StagingOptions opt) {
  auto m = std::make_unique<LoadedModel>();
  m->checkpoint = Checkpoint::open(dir);
  m->backend = scalar ? make_reference_backend() : make_cpu_backend(threads);
  opt.show_progress = false;
  m->weights = stage_qwen3_weights(*m->checkpoint, *m->backend, opt);
  m->weights.state_slots = 4;  // hybrid models: room for the batch tests' sequences (ignored otherwise)
  m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  return m;
}

std::vector<int32_t> engine_greedy(Qwen3Model& model, const std::vector<int32_t>& prompt, int n, DType kv_dtype) {
  const int32_t bs = 16;
  const int32_t total = int32_t(prompt.size()) + n;
  const int32_t n_blocks = (total + bs - 1) / bs;
  KvCache cache(model.kv_cache_spec(n_blocks + 3, bs, kv_dtype));
  std::vector<int32_t> blocks(n_blocks);
  for (int32_t b = 0; b < n_blocks; ++b) blocks[b] = n_blocks + 2 - b;  // not the identity mapping
  const int64_t V = model.vocab_size();
  std::vector<float> logits(V);
  std::vector<int32_t> seq = prompt, out;
  ForwardBatch batch;
  int32_t done = 0;  // tokens already in the cache
  while (int(out.size()) < n) {
    const int32_t len = int32_t(seq.size()) - done;
    batch.clear();
    batch.max_blocks_per_seq = n_blocks;
    batch.add_sequence(seq.data() + done, len, done, blocks.data(), (done + len + bs - 1) / bs, bs,
                       ForwardBatch::Logits::Last);
    model.forward(batch, cache, logits.data());
    done += len;
    const int32_t tok = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(tok);
    seq.push_back(tok);
  }
  return out;
}

Diff compare(const float* a, const float* ref, size_t n) {
  Diff d;
  for (size_t i = 0; i < n; ++i) {
    double diff = std::fabs(double(a[i]) - double(ref[i]));
    if (std::isnan(diff)) diff = INFINITY;  // a NaN must fail the comparison, not vanish in max()
    d.max_abs_diff = std::max(d.max_abs_diff, diff);
    d.max_abs_ref = std::max(d.max_abs_ref, double(std::fabs(ref[i])));
  }
  return d;
}

}  // namespace pypto::test
