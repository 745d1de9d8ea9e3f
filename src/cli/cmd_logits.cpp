// `pypto-serving logits`: float32 logits for every position of a prompt, written as a numpy .npy
// array [positions, vocab], so users and tests can compare the engine with other implementations
// (tests/reference/qwen3_reference.py).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/npy_writer.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/log.h"
#include "io/checkpoint.h"
#include "io/json_fields.h"
#include "kernels/backend.h"
#include "model/gdn_prefill.h"
#include "model/prompt_logits.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"
#include "tokenizer/tokenizer.h"

namespace pypto::cli {

namespace {

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find(',', i);
    if (j == std::string::npos) j = text.size();
    std::string item = text.substr(i, j - i);
    auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
    while (!item.empty() && blank(item.front())) item.erase(item.begin());
    while (!item.empty() && blank(item.back())) item.pop_back();
    if (!item.empty()) {
      size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || v < 0 || v > INT32_MAX) fail("--token-ids: '", item, "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
    i = j + 1;
  }
  if (ids.empty()) fail("--token-ids: no token ids given");
  return ids;
}

}  // namespace

int cmd_logits(int argc, char** argv) {
  CLI::App app{"Write float32 logits for every position of a prompt as a numpy .npy [positions, vocab]",
               "pypto-serving logits"};
  std::string model_dir, token_ids, prompt, out, kv_dtype = "bf16";
  int threads = 0, chunk = 0;
  bool scalar = false;
  std::string precision = matmul_precision_name(kDefaultMatmulPrecision);
  app.add_option("--model", model_dir, "checkpoint directory (config.json, *.safetensors)")->required();
  auto* ids_opt = app.add_option("--token-ids", token_ids, "comma-separated token ids, e.g. 1,2,3");
  auto* prompt_opt =
      app.add_option("--prompt", prompt, "text, encoded as is with the checkpoint's tokenizer (no chat template)");
  std::string ids_file;
  auto* file_opt = app.add_option("--token-ids-file", ids_file,
                                  "a file of comma-separated token ids (long prompts pass the 128 KiB argument limit)");
  ids_opt->excludes(prompt_opt);
  file_opt->excludes(ids_opt)->excludes(prompt_opt);
  app.add_option("--out", out, "output .npy file")->required();
  app.add_option("--kv-cache-dtype", kv_dtype, kKvCacheDtypeHelp)
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kKvCacheDtypeNames), std::end(kKvCacheDtypeNames))))
      ->capture_default_str();
  app.add_option("--threads", threads, "kernel threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--chunk", chunk, "prompt tokens per forward call (0 = all at once)")->check(CLI::NonNegativeNumber);
  int32_t last = 0;
  app.add_option("--last", last, "write only the last N positions' logits [N, vocab] (0 = every position)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--matmul-precision", precision, "inputs of the matrix products: highest, high or medium")
      ->check(CLI::IsMember({"highest", "high", "medium"}))
      ->capture_default_str();
  std::string gdn_prefill = "recurrent";
  app.add_option("--gdn-prefill", gdn_prefill, kGdnPrefillHelp)
      ->check(CLI::IsMember({"recurrent", "chunked"}))
      ->capture_default_str();
  app.add_flag("--scalar-kernels", scalar, "use the scalar reference kernels (slow; for checking)");
  std::string quantization = "none";
  int group = 64;
  app.add_option("--quantization", quantization, "quantize while staging: none, int8, int4")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->capture_default_str();
  std::string hf_overrides;
  app.add_option("--hf-overrides", hf_overrides, "JSON object whose top-level keys replace config.json's (as serving does)");
  app.add_option("--quantization-group", group, "int4: inputs per scale and zero point")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    if (ids_opt->count() == 0 && prompt_opt->count() == 0 && file_opt->count() == 0)
      fail("give --token-ids, --token-ids-file or --prompt");
    if (file_opt->count() > 0) token_ids = read_text_file(ids_file);
    // The prompt is encoded as given (no chat template, no special tokens added).
    const std::vector<int32_t> ids =
        prompt_opt->count() > 0 ? Tokenizer::load(model_dir)->encode(prompt) : parse_token_ids(token_ids);
    if (ids.empty()) fail("--prompt: the text encodes to no tokens");

    auto ck = Checkpoint::open(model_dir, hf_overrides);
    check_gdn_prefill(ck->config(), parse_gdn_prefill(gdn_prefill));
    const int nthreads = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
    const MatmulPrecision prec = parse_matmul_precision(precision);
    // --scalar-kernels: the reference definition of what this CPU's kernels compute at `prec`.
    std::unique_ptr<Backend> backend =
        scalar ? make_reference_backend(cpu_quant_activations(prec)) : make_cpu_backend(nthreads, {}, prec);
    StagingOptions sopt;
    sopt.quantization = parse_quantization(quantization);
    sopt.int4_group = group;
    Qwen3Weights weights = stage_qwen3_weights(*ck, *backend, sopt);
    weights.gdn_prefill = parse_gdn_prefill(gdn_prefill);
    Qwen3Model model(weights, *backend);

    PromptLogitsOptions popt;
    popt.kv_dtype = parse_kv_cache_dtype(kv_dtype);
    popt.chunk = chunk;
    popt.last = last;
    const std::vector<float> logits = prompt_logits(model, ids, popt);
    const int64_t rows = int64_t(logits.size()) / model.vocab_size();
    write_npy_f32(out, logits.data(), rows, model.vocab_size());
    log_info("logits: wrote [", rows, ", ", model.vocab_size(), "] to ", out, " (backend ", backend->name(),
             ", weights ", weights.weight_formats,
             weights.layer_format == WeightFormat::Float ? "" : ", ",
             quantized_activations(weights.layer_format, *backend),
             ", kv ", kv_dtype, ")");
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "pypto-serving logits: %s\n", e.what());
    return 1;
  }
}

}  // namespace pypto::cli
