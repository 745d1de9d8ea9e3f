// pypto-serving: serve mode (default), offline mode (--prompt), and helper subcommands given as
// the first argument.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "core/error.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Subcommand kSubcommands[] = {
    {"make-test-model", pypto::cli::cmd_make_test_model, "write a random-weight Qwen3 checkpoint (real shapes, real tokenizer)"},
    {"inspect", pypto::cli::cmd_inspect, "print a checkpoint's config, tensors, sizes and memory needed"},
    {"tokenize", pypto::cli::cmd_tokenize, "encode/decode text or render a chat with the model's tokenizer"},
    {"logits", pypto::cli::cmd_logits, "write the logits of every position of a prompt as .npy"},
    {"embed", pypto::cli::cmd_embed, "embeddings (or reranker scores) of texts or a JSONL file, as JSONL or .npy"},
    {"bench", pypto::cli::cmd_bench, "benchmarks: serve (OpenAI-API load generator), latency, throughput"},
};

void print_subcommands() {
  std::fprintf(stderr, "subcommands (pypto-serving <subcommand> --help):\n");
  for (const auto& s : kSubcommands) std::fprintf(stderr, "  %-16s %s\n", s.name, s.help);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && argv[1][0] != '-') {
      for (const auto& s : kSubcommands) {
        if (std::strcmp(argv[1], s.name) == 0) {
          // The subcommand sees "pypto-serving <name>" as its argv[0].
          std::string self = std::string("pypto-serving ") + s.name;
          argv[1] = self.data();
          return s.run(argc - 1, argv + 1);
        }
      }
      std::fprintf(stderr, "pypto-serving: unknown subcommand '%s'\n", argv[1]);
      print_subcommands();
      return 2;
    }
    return pypto::cli::cmd_run(argc, argv);
  } catch (const pypto::Error& e) {
    std::fprintf(stderr, "pypto-serving: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    // Not a user error the code foresaw (those are pypto::Error): say so instead of aborting.
    std::fprintf(stderr, "pypto-serving: internal error (please report): %s\n", e.what());
    return 1;
  }
}
