#pragma once
// Serve mode: the OpenAI-compatible HTTP server over dp replicas of tp ranks (src/serve).
#include <CLI/CLI.hpp>

#include "cli/run_options.h"
#include "serve/server.h"

namespace pypto::cli {

// Registers the server's own flags (--api-key, --max-queued-requests, ...) on `app`.
void add_serve_options(CLI::App& app, ServerOptions& so);
// Starts the server (503 on /health while loading), loads the engines, serves until SIGINT/SIGTERM.
int run_serve(const RunOptions& o, ServerOptions so, const std::string& model_dir);

}  // namespace pypto::cli
