#include "serve/embedding_score.h"

#include <cmath>
#include <map>

#include "core/error.h"
#include "serve/pooling_batch.h"
#include "serve/pooling_inputs.h"

namespace pypto {

double cosine_similarity(const std::vector<float>& x, const std::vector<float>& y) {
  PYPTO_ASSERT(x.size() == y.size(), "cosine of vectors of ", x.size(), " and ", y.size(), " values");
  double xy = 0, xx = 0, yy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += double(x[i]) * double(y[i]);
    xx += double(x[i]) * double(x[i]);
    yy += double(y[i]) * double(y[i]);
  }
  return xx > 0 && yy > 0 ? xy / std::sqrt(xx * yy) : 0.0;
}

std::string qwen3_embedding_query(const std::string& instruction, const std::string& query) {
  return str_cat("Instruct: ", instruction, "\nQuery:", query);
}

EmbeddingScores embedding_pair_scores(ServerState& s, const std::vector<std::string>& a,
                                      const std::vector<std::string>& b, const PoolingOptions& o, const char* a_field,
                                      const char* b_field, std::chrono::steady_clock::time_point arrival) {
  PYPTO_ASSERT(a.size() == b.size(), "pairs of ", a.size(), " and ", b.size(), " texts");
  const std::optional<int64_t> keep = resolve_truncation(o, s.ctx.max_model_len);
  std::map<std::string, size_t> slot;  // distinct text -> its input
  std::vector<std::vector<int32_t>> inputs;
  auto input_of = [&](const std::string& text, const char* field, size_t i, size_t n) {
    auto [it, fresh] = slot.try_emplace(text, inputs.size());
    if (fresh)
      inputs.push_back(pooling_token_ids(s, EmbeddingInput{true, text, {}}, o, keep,
                                         n == 1 ? std::string(field) : str_cat(field, "[", i, "]"), field));
    return it->second;
  };
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < a.size(); ++i) {
    const size_t x = input_of(a[i], a_field, i, a.size());
    pairs.emplace_back(x, input_of(b[i], b_field, i, b.size()));
  }
  check_input_count(s, inputs.size(), b_field);
  PoolingBatch batch(s, s.make_id("score-"), std::move(inputs), b_field);
  const std::vector<std::vector<float>> vectors = batch.run(arrival);
  EmbeddingScores out;
  out.prompt_tokens = batch.prompt_tokens();
  for (auto [x, y] : pairs) out.scores.push_back(cosine_similarity(vectors[x], vectors[y]));
  return out;
}

}  // namespace pypto
