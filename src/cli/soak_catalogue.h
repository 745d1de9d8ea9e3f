#pragma once
// `bench soak`: the catalogue of well-formed requests the soak sends, and the canonical form of
// an answer that the correctness oracle compares. Every entry is deterministic (greedy, or seeded
// sampling), so a solo run of it fixes the answer that every run under load must repeat: the
// engine is batch-invariant, so neither the batch a request shares nor its replica may change it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto::bench {

struct CatalogueEntry {
  std::string name;      // e.g. "chat-tools-required-stream"; unique in the catalogue
  std::string path;      // /v1/completions or /v1/chat/completions
  nlohmann::json body;   // the request body (its "model" is filled in by make_catalogue)
  bool stream = false;   // body["stream"]
};

// The mixed traffic: completions and chat, streaming and not, tools (auto / required / named),
// json_schema / json_object / regex / grammar / choice outputs, logprobs, n > 1 (greedy and
// seeded), stop strings, several prompts in one request. `model` is the served model name.
std::vector<CatalogueEntry> make_catalogue(const std::string& model);

// The part of an answer that must not depend on the load: per choice (by index) its text (chat:
// content, reasoning and tool calls without their random ids), finish_reason and logprobs
// (values printed to 5 decimals), and the usage counts; ids, timestamps and cached-token counts
// are left out. Works on a whole response body and, through StreamAssembler, on SSE chunks, so a
// streamed answer has the same canonical form as the same request unstreamed.
nlohmann::json canonical_response(const nlohmann::json& body);

// Accumulates the chunks of one streamed answer into the body a non-streamed request would get
// (as far as canonical_response reads it).
class StreamAssembler {
 public:
  // One SSE event's data (a JSON chunk, or "[DONE]"); false when it is neither (the caller counts
  // a malformed stream) or when it carries an "error".
  bool add(const std::string& data, std::string* error);
  bool done() const { return done_; }
  size_t chunks() const { return chunks_; }
  nlohmann::json body() const;

 private:
  nlohmann::json choices_ = nlohmann::json::object();  // index (as text) → accumulated choice
  nlohmann::json usage_;
  bool done_ = false;
  size_t chunks_ = 0;
};

// Where a response differs from the expected canonical form: "" when equal, else the first
// differing JSON pointer with both values (short enough for a log line).
std::string first_difference(const nlohmann::json& want, const nlohmann::json& got);

}  // namespace pypto::bench
