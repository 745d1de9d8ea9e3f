#pragma once
// Subcommands of the pypto-serving binary, given as its first argument. Each takes the argv that
// follows the subcommand name (argv[0] is "pypto-serving <name>") and returns the exit code.
namespace pypto::cli {

int cmd_make_test_model(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_embed(int argc, char** argv);  // cmd_embed.cpp: embeddings / reranker scores offline
int cmd_bench(int argc, char** argv);
// No subcommand: serve mode, or offline generation when --prompt is given.
int cmd_run(int argc, char** argv);

}  // namespace pypto::cli
