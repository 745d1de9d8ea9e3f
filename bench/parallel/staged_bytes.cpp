// Staged weight bytes per tensor-parallel rank: stages MODEL_DIR for TP=1 and for each given tp
// (one rank at a time, freed before the next, so peak memory is one slice) and prints each rank's
// slab size, the embedding/lm_head share of it and its fraction of the TP=1 slab.
// Usage: staged_bytes MODEL_DIR [TP ...]   (default TP list: 2)
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/weight_staging.h"

using namespace pypto;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [TP ...]\n", argv[0]);
    return 2;
  }
  std::vector<int> tps = {1};
  for (int i = 2; i < argc; ++i) tps.push_back(std::atoi(argv[i]));
  if (argc == 2) tps.push_back(2);
  try {
    auto ck = Checkpoint::open(argv[1]);
    auto backend = make_cpu_backend(1);
    const ModelConfig& c = ck->config();
    std::printf("model %s: %d layers, hidden %lld, vocab %lld, %s embeddings, backend %s\n", argv[1],
                c.num_hidden_layers, (long long)c.hidden_size, (long long)c.vocab_size,
                c.tie_word_embeddings ? "tied" : "untied", backend->name());
    std::printf("| tp | rank | staged MiB | embedding + lm_head MiB | of TP=1 |\n| ---: | ---: | ---: | ---: | ---: |\n");
    double full = 0;
    for (int tp : tps) {
      if (tp < 1) fail("TP ", tp, " must be positive");
      for (int r = 0; r < tp; ++r) {
        StagingOptions so;
        so.tp_rank = r;
        so.tp_size = tp;
        so.show_progress = false;
        const Qwen3Weights w = stage_qwen3_weights(*ck, *backend, so);
        const double b = double(w.resident_bytes);
        if (tp == 1) full = b;
        // The vocabulary tensors of this rank: its embedding rows, plus lm_head unless it shares them.
        const double vocab = double(w.vocab_rows) * double(c.hidden_size) * dtype_size(w.embed_dtype) *
                             (w.lm_head.data == w.embed ? 1 : 2);
        std::printf("| %d | %d | %.1f | %.1f | %.1f %% |\n", tp, r, b / 1048576.0, vocab / 1048576.0, 100.0 * b / full);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "staged_bytes: %s\n", e.what());
    return 1;
  }
  return 0;
}
