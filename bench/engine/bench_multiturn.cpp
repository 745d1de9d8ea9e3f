// A multi-turn chat on a hybrid model (Qwen3.5 / Qwen3.6: Gated DeltaNet layers whose recurrent
// state must be snapshotted for a prefix-cache hit, engine/state_snapshots.h), with prefix caching
// on and off.
//
//   bench_multiturn --model DIR [--preset qwen3.5-0.8b --layers 4] [--turns 4] [--history 2048]
//                   [--message 64] [--answer 32] [--block-size 16] [--kv-cache-memory 2GiB] [--seed 0]
//
// With --preset, a random-weight test checkpoint of that preset (make-test-model's) is written to
// DIR first unless DIR already holds a config.json.
//
// Turn 1's prompt is a --history-token conversation so far; every later turn's prompt is the
// previous prompt, its answer (--answer greedy tokens) and a new --message-token user message, as
// a chat client sends it. Turns run one after another on one engine. Per turn: prompt tokens,
// tokens served from the cache, time to first token; then the same with prefix caching off (every
// turn prefilled in full). Beside them, what a cache that could only resume at multiples of
// 528 or 2048 tokens (hybrid prefix caching aligned to a large block, as reported for other
// engines) would leave to prefill in the same turns: arithmetic from the prompts, not a run.
// Token ids are seeded random (the test models' weights are random too).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "engine/model_runner.h"
#include "model/test_model.h"
#include "parallel/replicas/load_replicas.h"

using namespace pypto;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model, preset;
  int layers = 0;
  int turns = 4, history = 2048, message = 64, answer = 32, block_size = 16;
  std::string kv_cache_memory = "2GiB";
  uint64_t seed = 0;
};

struct Turn {
  int64_t prompt = 0, cached = 0;
  double ttft = 0, seconds = 0;
  std::vector<int32_t> answer;
};

std::vector<int32_t> random_ids(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int32_t> tok(1000, 100000);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = tok(rng);
  return ids;
}

// Runs the chat on a fresh engine; the messages are the same for both runs (same seed).
std::vector<Turn> chat(const Args& a, bool prefix_caching) {
  EngineLoadOptions o;
  o.model_dir = a.model;
  o.scheduler.max_num_seqs = 4;
  o.scheduler.max_model_len = a.history + a.turns * (a.message + a.answer) + 16;
  o.cache.enable_prefix_caching = prefix_caching;
  o.cache.block_size = a.block_size;
  o.kv_cache_memory = int64_t(parse_byte_size("--kv-cache-memory", a.kv_cache_memory.c_str()));
  o.show_progress = false;
  o.prefault_kv_cache = true;
  LoadedEngine le = load_engine(o);
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> prompt = random_ids(rng, a.history);
  std::vector<Turn> out;
  for (int t = 0; t < a.turns; ++t) {
    EngineRequest r;
    r.request_id = "turn" + std::to_string(t);
    r.prompt_token_ids = prompt;
    r.params.max_tokens = a.answer;
    r.params.temperature = 0.0f;
    r.params.ignore_eos = true;
    Turn turn;
    turn.prompt = int64_t(prompt.size());
    const Clock::time_point t0 = Clock::now();
    std::shared_ptr<RequestStream> s = le.loop->add_request(r);
    while (auto o2 = s->next()) {
      if (turn.answer.empty() && !o2->new_token_ids.empty())
        turn.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
      turn.answer.insert(turn.answer.end(), o2->new_token_ids.begin(), o2->new_token_ids.end());
      if (o2->finish_reason && *o2->finish_reason != FinishReason::Length)
        fail("turn ", t, " finished early: ", o2->error);
      if (o2->request_finished) turn.cached = o2->num_cached_tokens;
    }
    turn.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    prompt.insert(prompt.end(), turn.answer.begin(), turn.answer.end());
    const std::vector<int32_t> msg = random_ids(rng, a.message);
    prompt.insert(prompt.end(), msg.begin(), msg.end());
    out.push_back(std::move(turn));
  }
  le.loop->shutdown();
  return out;
}

// Prompt tokens left to prefill when a hit may only end at a multiple of `align` tokens, at most
// the previous turn's computed tokens (its prompt and all but its last answer token).
int64_t aligned_prefill(const std::vector<Turn>& turns, size_t t, int64_t align) {
  if (t == 0) return turns[0].prompt;
  const int64_t reusable = std::min(turns[t - 1].prompt + int64_t(turns[t - 1].answer.size()) - 1, turns[t].prompt - 1);
  return turns[t].prompt - reusable / align * align;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_multiturn: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    const std::string f = argv[i];
    if (f == "--model") a.model = next();
    else if (f == "--preset") a.preset = next();
    else if (f == "--layers") a.layers = std::atoi(next());
    else if (f == "--turns") a.turns = std::atoi(next());
    else if (f == "--history") a.history = std::atoi(next());
    else if (f == "--message") a.message = std::atoi(next());
    else if (f == "--answer") a.answer = std::atoi(next());
    else if (f == "--block-size") a.block_size = std::atoi(next());
    else if (f == "--kv-cache-memory") a.kv_cache_memory = next();
    else if (f == "--seed") a.seed = std::strtoull(next(), nullptr, 10);
    else {
      std::fprintf(stderr, "bench_multiturn: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  if (a.model.empty() || a.turns < 1 || a.history < 1 || a.message < 1 || a.answer < 1 || a.block_size < 1) {
    std::fprintf(stderr, "bench_multiturn: --model DIR is required; --turns, --history, --message, --answer and "
                         "--block-size must be positive\n");
    return 2;
  }
  try {
    if (!a.preset.empty() && !std::filesystem::exists(std::filesystem::path(a.model) / "config.json")) {
      TestModelOptions t;
      t.preset = a.preset;
      if (a.layers > 0) t.layers = a.layers;
      t.out_dir = a.model;
      make_test_model(t);
    }
    const std::vector<Turn> on = chat(a, true), off = chat(a, false);
    for (size_t t = 0; t < on.size(); ++t)
      if (on[t].answer != off[t].answer) fail("turn ", t, ": the answers with and without prefix caching differ");
    std::printf("turn  prompt  cached  prefilled | TTFT on (s)  TTFT off (s)  speed-up | prefill if aligned to 528 / 2048\n");
    for (size_t t = 0; t < on.size(); ++t)
      std::printf("%4zu  %6lld  %6lld  %9lld | %11.3f  %12.3f  %7.1fx | %lld / %lld\n", t + 1,
                  static_cast<long long>(on[t].prompt), static_cast<long long>(on[t].cached),
                  static_cast<long long>(on[t].prompt - on[t].cached), on[t].ttft, off[t].ttft, off[t].ttft / on[t].ttft,
                  static_cast<long long>(aligned_prefill(on, t, 528)), static_cast<long long>(aligned_prefill(on, t, 2048)));
    // Decode after the first token, all turns: the snapshots taken while decoding (one state copy
    // every block_size tokens) are its only extra work with the cache on.
    double dec_on = 0, dec_off = 0;
    int64_t dec_tokens = 0;
    for (size_t t = 0; t < on.size(); ++t) {
      dec_on += on[t].seconds - on[t].ttft;
      dec_off += off[t].seconds - off[t].ttft;
      dec_tokens += int64_t(on[t].answer.size()) - 1;
    }
    std::printf("decode after the first token: %.2f tokens/s with the cache, %.2f without\n", double(dec_tokens) / dec_on,
                double(dec_tokens) / dec_off);
    double later_on = 0, later_off = 0;
    for (size_t t = 1; t < on.size(); ++t) {
      later_on += on[t].ttft;
      later_off += off[t].ttft;
    }
    const double n = double(std::max<size_t>(1, on.size() - 1));
    std::printf("{\"turn1_ttft_s\": %.4f, \"later_ttft_on_s\": %.4f, \"later_ttft_off_s\": %.4f, \"answers_equal\": true}\n",
                on[0].ttft, later_on / n, later_off / n);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_multiturn: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
