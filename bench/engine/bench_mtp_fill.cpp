// What keeping the MTP context through a stretch with speculation off costs (engine/mtp_proposer.h:
// the head computes no rows while speculation is off and fills the N missed rows in one pass when
// it resumes), against the alternative of computing its row every step, and against a plain step.
//
//   bench_mtp_fill --model DIR [--quantization none|int8|int4] [--threads N] [--rows 8,32,128]
//                  [--repeats 5] [--tokens 32] [--matmul-precision high]
//
// Measured in one process, alternating per repeat (medians): a plain decode step of the target
// (an engine without speculation, --tokens tokens after a 64-token prompt, decode time per token);
// "fill N": one MTP pass over N rows of one sequence without logits (what the resume computes
// beyond the draft pass it runs anyway: in prepare() the missed rows ride in draft 1's pass, whose
// last row's logits are needed either way); "N x 1 row": N one-row passes without logits (what
// keeping the context warm every step would cost over the same N steps). Per row, and as a share
// of a plain step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/model_runner.h"
#include "kernels/backend.h"
#include "model/kv_cache.h"
#include "model/mtp_head.h"
#include "parallel/replicas/load_replicas.h"
#include "greedy_run.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

using pypto::bench::median;

namespace {

struct Args {
  std::string model, quantization = "none", precision = matmul_precision_name(kDefaultMatmulPrecision);
  std::vector<int> rows = {8, 32, 128};
  int threads = 0, repeats = 5, tokens = 32;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_mtp_fill: %s needs a value\n", f.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--model") a.model = next();
    else if (f == "--quantization") a.quantization = next();
    else if (f == "--threads") a.threads = std::stoi(next());
    else if (f == "--repeats") a.repeats = std::max(1, std::stoi(next()));
    else if (f == "--tokens") a.tokens = std::max(2, std::stoi(next()));
    else if (f == "--matmul-precision") a.precision = next();
    else if (f == "--rows") {
      a.rows.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        a.rows.push_back(std::max(1, std::stoi(s.substr(p, q - p))));
        p = q + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: bench_mtp_fill --model DIR [--quantization none|int8|int4] [--threads N] [--rows 8,32,128] "
                   "[--repeats 5] [--tokens 32] [--matmul-precision highest|high|medium]\n");
      return 2;
    }
  }
  if (a.model.empty()) fail("bench_mtp_fill: --model is required");
  try {
    // The target with its MTP head staged (an MTP engine), and a plain engine over the same weights.
    EngineLoadOptions o;
    o.model_dir = a.model;
    o.scheduler.max_num_seqs = 1;
    o.scheduler.max_model_len = 64 + a.tokens + 64;
    o.kv_cache_memory = int64_t(256) << 20;
    o.show_progress = false;
    o.threads = a.threads;
    o.matmul_precision = parse_matmul_precision(a.precision);
    o.quantization = parse_quantization(a.quantization);
    o.scheduler.speculative.method = SpeculativeMethod::Mtp;
    o.scheduler.speculative.num_speculative_tokens = 1;
    o.scheduler.speculative.validate();
    LoadedEngine mtp_engine = load_engine(o);
    o.reuse_weights = mtp_engine.weights;
    o.scheduler.speculative = SpeculativeConfig{};
    LoadedEngine plain = load_engine(o);
    const Qwen3Weights& w = *mtp_engine.weights.at(0);
    const int64_t H = w.config.hidden_size, V = w.config.vocab_size;
    std::unique_ptr<Backend> backend =
        make_cpu_backend(mtp_engine.threads, {}, parse_matmul_precision(a.precision));
    MtpHead head(w, *backend);
    constexpr int32_t kBs = 16;
    const int maxr = *std::max_element(a.rows.begin(), a.rows.end());
    const int32_t blocks = (maxr + kBs - 1) / kBs + 1;
    KvCache cache(head.kv_cache_spec(blocks, kBs, DType::BF16));
    std::vector<int32_t> table(static_cast<size_t>(blocks));
    for (int32_t b = 0; b < blocks; ++b) table[size_t(b)] = b;
    std::mt19937 rng(37);
    std::uniform_int_distribution<int32_t> tok(0, 151642);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<int32_t> ids(static_cast<size_t>(maxr));
    for (int32_t& t : ids) t = tok(rng);
    std::vector<float> hidden(static_cast<size_t>(maxr * H));
    for (float& x : hidden) x = nd(rng);
    std::vector<float> logits(static_cast<size_t>(V));
    ForwardBatch batch;
    // One pass over rows [0, n) of one sequence at positions 0.. (the last row's logits when asked).
    auto pass = [&](int32_t first, int32_t n, bool with_logits) {
      batch.clear();
      batch.max_blocks_per_seq = blocks;
      batch.add_sequence(ids.data() + first, n, first, table.data(), blocks, kBs,
                         with_logits ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
      head.forward(batch, hidden.data() + int64_t(first) * H, cache, logits.data());
    };
    std::vector<int32_t> prompt(64);
    for (int32_t& t : prompt) t = tok(rng);
    std::vector<double> plain_step;
    std::vector<std::vector<double>> fill(a.rows.size()), single(a.rows.size());
    for (int rep = 0; rep < a.repeats; ++rep) {
      {  // a plain decode: seconds per decode step
        EngineRequest r;
        r.request_id = "plain" + std::to_string(rep);
        r.prompt_token_ids = prompt;
        r.params.temperature = 0.0f;
        r.params.max_tokens = a.tokens;
        r.params.ignore_eos = true;
        auto stream = plain.loop->add_request(r);
        Clock::time_point first{}, last{};
        int64_t n = 0;
        while (auto out = stream->next()) {
          if (out->finish_reason == FinishReason::Error) fail("the plain request failed: ", out->error);
          if (out->new_token_ids.empty()) continue;
          if (n == 0) first = Clock::now();
          last = Clock::now();
          n += int64_t(out->new_token_ids.size());
        }
        plain_step.push_back(std::chrono::duration<double>(last - first).count() / double(n - 1));
      }
      for (size_t i = 0; i < a.rows.size(); ++i) {
        const int32_t n = a.rows[i];
        auto t0 = Clock::now();
        pass(0, n, false);
        fill[i].push_back(seconds_since(t0));
        t0 = Clock::now();
        for (int32_t r = 0; r < n; ++r) pass(r, 1, false);
        single[i].push_back(seconds_since(t0));
      }
    }
    const double step = median(plain_step);
    std::printf("model %s (%s), backend %s, %d threads, %s precision, %d repeats; plain decode step %.2f ms\n",
                a.model.c_str(), a.quantization.c_str(), backend->name(), mtp_engine.threads,
                a.precision.c_str(), a.repeats, step * 1e3);
    std::printf("%6s | %12s %12s %14s | %12s %12s %14s\n", "rows", "fill ms", "ms per row", "row / plain", "N x 1 row ms",
                "ms per row", "row / plain");
    for (size_t i = 0; i < a.rows.size(); ++i) {
      const double f = median(fill[i]), s = median(single[i]), n = a.rows[i];
      std::printf("%6d | %12.2f %12.3f %13.3fx | %12.2f %12.3f %13.3fx\n", a.rows[i], f * 1e3, f / n * 1e3, f / n / step,
                  s * 1e3, s / n * 1e3, s / n / step);
    }
    std::printf("(fill: one MTP pass over N rows, as the resume after a stretch without "
                "speculation computes; N x 1 row: N one-row passes without logits, as a context kept warm every step "
                "would; row / plain: per row, against a plain decode step of the target; medians)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_mtp_fill: %s\n", e.what());
    return 1;
  }
  return 0;
}
