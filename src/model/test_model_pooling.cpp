#include "model/test_model_pooling.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_fields.h"

namespace fs = std::filesystem;

namespace pypto {

const char* const kQwen3EmbeddingQueryPrompt =
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:";

namespace {

using ojson = nlohmann::ordered_json;

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail(p.string(), ": cannot write");
}

}  // namespace

void write_embedding_files(const std::string& dir_s, int64_t hidden) {
  const fs::path dir(dir_s);
  const ojson modules = ojson::array({
      {{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
      {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}},
      {{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}},
  });
  write(dir / "modules.json", modules.dump(2) + "\n");
  fs::create_directories(dir / "1_Pooling");
  const ojson pooling = {{"word_embedding_dimension", hidden},
                         {"pooling_mode_cls_token", false},
                         {"pooling_mode_mean_tokens", false},
                         {"pooling_mode_max_tokens", false},
                         {"pooling_mode_mean_sqrt_len_tokens", false},
                         {"pooling_mode_weightedmean_tokens", false},
                         {"pooling_mode_lasttoken", true},
                         {"include_prompt", true}};
  write(dir / "1_Pooling" / "config.json", pooling.dump(2) + "\n");
  const ojson st = {{"prompts", {{"query", kQwen3EmbeddingQueryPrompt}, {"document", ""}}},
                    {"default_prompt_name", nullptr},
                    {"similarity_fn_name", "cosine"}};
  write(dir / "config_sentence_transformers.json", st.dump(2) + "\n");

  // tokenizer.json: the appended <|endoftext|> (a pair gets one after each sequence). The file is
  // 11 MB; only its post_processor value is replaced, as text (parsing 151k vocabulary keys into
  // an ordered_json takes half a minute).
  const fs::path tok = dir / "tokenizer.json";
  std::string text = read_text_file(tok.string());
  const ojson eos = {{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}};
  const ojson post = {
      {"type", "TemplateProcessing"},
      {"single", ojson::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, eos})},
      {"pair", ojson::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, eos,
                             {{"Sequence", {{"id", "B"}, {"type_id", 1}}}},
                             {{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 1}}}}})},
      {"special_tokens",
       {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {151643}}, {"tokens", {"<|endoftext|>"}}}}}},
  };
  const size_t key = text.find("\"post_processor\"");
  const size_t open = key == std::string::npos ? key : text.find('{', key);
  const size_t close = open == std::string::npos ? open : text.find('}', open);  // a flat object (ByteLevel)
  if (close == std::string::npos || text.find('{', open + 1) < close)
    fail(tok.string(), ": expected a flat \"post_processor\" object (the Qwen3 tokenizer's ByteLevel) to replace");
  text.replace(open, close + 1 - open, post.dump());
  write(tok, text);
}

}  // namespace pypto
