#pragma once
// Offline mode: run every --prompt through one engine concurrently and print (and optionally
// write as JSON) each one's text, token ids and finish reason, then the total throughput.
#include "cli/run_options.h"

namespace pypto::cli {

int run_offline(const RunOptions& o, const std::string& model_dir);

}  // namespace pypto::cli
