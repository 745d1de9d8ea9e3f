#pragma once
// `bench serve --endpoint /v1/embeddings` (vLLM's bench has an embeddings backend): each
// request embeds one dataset prompt, sent as its token ids so every input has exactly the
// dataset's length; the same arrival process and --max-concurrency as the completions benchmark.
// Reports inputs/s and (prompt) tokens/s over the run, and the request latency.
#include <cstdint>
#include <string>
#include <vector>

#include "cli/bench_client.h"
#include "cli/bench_dataset.h"
#include "cli/bench_serve.h"

namespace pypto::bench {

struct EmbeddingsRun {
  int max_concurrency = 0;
  int64_t completed = 0, failed = 0;
  int64_t inputs = 0, tokens = 0;  // usage.prompt_tokens summed over the completed requests
  double duration_s = 0;
  double inputs_per_s = 0, tokens_per_s = 0;
  double latency_mean_s = 0, latency_p50_s = 0, latency_p99_s = 0;
  std::string first_error;
};

// One POST of `ids` to ep (non-streaming); returns the latency in seconds and sets tokens to
// usage.prompt_tokens, or sets error.
double send_embedding(const Endpoint& ep, const std::vector<int32_t>& ids, int64_t& tokens, std::string& error);

EmbeddingsRun run_embeddings_benchmark(const std::vector<DatasetRequest>& data, const ServeRunOptions& o);
void print_embeddings_summary(const EmbeddingsRun& r);
// The whole `bench serve --endpoint .../embeddings`: a test request (unless skipped), one run per
// --max-concurrency value, a summary each (printed; not saved). Exit code 1 when any failed.
int run_embeddings_bench(const std::vector<DatasetRequest>& data, ServeRunOptions o, const std::vector<int>& concurrency,
                         bool skip_test);

}  // namespace pypto::bench
