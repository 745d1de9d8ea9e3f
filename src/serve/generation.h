#pragma once
// One HTTP generation request as the engines see it: one engine request per prompt with the
// request's n (the engine shares the prompt's prefill among its n sequences; sequence k draws from
// seed + k); a stop string found in one sequence finishes only that sequence. Turns engine outputs into text
// deltas: incremental detokenization (whole UTF-8 characters only), stop strings across token
// boundaries (trimmed, OpenAI-style), logprobs, finish reasons, metrics, and aborts on the way
// out (client gone, timeout, shutdown, destructor).
//
// Finish reasons, one mapping for every endpoint: FinishReason::Stop (eos, stop token, stop
// string) -> "stop"; Length (max_tokens or max_model_len) -> "length"; Abort (client gone,
// request timeout, server shutdown) -> "abort"; Error (the engine failed the step) -> "error".
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_loop.h"
#include "engine/spec_request_stats.h"
#include "sampling/stop_checker.h"
#include "structured/matcher.h"
#include "serve/server_state.h"
#include "tokenizer/detokenizer.h"

namespace pypto {

struct SequenceSpec {
  int32_t index = 0;        // choice index
  size_t prompt_index = 0;  // which prompt (completions with several)
  int32_t seq_index = 0;    // k: which of the prompt's n sequences (RequestOutput::index)
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;    // n = 1; the engine request of the prompt gets n and the base seed
  // Structured outputs / tool calls (serve/structured_request.h); the same for all of a prompt's n.
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  structured::MatcherOptions grammar_options;
};

// One sampled token with what logprobs responses need.
struct TokenInfo {
  int32_t token_id = 0;
  float logprob = 0;
  std::vector<TokenLogprob> top;
};

struct ChoiceDelta {
  int32_t index = 0;
  std::string text;               // newly released text (stop strings trimmed)
  std::vector<TokenInfo> tokens;  // tokens consumed by this delta, when logprobs were asked
  std::optional<std::string> finish_reason;
  std::string error;              // with finish_reason "error"
  // --per-request-spec-decode-stats: the choice's counts, set on its finishing delta only.
  std::optional<SpecRequestStats> spec_stats;
};

const char* finish_reason_text(FinishReason r);

class Generation {
 public:
  Generation(ServerState& state, std::string request_id, std::vector<SequenceSpec> specs, bool skip_special_tokens,
             std::chrono::steady_clock::time_point arrival);
  ~Generation();  // aborts whatever is unfinished
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Reserves queue room (503 + Retry-After when full) and queues every sequence. Throws ApiError;
  // on a throw nothing stays queued.
  void submit();
  // Waits up to `budget` for engine outputs; returns what they released (possibly nothing).
  std::vector<ChoiceDelta> poll(std::chrono::milliseconds budget);
  bool done() const { return num_unfinished_ == 0; }
  // Finishes every unfinished sequence with finish reason "abort" and frees its engine request.
  std::vector<ChoiceDelta> abort();

  // Usage: each prompt counted once, completion tokens over all sequences.
  int64_t prompt_tokens() const;
  int64_t completion_tokens() const;
  int64_t cached_tokens() const;
  size_t num_sequences() const { return seqs_.size(); }

 private:
  // The engine request of one prompt: its n sequences share it.
  struct Group {
    std::string engine_id;
    size_t engine = 0;
    bool submitted = false;
    std::shared_ptr<RequestStream> stream;
    std::vector<size_t> seqs;  // index into seqs_, by sequence index k
  };
  struct Seq {
    SequenceSpec spec;
    size_t group = 0;
    size_t engine = 0;
    bool submitted = false;
    std::unique_ptr<IncrementalDetokenizer> detok;
    std::unique_ptr<StopChecker> stop;
    int64_t num_tokens = 0;
    int64_t num_cached = 0;
    bool got_output = false;
    bool finished = false;
    std::chrono::steady_clock::time_point last_output;
    RequestTimes times;  // the engine's timestamps as of the latest output (phase histograms)
    SpecRequestStats spec_stats;  // --per-request-spec-decode-stats: the verify steps so far
  };
  void handle(Seq& s, RequestOutput& o, ChoiceDelta& d);
  void finish(Seq& s, ChoiceDelta& d, const std::string& reason);
  void release(Seq& s);

  ServerState& state_;
  std::string request_id_;
  std::vector<Seq> seqs_;
  std::vector<Group> groups_;
  bool skip_special_tokens_;
  std::chrono::steady_clock::time_point arrival_;
  int64_t reserved_ = 0;  // queue room reserved in submit()
  size_t num_unfinished_ = 0;
};

}  // namespace pypto
