// pypto-serving tokenize: the model's tokenizer from the command line, for checking our ids
// against other tools. JSON lines in, JSON lines out:
//   encode (default)  {"text": "..."}  -> {"ids": [...]}
//   --decode          {"ids": [...]}   -> {"text": "..."}
//   --text STR        one string, no stdin
//   --chat FILE.json  {"messages", "tools", "add_generation_prompt", "chat_template_kwargs"}
//                     -> {"text": rendered prompt, "ids": [...]}
// A bad input line stops the run with "line N: problem" on stderr and exit code 2, so the
// output lines written so far still answer the input lines one to one.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pypto::cli {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr int kBadInput = 2;

void print_line(const json& j) {
  // Text from decode() is always valid UTF-8 (broken bytes became U+FFFD), so dump() cannot throw.
  std::cout << j.dump() << '\n' << std::flush;
}

std::vector<int32_t> ids_from_json(const json& v) {
  if (!v.is_array()) fail("\"ids\" is not an array");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& x = v[i];
    if (!x.is_number_integer()) fail("\"ids\"[", i, "] is not an integer: ", x.dump());
    const int64_t id = x.get<int64_t>();
    if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max()) {
      fail("\"ids\"[", i, "] = ", id, " is out of range");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// One line of stdin: the answer line, or Error describing what is wrong with it.
json answer(const Tokenizer& tok, const std::string& line, bool decode, bool add_special, bool skip_special) {
  json req;
  try {
    req = json::parse(line);
  } catch (const json::parse_error& e) {
    fail("not valid JSON (", e.what(), ")");
  }
  if (!req.is_object()) fail("expected a JSON object");
  if (decode) {
    auto it = req.find("ids");
    if (it == req.end()) fail("no \"ids\" field (--decode expects {\"ids\": [...]})");
    return json{{"text", tok.decode(ids_from_json(*it), skip_special)}};
  }
  auto it = req.find("text");
  if (it == req.end() || !it->is_string()) fail("no \"text\" string field (expects {\"text\": \"...\"})");
  return json{{"ids", tok.encode(it->get_ref<const std::string&>(), add_special)}};
}

int run_lines(const Tokenizer& tok, bool decode, bool add_special, bool skip_special) {
  std::string line;
  for (size_t number = 1; std::getline(std::cin, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines carry no request
    try {
      print_line(answer(tok, line, decode, add_special, skip_special));
    } catch (const Error& e) {
      std::fprintf(stderr, "pypto-serving tokenize: line %zu: %s\n", number, e.what());
      return kBadInput;
    }
  }
  return 0;
}

// Renders the checkpoint's chat template on a request file, then encodes the prompt as
// transformers' apply_chat_template(tokenize=True) does (no extra special tokens).
int run_chat(const Tokenizer& tok, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open --chat file ", path);
  ordered_json req;  // ordered: tool schemas are printed with tojson in their given key order
  try {
    req = ordered_json::parse(f);
  } catch (const ordered_json::parse_error& e) {
    std::fprintf(stderr, "pypto-serving tokenize: %s: not valid JSON (%s)\n", path.c_str(), e.what());
    return kBadInput;
  }
  auto bad = [&](const std::string& why) {
    std::fprintf(stderr, "pypto-serving tokenize: %s: %s\n", path.c_str(), why.c_str());
    return kBadInput;
  };
  if (!req.is_object()) return bad("expected a JSON object with \"messages\"");
  if (!req.contains("messages") || !req["messages"].is_array()) return bad("no \"messages\" array");
  if (!tok.chat_template()) fail("the model's tokenizer_config.json has no chat_template");

  ordered_json ctx = ordered_json::object();
  ctx["messages"] = req["messages"];
  if (req.contains("tools") && !req["tools"].is_null()) {
    if (!req["tools"].is_array()) return bad("\"tools\" is not an array");
    ctx["tools"] = req["tools"];
  }
  const ordered_json agp = req.value("add_generation_prompt", ordered_json(false));
  if (!agp.is_boolean()) return bad("\"add_generation_prompt\" is not a boolean");
  ctx["add_generation_prompt"] = agp;
  if (tok.bos_token()) ctx["bos_token"] = *tok.bos_token();
  if (tok.eos_token()) ctx["eos_token"] = *tok.eos_token();
  if (req.contains("chat_template_kwargs") && !req["chat_template_kwargs"].is_null()) {
    const ordered_json& kw = req["chat_template_kwargs"];
    if (!kw.is_object()) return bad("\"chat_template_kwargs\" is not an object");
    for (auto it = kw.begin(); it != kw.end(); ++it) ctx[it.key()] = it.value();
  }

  const auto tmpl = ChatTemplate::parse(*tok.chat_template());
  std::string text;
  try {
    text = tmpl->render(ctx);
  } catch (const Error& e) {
    return bad(std::string("chat template: ") + e.what());
  }
  print_line(json{{"text", text}, {"ids", tok.encode(text, false)}});
  return 0;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Encode or decode with a model's tokenizer, or render its chat template. Reads JSON lines on stdin."};
  std::string model, text, chat;
  bool decode = false, add_special = false, skip_special = false;
  app.add_option("--model", model, "checkpoint directory, or a tokenizer.json file")->required();
  auto* text_opt = app.add_option("--text", text, "encode this one string instead of reading stdin");
  auto* decode_flag = app.add_flag("--decode", decode, "read {\"ids\": [...]} lines, write {\"text\": ...}");
  app.add_flag("--add-special-tokens", add_special, "apply the post-processor's special tokens (Qwen adds none)");
  app.add_flag("--skip-special-tokens", skip_special, "when decoding, leave out special tokens");
  auto* chat_opt = app.add_option("--chat", chat, "render the chat template on this request file, then encode");
  text_opt->excludes(decode_flag);
  chat_opt->excludes(decode_flag)->excludes(text_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kBadInput;
  }

  const auto tok = Tokenizer::load(model);
  if (!chat.empty()) return run_chat(*tok, chat);
  if (*text_opt) {
    try {
      print_line(json{{"ids", tok->encode(text, add_special)}});
    } catch (const Error& e) {
      std::fprintf(stderr, "pypto-serving tokenize: --text: %s\n", e.what());
      return kBadInput;
    }
    return 0;
  }
  return run_lines(*tok, decode, add_special, skip_special);
}

}  // namespace pypto::cli
