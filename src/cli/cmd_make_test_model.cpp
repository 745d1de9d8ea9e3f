// pypto-serving make-test-model: random-weight Qwen3 checkpoints with real shapes.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "model/test_model.h"

namespace pypto::cli {

int cmd_make_test_model(int argc, char** argv) {
  CLI::App app{"Write a Hugging Face-layout Qwen3 checkpoint with random weights, real Qwen3 shapes and the real "
               "Qwen3 tokenizer files."};
  TestModelOptions opt;
  std::string dtype = "bf16";
  int layers = 0;
  bool no_qk_norm = false;
  app.add_option("--preset", opt.preset, "model shape")
      ->check(CLI::IsMember(test_model_presets()))
      ->capture_default_str();
  app.add_option("--layers", layers, "number of layers (default: the preset's)")->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype, "weight dtype")->check(CLI::IsMember({"bf16", "f16", "f32"}))->capture_default_str();
  app.add_option("--shards", opt.shards, "number of safetensors files (index written when > 1)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--no-qk-norm", no_qk_norm, "omit q_norm/k_norm (they load as ones)");
  app.add_flag("--qwen2", opt.qwen2, "write a Qwen2ForCausalLM checkpoint (q/k/v biases, no QK norm)");
  app.add_option("--seed", opt.seed, "random seed")->capture_default_str();
  app.add_option("--out", opt.out_dir, "output directory")->required();
  CLI11_PARSE(app, argc, argv);
  if (layers > 0) opt.layers = layers;
  opt.qk_norm = !no_qk_norm;
  dtype_parse(dtype, &opt.dtype);
  make_test_model(opt);
  std::printf("wrote %s (preset %s%s, %s, %d shard%s, seed %llu)\n", opt.out_dir.c_str(), opt.preset.c_str(),
              layers > 0 ? (", " + std::to_string(layers) + " layers").c_str() : "", dtype.c_str(), opt.shards,
              opt.shards == 1 ? "" : "s", static_cast<unsigned long long>(opt.seed));
  return 0;
}

}  // namespace pypto::cli
