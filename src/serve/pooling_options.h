#pragma once
// vLLM's extra request fields of the pooling endpoints (/v1/embeddings, /pooling, /v1/score,
// /v1/rerank), parsed once for all of them (vllm/entrypoints/pooling/base/protocol.py and
// score/protocol.py name them). Each one either does what vLLM does with it or is refused with a
// 400 naming it; only `user` is accepted and unused (it never changes a result):
//  - truncate_prompt_tokens: -1 (up to --max-model-len) or 1..--max-model-len tokens kept of
//    each input; truncation_side left (default: the last N, so Qwen3-Embedding's appended
//    <|endoftext|> stays last) or right (the first N). Outside that range: 400.
//  - use_activation (and its older names: `normalize` on embeddings, `activation` / `softmax` on
//    score and rerank): false gives the raw pooled vector (no L2) / the raw log-odds (no sigmoid).
//  - add_special_tokens: false tokenizes text inputs without the post-processor (no
//    <|endoftext|> appended by Qwen3-Embedding's tokenizer).
//  - embed_dtype float32 | float16 | bfloat16 and endianness native | little | big: how base64
//    packs each value (round to nearest even; ignored by encoding_format float, as in vLLM).
//  - request_id: the response's id becomes "<prefix><request_id>" (vLLM puts it in the id).
//  - priority: only 0; the scheduler is first-come first-served, and vLLM also refuses a
//    non-zero priority without priority scheduling.
//  - cache_salt: refused; the prefix cache is shared by all requests (--no-enable-prefix-caching
//    isolates them).
//  - padding: "do_not_pad" (what happens anyway); "max_length" is refused (pad tokens after the
//    last real token would change a last-token pooled vector).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto {

enum class EmbedDType { Float32, Float16, BFloat16 };

struct PoolingOptions {
  std::optional<int64_t> truncate_prompt_tokens;  // -1 or >= 1; checked against the model by resolve
  bool truncate_keep_last = true;                 // truncation_side left
  std::optional<bool> use_activation;             // unset: the model's default (normalise / sigmoid)
  bool add_special_tokens = true;
  EmbedDType embed_dtype = EmbedDType::Float32;
  bool big_endian = false;
  std::optional<std::string> request_id;
};

// Which extras an endpoint takes (the others stay unknown fields, refused by name).
enum class PoolingEndpoint { Embeddings, Pooling, Score, Rerank };

// The extra field names `ep` takes, for the endpoint's list of allowed fields.
std::vector<const char*> pooling_option_fields(PoolingEndpoint ep);

// Parses the extras present in `body` (a JSON object); 400 naming the field on a bad value.
PoolingOptions parse_pooling_options(const nlohmann::ordered_json& body, PoolingEndpoint ep);

// The number of tokens to keep per input: nullopt for no truncation, else 1..max_model_len
// (-1 resolves to max_model_len). 400 naming truncate_prompt_tokens when it exceeds max_model_len.
std::optional<int64_t> resolve_truncation(const PoolingOptions& o, int64_t max_model_len);

// ids cut to `keep` tokens on the side the options say (unchanged when keep is unset or not
// shorter).
void truncate_tokens(std::vector<int32_t>& ids, std::optional<int64_t> keep, const PoolingOptions& o);

// Base64 of v packed as o.embed_dtype in o's byte order (float16 / bfloat16 rounded to nearest
// even, as torch's .to() does).
std::string base64_embedding(const std::vector<float>& v, const PoolingOptions& o);

// The response id: prefix + request_id when the request gave one, else `generated`.
std::string response_id(const PoolingOptions& o, const char* prefix, const std::string& generated);

}  // namespace pypto
