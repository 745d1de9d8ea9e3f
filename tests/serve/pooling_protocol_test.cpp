// The pooling endpoints' request parsing and vector formatting (serve/pooling_protocol.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "serve/api_error.h"
#include "serve/pooling_protocol.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

std::string param_of(void (*f)(const ojson&), const char* body) {
  try {
    f(ojson::parse(body));
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param.value_or("(none)");
  }
  return "(no error)";
}
void embed(const ojson& b) { parse_embedding_request(b); }
void rerank(const ojson& b) { parse_rerank_request(b); }
void score(const ojson& b) { parse_score_request(b); }

TEST(PoolingProtocol, EmbeddingInputShapes) {
  EXPECT_EQ(parse_embedding_request(ojson::parse(R"({"input": "a"})")).inputs.size(), 1u);
  const EmbeddingRequest two = parse_embedding_request(ojson::parse(R"({"input": ["a", "b"], "encoding_format": "base64"})"));
  EXPECT_EQ(two.inputs.size(), 2u);
  EXPECT_TRUE(two.base64);
  const EmbeddingRequest ids = parse_embedding_request(ojson::parse(R"({"input": [1, 2, 3], "dimensions": 32})"));
  ASSERT_EQ(ids.inputs.size(), 1u);
  EXPECT_FALSE(ids.inputs[0].is_text);
  EXPECT_EQ(ids.inputs[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids.dimensions, 32);
  EXPECT_EQ(parse_embedding_request(ojson::parse(R"({"input": [[1], [2, 3]]})")).inputs.size(), 2u);
}

TEST(PoolingProtocol, BadEmbeddingRequestsNameTheField) {
  for (const char* b : {R"({})", R"({"input": []})", R"({"input": ""})", R"({"input": ["a", ""]})", R"({"input": 1})",
                        R"({"input": [1.5]})", R"({"input": [[]]})", R"({"input": [-1]})", R"({"input": [true]})",
                        R"({"input": [["a"]]})"})
    EXPECT_EQ(param_of(embed, b), "input") << b;
  EXPECT_EQ(param_of(embed, R"({"input": "a", "encoding_format": "hex"})"), "encoding_format");
  EXPECT_EQ(param_of(embed, R"({"input": "a", "dimensions": "8"})"), "dimensions");
  EXPECT_EQ(param_of(embed, R"({"input": "a", "mm_processor_kwargs": {}})"), "mm_processor_kwargs");
  EXPECT_EQ(param_of(embed, R"({"input": "a", "model": 3})"), "model");
}

TEST(PoolingProtocol, RerankAndScoreRequests) {
  const RerankRequest r = parse_rerank_request(
      ojson::parse(R"({"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1, "return_documents": false})"));
  EXPECT_EQ(r.documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.top_n, 1);
  EXPECT_FALSE(r.return_documents);
  for (const char* b : {R"({"documents": ["a"]})", R"({"query": "", "documents": ["a"]})", R"({"query": 1, "documents": ["a"]})"})
    EXPECT_EQ(param_of(rerank, b), "query") << b;
  for (const char* b : {R"({"query": "q"})", R"({"query": "q", "documents": []})", R"({"query": "q", "documents": "a"})",
                        R"({"query": "q", "documents": [{"txt": "a"}]})", R"({"query": "q", "documents": [""]})"})
    EXPECT_EQ(param_of(rerank, b), "documents") << b;
  EXPECT_EQ(param_of(rerank, R"({"query": "q", "documents": ["a"], "top_n": -1})"), "top_n");
  const ScoreRequest s = parse_score_request(ojson::parse(R"({"text_1": "q", "text_2": ["a", "b"]})"));
  EXPECT_EQ(s.queries, (std::vector<std::string>{"q", "q"}));
  EXPECT_EQ(param_of(score, R"({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})"), "text_2");
  EXPECT_EQ(param_of(score, R"({"text_2": "a"})"), "text_1");
}

// Newer vLLM spells the two sides queries/documents, queries/items or data_1/data_2.
TEST(PoolingProtocol, ScoreSidesInEverySpelling) {
  for (const char* b : {R"({"queries": "q", "documents": ["a", "b"]})", R"({"queries": "q", "items": ["a", "b"]})",
                        R"({"data_1": "q", "data_2": ["a", "b"]})", R"({"text_1": "q", "text_2": ["a", "b"]})"}) {
    const ScoreRequest s = parse_score_request(ojson::parse(b));
    EXPECT_EQ(s.queries, (std::vector<std::string>{"q", "q"})) << b;
    EXPECT_EQ(s.documents, (std::vector<std::string>{"a", "b"})) << b;
  }
  EXPECT_STREQ(parse_score_request(ojson::parse(R"({"queries": "q", "items": "a"})")).second_field, "items");
  EXPECT_EQ(param_of(score, R"({"text_1": "q", "documents": ["a"]})"), "documents");
  EXPECT_EQ(param_of(score, R"({"queries": "q", "documents": ["a"], "items": ["b"]})"), "items");
  EXPECT_EQ(param_of(score, R"({"data_1": ["q", "r"], "data_2": ["a", "b", "c"]})"), "data_2");
  EXPECT_EQ(param_of(score, R"({"data_1": "q"})"), "data_2");
  EXPECT_EQ(param_of(score, R"({})"), "text_1");
}

TEST(PoolingProtocol, MatryoshkaSlicesThenNormalises) {
  const std::vector<float> v = {3, 4, 12};
  EXPECT_EQ(matryoshka_normalize(v, 2, true), (std::vector<float>{0.6f, 0.8f}));  // not (v / 13)[:2]
  const std::vector<float> full = matryoshka_normalize(v, std::nullopt, true);
  EXPECT_FLOAT_EQ(full[2], 12.0f / 13.0f);
  EXPECT_EQ(matryoshka_normalize(v, 2, false), (std::vector<float>{3, 4}));
}

TEST(PoolingProtocol, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_f32le({1.0f}), "AACAPw==");        // 00 00 80 3f
  EXPECT_EQ(base64_f32le({1.0f, -2.0f}), "AACAPwAAAMA=");  // 00 00 80 3f 00 00 00 c0
  EXPECT_EQ(base64_f32le({}), "");
}

}  // namespace
}  // namespace pypto
