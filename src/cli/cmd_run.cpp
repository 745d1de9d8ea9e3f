// Serve mode (default) and offline mode (--prompt): the seed's command line.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/offline.h"
#include "cli/run_options.h"
#include "cli/serve_mode.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "model/test_model.h"

namespace pypto::cli {

int cmd_run(int argc, char** argv) {
  CLI::App app{"pypto-serving: serve Qwen3 models over an OpenAI-compatible HTTP API (default), or generate offline "
               "with --prompt.\nSubcommands: make-test-model, inspect, tokenize, logits (pypto-serving <subcommand> "
               "--help)."};
  RunOptions o;
  add_run_options(app, o);
  ServerOptions so;
  add_serve_options(app, so);
  CLI11_PARSE(app, argc, argv);
  validate_run_options(o);

  std::string model_dir = o.model;
  if (model_dir.empty()) {
    model_dir = ensure_default_model(Progress::enabled());
    log_warn("no --model given: using the built-in default model at ", model_dir,
             " (RANDOM WEIGHTS, qwen3-0.6b shapes, 4 layers: its text is meaningless)");
  }
  if (!o.prompts.empty() || !o.prompt_token_ids.empty()) return run_offline(o, model_dir);
  return run_serve(o, so, model_dir);
}

}  // namespace pypto::cli
