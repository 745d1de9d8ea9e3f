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
  std::string dtype;
  std::string quant = "none";
  int layers = 0;
  bool no_qk_norm = false;
  app.add_option("--preset", opt.preset, "model shape")
      ->check(CLI::IsMember(test_model_presets()))
      ->capture_default_str();
  app.add_option("--layers", layers, "number of layers (default: the preset's)")->check(CLI::PositiveNumber);
  app.add_option("--dtype", dtype, "weight dtype (of the unquantized tensors with --quant-format) [default: bf16; "
                                   "f16 with --quant-format awq or gptq, as Qwen's AWQ and GPTQ-Int4 releases]")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  app.add_option("--quant-format", quant,
                 "write a pre-quantized checkpoint: fp8 (block FP8, 128x128 tiles, as Qwen/Qwen3-*-FP8), awq "
                 "(4-bit AWQ GEMM with zero points, as Qwen/Qwen3-*-AWQ) or gptq (4-bit symmetric GPTQ, v1 zero "
                 "points, as Qwen/Qwen3-*-GPTQ-Int4), from the same random weights; MoE presets keep the router "
                 "unquantized")
      ->check(CLI::IsMember({"none", "fp8", "awq", "gptq"}))
      ->capture_default_str();
  app.add_option("--quant-group", opt.quant_group,
                 "AWQ / GPTQ group size along in_features [default: 128, or the largest power of two dividing them "
                 "all]")
      ->check(CLI::PositiveNumber);
  app.add_option("--shards", opt.shards, "number of safetensors files (index written when > 1)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--no-qk-norm", no_qk_norm, "omit q_norm/k_norm (they load as ones)");
  app.add_flag("--qwen2", opt.qwen2, "write a Qwen2ForCausalLM checkpoint (q/k/v biases, no QK norm)");
  app.add_option("--outlier-channels", opt.outlier_channels,
                 "scale this many hidden channels of every input_layernorm / post_attention_layernorm weight by "
                 "--outlier-scale: activations with outlier channels, as Qwen3's")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--outlier-scale", opt.outlier_scale, "the factor of --outlier-channels")->capture_default_str();
  app.add_flag("--text-only", opt.text_only,
               "Qwen3.5 / Qwen3.6 presets: write the text-only Qwen3_5(Moe)ForCausalLM layout instead of the "
               "published vision-language wrapper (text_config, model.language_model.*)");
  app.add_option("--mtp", opt.mtp,
                 "hybrid presets (Qwen3.5 / Qwen3.6, Qwen3-Next): the MTP head's weights: random, oracle (the head drafts exactly what "
                 "the target emits: zero mixer / FFN output projections, fc passing the embedding through) or "
                 "oracle-perturbed (the same with another mtp.norm: partial acceptance) or oracle-hidden (the "
                 "oracle whose fc also adds the target's normed hidden row at 1/8: partial acceptance that "
                 "depends on the hidden rows)")
      ->check(CLI::IsMember({"random", "oracle", "oracle-perturbed", "oracle-hidden"}))
      ->capture_default_str();
  app.add_option("--eagle3", opt.eagle3,
                 "dense presets: also write an EAGLE-3 draft head into OUT/eagle3 (--speculative-config "
                 "'{\"method\": \"eagle3\", \"model\": \"OUT/eagle3\", ...}'): random, oracle (the target's "
                 "output projections zero so its next token depends only on the current one, and the head drafts "
                 "exactly that token) or oracle-half (the same oracle over the even token ids: partial acceptance)")
      ->check(CLI::IsMember({"random", "oracle", "oracle-half"}));
  app.add_option("--seed", opt.seed, "random seed")->capture_default_str();
  app.add_option("--out", opt.out_dir, "output directory")->required();
  CLI11_PARSE(app, argc, argv);
  if (layers > 0) opt.layers = layers;
  opt.qk_norm = !no_qk_norm;
  opt.quant = quant == "fp8"    ? QuantMethod::Fp8
              : quant == "awq"  ? QuantMethod::Awq
              : quant == "gptq" ? QuantMethod::Gptq
                                : QuantMethod::None;
  if (dtype.empty()) dtype = opt.quant == QuantMethod::Awq || opt.quant == QuantMethod::Gptq ? "f16" : "bf16";
  dtype_parse(dtype, &opt.dtype);
  make_test_model(opt);
  const std::string layers_text = layers > 0 ? ", " + std::to_string(layers) + " layers" : "";
  const std::string quant_text = opt.quant == QuantMethod::None ? "" : ", " + quant + " projections";
  std::printf("wrote %s (preset %s%s, %s%s, %d shard%s, seed %llu)\n", opt.out_dir.c_str(), opt.preset.c_str(),
              layers_text.c_str(), dtype.c_str(), quant_text.c_str(), opt.shards, opt.shards == 1 ? "" : "s",
              static_cast<unsigned long long>(opt.seed));
  return 0;
}

}  // namespace pypto::cli
