#pragma once
// The command lines of `bench soak` and `bench fairness`: their flags, the server they start when
// no --url is given, and the exit code (non-zero when the soak fails a check).
#include <CLI/CLI.hpp>

#include "cli/bench_fairness.h"
#include "cli/bench_soak.h"

namespace pypto::cli {

// Where the server comes from: --url, or --model DIR [--server-args ...] started here.
struct ServerFlags {
  std::string url;
  std::string model;        // with --url: the served name (default: the first /v1/models id); else a checkpoint dir
  std::string server_args;
  std::string out = "";
  int server_pid = -1;      // with --url: the server's pid, for the RSS / fd figures
  double ready_timeout_s = 600;
};

struct SoakCommand {
  CLI::App* app = nullptr;
  ServerFlags server;
  bench::SoakOptions soak;
};
struct FairnessCommand {
  CLI::App* app = nullptr;
  ServerFlags server;
  bench::FairnessOptions fair;
  std::string heavies = "n64,long-prompt,slow-grammar";
};

SoakCommand add_soak_command(CLI::App& bench);
FairnessCommand add_fairness_command(CLI::App& bench);
int run_soak_command(SoakCommand& c);
int run_fairness_command(FairnessCommand& c);

}  // namespace pypto::cli
