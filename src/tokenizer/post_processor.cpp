#include "tokenizer/post_processor.h"

#include <string>

#include "core/error.h"

namespace pypto {

namespace {

using nlohmann::json;

std::string type_of(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) fail("tokenizer.json: post_processor has no \"type\"");
  return j["type"].get<std::string>();
}

// {"SpecialToken": {"id": "<|endoftext|>", ...}} → its ids from the template's special_tokens map.
void add_special(const json& piece, const json& special_tokens, std::vector<int32_t>& out) {
  const std::string name = piece.at("id").get<std::string>();
  if (!special_tokens.contains(name))
    fail("tokenizer.json: post_processor template names special token '", name, "' missing from its special_tokens");
  for (const json& id : special_tokens.at(name).at("ids")) out.push_back(id.get<int32_t>());
}

void read_template(const json& j, PostProcessor& p) {
  const json& single = j.at("single");
  const json& special_tokens = j.value("special_tokens", json::object());
  if (!single.is_array()) fail("tokenizer.json: post_processor TemplateProcessing \"single\" is not a list");
  bool seen_sequence = false;
  for (const json& piece : single) {
    if (piece.contains("Sequence")) {
      if (seen_sequence || piece["Sequence"].value("id", "A") != "A")
        fail("tokenizer.json: post_processor TemplateProcessing \"single\" must hold the sequence A once");
      seen_sequence = true;
    } else if (piece.contains("SpecialToken")) {
      add_special(piece["SpecialToken"], special_tokens, seen_sequence ? p.suffix : p.prefix);
    } else {
      fail("tokenizer.json: post_processor TemplateProcessing piece ", piece.dump(), " is not implemented");
    }
  }
  if (!seen_sequence) fail("tokenizer.json: post_processor TemplateProcessing \"single\" has no sequence A");
}

void read_one(const json& j, PostProcessor& p) {
  const std::string type = type_of(j);
  if (type == "ByteLevel") {
    if (j.value("add_prefix_space", false))
      fail("tokenizer.json: post_processor ByteLevel add_prefix_space=true is not implemented");
  } else if (type == "TemplateProcessing") {
    try {
      read_template(j, p);
    } catch (const json::exception& e) {
      fail("tokenizer.json: post_processor TemplateProcessing has an unexpected layout: ", e.what());
    }
  } else if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array())
      fail("tokenizer.json: post_processor Sequence has no \"processors\" list");
    for (const json& sub : j["processors"]) read_one(sub, p);
  } else {
    fail("tokenizer.json: post_processor type \"", type, "\" is not implemented (ByteLevel, TemplateProcessing, Sequence)");
  }
}

}  // namespace

PostProcessor read_post_processor(const json& j) {
  PostProcessor p;
  if (!j.is_null()) read_one(j, p);
  return p;
}

}  // namespace pypto
