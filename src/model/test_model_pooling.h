#pragma once
// The files Qwen3-Embedding checkpoints carry besides config.json and the weights, for the
// embedding test presets (make-test-model --preset qwen3-embedding-0.6b | tiny-embedding*).
#include <cstdint>
#include <string>

namespace pypto {

// Writes into `dir` (which already holds the Qwen3 tokenizer files):
//  - modules.json: Transformer → Pooling (1_Pooling) → Normalize, sentence-transformers' chain;
//  - 1_Pooling/config.json: last-token pooling over the hidden size, include_prompt true;
//  - config_sentence_transformers.json: the query prompt "Instruct: ...\nQuery:" (no space after
//    the colon) and an empty document prompt;
//  - tokenizer.json's post_processor replaced by the TemplateProcessing that appends
//    <|endoftext|> (151643) to every single sequence.
void write_embedding_files(const std::string& dir, int64_t hidden);

// The query prompt of Qwen3-Embedding's config_sentence_transformers.json.
extern const char* const kQwen3EmbeddingQueryPrompt;

}  // namespace pypto
