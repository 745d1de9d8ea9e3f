// Serve mode (default) and offline mode (--prompt): the seed's command line.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace pypto::cli {

int cmd_run(int argc, char** argv) {
  fail("serve and offline generation modes are not built yet (engine issue); use a subcommand");
}

}  // namespace pypto::cli
