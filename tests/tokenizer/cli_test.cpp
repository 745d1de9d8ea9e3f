// The `pypto-serving tokenize` subcommand end to end: JSON lines in and out, --text, --decode,
// --chat, and the exit code 2 with "line N" for bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tokenizer/test_data.h"

namespace pypto::test {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out, err;
};

// Runs the binary through the shell with `stdin_text` on its stdin.
CliResult run_cli(const std::string& args, const std::string& stdin_text) {
  const fs::path dir = fs::temp_directory_path() / ("pypto-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "in.txt", std::ios::binary) << stdin_text;
  }
  const std::string bin = std::string(PYPTO_BINARY_DIR) + "/src/cli/pypto-serving";
  const std::string cmd = "'" + bin + "' tokenize --model '" + qwen3_tokenizer_dir() + "' " + args + " < '" +
                          (dir / "in.txt").string() + "' > '" + (dir / "out.txt").string() + "' 2> '" +
                          (dir / "err.txt").string() + "'";
  CliResult r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(dir / "out.txt");
  r.err = slurp(dir / "err.txt");
  fs::remove_all(dir);
  return r;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(std::string(PYPTO_BINARY_DIR) + "/src/cli/pypto-serving")) {
      FAIL() << "pypto-serving is not built in " << PYPTO_BINARY_DIR;
    }
  }
};

TEST_F(TokenizeCli, EncodesJsonLines) {
  const CliResult r = run_cli("", "{\"text\": \"Hello world\"}\n\n{\"text\": \"<|im_start|>user\\nhi<|im_end|>\"}\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[9707,1879]}\n{\"ids\":[151644,872,198,6023,151645]}\n");
}

TEST_F(TokenizeCli, DecodesJsonLines) {
  CliResult r = run_cli("--decode", "{\"ids\": [151644, 9707, 1879]}\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"text\":\"<|im_start|>Hello world\"}\n");
  r = run_cli("--decode --skip-special-tokens", "{\"ids\": [151644, 9707, 1879]}\n");
  EXPECT_EQ(r.out, "{\"text\":\"Hello world\"}\n");
}

TEST_F(TokenizeCli, TextOption) {
  const CliResult r = run_cli("--text 'Hello world'", "");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[9707,1879]}\n");
}

TEST_F(TokenizeCli, BadLinesNameTheLineAndExitWith2) {
  CliResult r = run_cli("", "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n{\"text\": \"c\"}\n");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "{\"ids\":[64]}\n");
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  r = run_cli("--decode", "{\"ids\": [1, 200000]}\n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("200000"), std::string::npos) << r.err;
  r = run_cli("", "not json\n");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("line 1"), std::string::npos) << r.err;
}

TEST_F(TokenizeCli, ChatRendersAndEncodes) {
  const fs::path req = fs::temp_directory_path() / ("pypto-chat-" + std::to_string(::getpid()) + ".json");
  std::ofstream(req) << R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true,
                            "chat_template_kwargs": {"enable_thinking": false}})";
  const CliResult r = run_cli("--chat '" + req.string() + "'", "");
  fs::remove(req);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("text"), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  auto tok = qwen3_tokenizer();
  ASSERT_TRUE(tok);
  EXPECT_EQ(j.at("ids").get<std::vector<int32_t>>(), tok->encode(j.at("text").get<std::string>()));
}

}  // namespace
}  // namespace pypto::test
