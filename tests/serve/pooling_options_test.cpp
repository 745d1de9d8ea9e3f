// vLLM's extra fields of the pooling endpoints (serve/pooling_options.h): truncation, the
// activation switch and its older names, the refused fields, and base64 in float16 / bfloat16 /
// big-endian (expected bytes from torch: tensor.to(dtype).view(int16), base64 of the buffer).
#include <gtest/gtest.h>

#include "serve/api_error.h"
#include "serve/pooling_options.h"
#include "serve/pooling_protocol.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

std::string param_of(const char* body, PoolingEndpoint ep = PoolingEndpoint::Embeddings) {
  try {
    const ojson b = ojson::parse(body);
    if (ep == PoolingEndpoint::Embeddings) parse_embedding_request(b);
    else if (ep == PoolingEndpoint::Pooling) parse_embedding_request(b, true);
    else if (ep == PoolingEndpoint::Score) parse_score_request(b);
    else parse_rerank_request(b);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.param.value_or("(none)");
  }
  return "(no error)";
}

PoolingOptions opts(const char* body, PoolingEndpoint ep = PoolingEndpoint::Embeddings) {
  return parse_pooling_options(ojson::parse(body), ep);
}

TEST(PoolingOptions, TruncatePromptTokensKeepsTheLastTokensByDefault) {
  EXPECT_EQ(resolve_truncation(opts(R"({})"), 256), std::nullopt);
  EXPECT_EQ(resolve_truncation(opts(R"({"truncate_prompt_tokens": -1})"), 256), 256);
  EXPECT_EQ(resolve_truncation(opts(R"({"truncate_prompt_tokens": 256})"), 256), 256);
  try {
    resolve_truncation(opts(R"({"truncate_prompt_tokens": 257})"), 256);
    ADD_FAILURE() << "257 > --max-model-len 256 accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "truncate_prompt_tokens");
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
  std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  truncate_tokens(ids, 3, opts(R"({"truncate_prompt_tokens": 3})"));
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 4, 5}));
  ids = {1, 2, 3, 4, 5};
  truncate_tokens(ids, 3, opts(R"({"truncate_prompt_tokens": 3, "truncation_side": "right"})"));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3}));
  ids = {1, 2};
  truncate_tokens(ids, 3, opts(R"({})"));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  for (const char* b : {R"({"input": "a", "truncate_prompt_tokens": 0})", R"({"input": "a", "truncate_prompt_tokens": -2})",
                        R"({"input": "a", "truncate_prompt_tokens": "5"})", R"({"input": "a", "truncate_prompt_tokens": 1.5})"})
    EXPECT_EQ(param_of(b), "truncate_prompt_tokens") << b;
  EXPECT_EQ(param_of(R"({"input": "a", "truncation_side": "middle"})"), "truncation_side");
  EXPECT_EQ(param_of(R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 0})", PoolingEndpoint::Score),
            "truncate_prompt_tokens");
  EXPECT_EQ(param_of(R"({"query": "a", "documents": ["b"], "truncate_prompt_tokens": -3})", PoolingEndpoint::Rerank),
            "truncate_prompt_tokens");
}

TEST(PoolingOptions, ActivationAndItsOlderNames) {
  EXPECT_EQ(opts(R"({})").use_activation, std::nullopt);
  EXPECT_EQ(opts(R"({"use_activation": false})").use_activation, false);
  EXPECT_EQ(opts(R"({"normalize": false})").use_activation, false);
  EXPECT_EQ(opts(R"({"normalize": true, "use_activation": true})").use_activation, true);
  EXPECT_EQ(opts(R"({"activation": false})", PoolingEndpoint::Score).use_activation, false);
  EXPECT_EQ(opts(R"({"softmax": false})", PoolingEndpoint::Rerank).use_activation, false);
  EXPECT_EQ(param_of(R"({"input": "a", "use_activation": true, "normalize": false})"), "normalize");
  EXPECT_EQ(param_of(R"({"input": "a", "use_activation": 1})"), "use_activation");
  // Each endpoint takes its own names only.
  EXPECT_EQ(param_of(R"({"input": "a", "activation": false})"), "activation");
  EXPECT_EQ(param_of(R"({"text_1": "a", "text_2": "b", "normalize": false})", PoolingEndpoint::Score), "normalize");
  EXPECT_EQ(param_of(R"({"query": "a", "documents": ["b"], "add_special_tokens": false})", PoolingEndpoint::Rerank),
            "add_special_tokens");
}

TEST(PoolingOptions, AcceptedAndRefusedExtras) {
  const PoolingOptions o = opts(R"({"user": "u", "priority": 0, "request_id": "r1", "add_special_tokens": false,
                                    "padding": "do_not_pad"})");
  EXPECT_FALSE(o.add_special_tokens);
  EXPECT_EQ(response_id(o, "embd-", "embd-generated"), "embd-r1");
  EXPECT_EQ(response_id(opts("{}"), "embd-", "embd-generated"), "embd-generated");
  EXPECT_EQ(param_of(R"({"input": "a", "priority": 1})"), "priority");
  EXPECT_EQ(param_of(R"({"input": "a", "priority": "0"})"), "priority");
  EXPECT_EQ(param_of(R"({"input": "a", "cache_salt": "s"})"), "cache_salt");
  EXPECT_EQ(param_of(R"({"input": "a", "padding": "max_length"})"), "padding");
  EXPECT_EQ(param_of(R"({"input": "a", "request_id": ""})"), "request_id");
  EXPECT_EQ(param_of(R"({"input": "a", "user": 3})"), "user");
  EXPECT_EQ(param_of(R"({"input": "a", "embed_dtype": "fp8_e4m3"})"), "embed_dtype");
  EXPECT_EQ(param_of(R"({"input": "a", "endianness": "middle"})"), "endianness");
  EXPECT_EQ(param_of(R"({"input": "a", "add_special_tokens": "no"})"), "add_special_tokens");
  EXPECT_EQ(param_of(R"({"input": "a", "task": "embed"})"), "task");  // /pooling's field only
  EXPECT_EQ(param_of(R"({"input": "a", "task": "embed"})", PoolingEndpoint::Pooling), "(no error)");
  EXPECT_EQ(param_of(R"({"input": "a", "messages": []})", PoolingEndpoint::Pooling), "messages");
}

TEST(PoolingOptions, Base64InFloat16BFloat16AndBigEndian) {
  const std::vector<float> v = {1.0f, -2.0f, 0.1f, 1.0f / 3, 65504.0f, 70000.0f, 6e-8f, 2.98e-8f,
                                1 + 0x1p-8f, 1 + 3 * 0x1p-8f, -0.0f, 1e-30f};
  PoolingOptions o;
  o.embed_dtype = EmbedDType::Float16;
  EXPECT_EQ(base64_embedding(v, o), "ADwAwGYuVTX/ewB8AQAAAAQ8DDwAgAAA");
  o.big_endian = true;
  EXPECT_EQ(base64_embedding(v, o), "PADAAC5mNVV7/3wAAAEAADwEPAyAAAAA");
  o = PoolingOptions{};
  o.embed_dtype = EmbedDType::BFloat16;
  EXPECT_EQ(base64_embedding(v, o), "gD8AwM09qz6AR4lHgTMAM4A/gj8AgKIN");
  o.big_endian = true;
  EXPECT_EQ(base64_embedding(v, o), "P4DAAD3NPqtHgEeJM4EzAD+AP4KAAA2i");
  o = PoolingOptions{};
  EXPECT_EQ(base64_embedding({1.0f, -2.0f}, o), base64_f32le({1.0f, -2.0f}));
  o.big_endian = true;
  EXPECT_EQ(base64_embedding({1.0f}, o), "P4AAAA==");  // 3f 80 00 00
}

}  // namespace
}  // namespace pypto
