// Reading tokenizer.json / tokenizer_config.json into a Tokenizer. Each pipeline component is
// checked against what we implement; anything else fails here, at load time, with its name.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/tokenizer.h"

namespace pypto {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The pattern of Hugging Face's ByteLevel pre-tokenizer when use_regex is true (GPT-2's).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open ", path.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string type_of(const json& j, const char* what) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("tokenizer.json: ", what, " has no \"type\"");
  return j["type"].get<std::string>();
}

// A ByteLevel component's options that we implement: no prefix space. trim_offsets only
// affects offsets, which we do not produce.
void check_byte_level(const json& j, const char* what) {
  if (j.value("add_prefix_space", false)) fail("tokenizer.json: ", what, " ByteLevel add_prefix_space=true is not implemented");
}

// Normalizer: none, NFC, or a Sequence of those.
void read_normalizer(const json& j, bool& nfc_out) {
  if (j.is_null()) return;
  const std::string type = type_of(j, "normalizer");
  if (type == "NFC") {
    nfc_out = true;
  } else if (type == "Sequence") {
    for (const json& n : j.at("normalizers")) read_normalizer(n, nfc_out);
  } else {
    fail("tokenizer.json: normalizer type \"", type, "\" is not implemented (only NFC)");
  }
}

// Pre-tokenizer: Split steps followed by a final ByteLevel (the BPE model works on bytes).
struct PreTokenizerSpec {
  std::vector<std::pair<std::string, bool>> splits;  // pattern, literal
  bool byte_level = false;
};

void read_pre_tokenizer(const json& j, PreTokenizerSpec& spec) {
  if (j.is_null()) return;
  const std::string type = type_of(j, "pre_tokenizer");
  if (spec.byte_level) fail("tokenizer.json: pre_tokenizer ", type, " after ByteLevel is not implemented");
  if (type == "Sequence") {
    for (const json& p : j.at("pretokenizers")) read_pre_tokenizer(p, spec);
  } else if (type == "Split") {
    const std::string behavior = j.value("behavior", "");
    if (behavior != "Isolated") fail("tokenizer.json: Split behavior \"", behavior, "\" is not implemented (only Isolated)");
    if (j.value("invert", false)) fail("tokenizer.json: Split invert=true is not implemented");
    const json& pat = j.at("pattern");
    if (pat.contains("Regex")) {
      spec.splits.emplace_back(pat["Regex"].get<std::string>(), false);
    } else if (pat.contains("String")) {
      spec.splits.emplace_back(pat["String"].get<std::string>(), true);
    } else {
      fail("tokenizer.json: Split pattern ", pat.dump(), " is neither Regex nor String");
    }
  } else if (type == "ByteLevel") {
    check_byte_level(j, "pre_tokenizer");
    if (j.value("use_regex", true)) spec.splits.emplace_back(kGpt2Pattern, false);
    spec.byte_level = true;
  } else {
    fail("tokenizer.json: pre_tokenizer type \"", type, "\" is not implemented");
  }
}

void read_decoder(const json& j) {
  if (j.is_null()) fail("tokenizer.json: a tokenizer without a decoder is not implemented (need ByteLevel)");
  const std::string type = type_of(j, "decoder");
  if (type != "ByteLevel") fail("tokenizer.json: decoder type \"", type, "\" is not implemented (only ByteLevel)");
  check_byte_level(j, "decoder");
}

// tokenizer_config.json spells a token as a string or as an AddedToken object.
std::optional<std::string> config_token(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return (*it)["content"].get<std::string>();
  fail("tokenizer_config.json: \"", key, "\" is neither a string nor a token object");
}

std::optional<std::string> config_chat_template(const json& cfg) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    for (const json& t : *it) {
      if (t.value("name", "") == "default") return t.at("template").get<std::string>();
    }
  }
  fail("tokenizer_config.json: \"chat_template\" has no usable (default) template");
}

// Parses tokenizer.json into a tree, except model.vocab and model.merges, which go straight into
// `tables`: building (and then tearing down) a std::map of 150k tokens and 150k small arrays
// would be most of the load time.
json parse_tokenizer_json(std::string_view text, BpeTables& tables) {
  std::vector<std::string> keys(8);  // keys[d]: the last key seen at depth d
  std::string vocab_key;
  auto in = [&](const char* field) { return keys[1] == "model" && keys[2] == field; };
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth >= static_cast<int>(keys.size())) return true;
    switch (event) {
      case json::parse_event_t::key:
        keys[depth] = parsed.get<std::string>();
        if (depth == 3 && in("vocab")) {
          vocab_key = keys[3];
          return false;
        }
        return true;
      case json::parse_event_t::value:
        if (depth == 3 && in("vocab")) {
          if (!parsed.is_number_integer()) fail("tokenizer.json: vocab entry ", json(vocab_key).dump(), " has no integer id");
          tables.vocab.emplace_back(std::move(vocab_key), parsed.get<int32_t>());
          return false;
        }
        if (depth == 3 && in("merges")) {  // "a b"
          tables.merges.push_back(BpeModel::merge_parts(parsed, tables.merges.size()));
          return false;
        }
        return true;
      case json::parse_event_t::array_end:
        if (depth == 3 && in("merges")) {  // ["a", "b"]
          tables.merges.push_back(BpeModel::merge_parts(parsed, tables.merges.size()));
          return false;
        }
        return true;
      default:
        return true;
    }
  };
  return json::parse(text, cb);
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::load(const std::string& path) {
  fs::path json_path = path;
  if (fs::is_directory(json_path)) json_path /= "tokenizer.json";
  if (!fs::exists(json_path)) fail("tokenizer file not found: ", json_path.string());
  const fs::path cfg_path = json_path.parent_path() / "tokenizer_config.json";
  const std::string cfg_text = fs::exists(cfg_path) ? read_file(cfg_path) : std::string();
  try {
    return from_json_text(read_file(json_path), cfg_text);
  } catch (const Error& e) {
    fail(e.what(), " [", json_path.string(), "]");
  }
}

std::shared_ptr<const Tokenizer> Tokenizer::from_json_text(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json) {
  json j;
  BpeTables tables;
  try {
    j = parse_tokenizer_json(tokenizer_json, tables);
  } catch (const json::exception& e) {
    fail("tokenizer.json is not valid JSON: ", e.what());
  }
  if (!j.is_object()) fail("tokenizer.json: the top level is not an object");
  std::shared_ptr<Tokenizer> t(new Tokenizer());
  try {
    if (j.contains("truncation") && !j["truncation"].is_null()) fail("tokenizer.json: truncation is not implemented");
    if (j.contains("padding") && !j["padding"].is_null()) fail("tokenizer.json: padding is not implemented");
    read_normalizer(j.value("normalizer", json()), t->nfc_);
    PreTokenizerSpec spec;
    read_pre_tokenizer(j.value("pre_tokenizer", json()), spec);
    if (!spec.byte_level) fail("tokenizer.json: pre_tokenizer has no ByteLevel step; only byte-level BPE is implemented");
    for (const auto& [pattern, literal] : spec.splits) t->splits_.push_back(std::make_unique<RegexSplit>(pattern, literal));
    read_decoder(j.value("decoder", json()));
    t->post_ = read_post_processor(j.value("post_processor", json()));  // tokenizer/post_processor.h
    t->model_ = std::make_unique<BpeModel>(j.at("model"), std::move(tables));

    t->vocab_size_ = t->model_->size();
    for (const json& a : j.value("added_tokens", json::array())) {
      t->added_.push_back(AddedToken::from_json(a));
      t->vocab_size_ = std::max(t->vocab_size_, t->added_.back().id + 1);
    }
    t->added_by_id_.assign(static_cast<size_t>(t->vocab_size_), -1);
    for (size_t i = 0; i < t->added_.size(); ++i) {
      const AddedToken& a = t->added_[i];
      if (a.id < 0) fail("tokenizer.json: added token ", json(a.content).dump(), " has negative id ", a.id);
      t->added_by_id_[a.id] = static_cast<int>(i);
      if (a.normalized && t->nfc_) {
        t->normalized_matcher_.add(nfc(a.content), a);
      } else if (a.normalized) {
        t->normalized_matcher_.add(a.content, a);
      } else {
        t->raw_matcher_.add(a.content, a);
      }
    }
  } catch (const json::exception& e) {
    fail("tokenizer.json has an unexpected layout: ", e.what());
  }

  if (!tokenizer_config_json.empty()) {
    try {
      const json cfg = json::parse(tokenizer_config_json);
      t->bos_token_ = config_token(cfg, "bos_token");
      t->eos_token_ = config_token(cfg, "eos_token");
      t->pad_token_ = config_token(cfg, "pad_token");
      t->chat_template_ = config_chat_template(cfg);
    } catch (const json::exception& e) {
      fail("tokenizer_config.json: ", e.what());
    }
  }
  return t;
}

}  // namespace pypto
