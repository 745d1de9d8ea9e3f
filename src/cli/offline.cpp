#include "cli/offline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/bench_profile.h"
#include "cli/generate_config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/spec_cost_report.h"
#include "engine/spec_request_stats.h"
#include "engine/speculative_config.h"
#include "parallel/replicas/replica_set.h"
#include "sampling/stop_checker.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pypto::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One generated sequence (a request with n > 1 has n of them).
struct Sequence {
  size_t prompt_index = 0;
  int32_t index = 0;
  std::vector<int32_t> token_ids;
  std::string text;
  std::string finish_reason;
  std::string error;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<StopChecker> stop;
  bool stopped_by_string = false;
  double first_token_s = -1;
  int64_t cached_prompt_tokens = 0;  // served from the prefix cache
  SpecRequestStats spec_stats;       // --per-request-spec-decode-stats
};

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX)
      fail("--prompt-token-ids '", s, "': '", item, "' is not a token id");
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "?";
}

}  // namespace

int run_offline(const RunOptions& o, const std::string& model_dir) {
  auto tokenizer = Tokenizer::load(model_dir);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> prompt_texts;
  for (const auto& p : o.prompts) {
    prompts.push_back(tokenizer->encode(p));
    prompt_texts.push_back(p);
    if (prompts.back().empty()) fail("--prompt '", p, "' encodes to no tokens");
  }
  for (const auto& p : o.prompt_token_ids) {
    prompts.push_back(parse_id_list(p));
    prompt_texts.push_back(tokenizer->decode(prompts.back()));
  }

  // dp replicas of tp ranks (dp = tp = 1: one engine); prompts are routed over the replicas.
  LoadedEngine le = load_replicas(replica_load_options(o, model_dir));
  ReplicaSet& router = *le.replicas;
  char b1[32], b2[32];
  log_info("model ", model_dir, ": ", le.config.num_hidden_layers, " layers, weights ",
           format_bytes(le.weight_bytes, b1, sizeof b1), " staged in ", le.load_seconds, " s; backend ", le.backend_name,
           ", ", le.threads, " thread(s)");
  log_info(le.capacity.summary(), " (", format_bytes(le.capacity.kv_bytes, b2, sizeof b2), ")");
  if (le.dp * le.tp * le.pp > 1)
    log_info("dp ", le.dp, le.pp > 1 ? str_cat(" x pp ", le.pp) : std::string(), " x tp ", le.tp, ":\n", le.placement);
  ProfileSession profile(o, le, prompts);  // --profile: warm-up request, then recording

  SamplingParams params;
  apply_generate_config(o.generate_config_json, params);
  const SpecStatsLevel spec_level = parse_spec_stats_level(o.per_request_spec_decode_stats);
  const int32_t spec_k =
      o.speculative_config.empty() ? 0 : parse_speculative_config(o.speculative_config).num_speculative_tokens;
  std::printf("Generating %zu prompt(s): model=%s\n", prompts.size(), model_dir.c_str());
  std::fflush(stdout);

  // Submit everything first: the engine batches the prompts together.
  const auto t0 = Clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::vector<Sequence>> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); i++) {
    EngineRequest req;
    req.request_id = "offline-" + std::to_string(i);
    req.prompt_token_ids = prompts[i];
    req.params = params;
    streams.push_back(router.add_request(req).stream);
    for (int32_t k = 0; k < params.n; k++) {
      Sequence s;
      s.prompt_index = i;
      s.index = k;
      s.detok = std::make_unique<IncrementalDetokenizer>(tokenizer, /*skip_special_tokens=*/true);
      s.stop = std::make_unique<StopChecker>(params.stop);
      s.spec_stats = SpecRequestStats(spec_k, spec_level);
      seqs[i].push_back(std::move(s));
    }
  }

  // Collect outputs from all streams as they come, so stop strings end requests promptly.
  size_t done = 0;
  std::vector<bool> finished(prompts.size(), false);
  while (done < prompts.size()) {
    bool progressed = false;
    for (size_t i = 0; i < prompts.size(); i++) {
      if (finished[i]) continue;
      for (RequestOutput& out : streams[i]->drain()) {
        progressed = true;
        Sequence& s = seqs[i][out.index];
        // Every step the engine counted, also one after a stop string (the engine's counters hold it).
        s.spec_stats.observe(out.num_draft_tokens, out.num_accepted_draft_tokens);
        if (!out.new_token_ids.empty() && s.first_token_s < 0)
          s.first_token_s = std::chrono::duration<double>(Clock::now() - t0).count();
        for (int32_t id : out.new_token_ids) {
          if (s.stopped_by_string) break;
          s.token_ids.push_back(id);
          // Ids past the tokenizer's vocabulary (Qwen3 pads its 151,669 tokens to 151,936 embedding
          // rows; only random-weight models sample them) have no text, as in Hugging Face's decode.
          StopChecker::Result r = s.stop->append(id < tokenizer->vocab_size() ? s.detok->push(id) : std::string());
          s.text += r.text;
          if (r.stopped()) {
            s.stopped_by_string = true;
            s.finish_reason = "stop";
            // The engine finishes whole requests: end this one once all its n sequences have
            // stopped (a sequence that stopped early ignores its further tokens).
            bool all = true;
            for (const Sequence& other : seqs[i]) all = all && (other.stopped_by_string || !other.finish_reason.empty());
            if (all) router.finish_request("offline-" + std::to_string(i), FinishReason::Stop);
          }
        }
        s.cached_prompt_tokens = out.num_cached_tokens;
        if (out.finish_reason) {
          if (!s.stopped_by_string) {
            StopChecker::Result r = s.stop->append(s.detok->flush());
            s.text += r.text;
            s.text += s.stop->flush();
            s.finish_reason = finish_name(*out.finish_reason);
          }
          s.error = out.error;
        }
        if (out.request_finished) {
          finished[i] = true;
          done++;
        }
      }
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  size_t total_tokens = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0;
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (size_t i = 0; i < prompts.size(); i++) {
    std::printf("-- prompt %zu/%zu --\n", i + 1, prompts.size());
    for (const Sequence& s : seqs[i]) {
      total_tokens += s.token_ids.size();
      prompt_tokens += static_cast<int64_t>(prompts[i].size());
      cached_tokens += s.cached_prompt_tokens;
      if (params.n > 1) std::printf("[sample %d]\n", s.index);
      std::printf("text: %s\n", s.text.c_str());
      std::string ids;
      for (size_t j = 0; j < s.token_ids.size() && j < 64; j++) ids += (j ? ", " : "") + std::to_string(s.token_ids[j]);
      std::printf("token_ids: [%s%s]\n", ids.c_str(), s.token_ids.size() > 64 ? ", ..." : "");
      std::printf("finish_reason: %s\n", s.finish_reason.c_str());
      if (!s.error.empty()) std::printf("error: %s\n", s.error.c_str());
      results.push_back({{"prompt", prompt_texts[i]},
                         {"prompt_token_ids", prompts[i]},
                         {"index", s.index},
                         {"token_ids", s.token_ids},
                         {"text", s.text},
                         {"finish_reason", s.finish_reason},
                         {"error", s.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.error)},
                         {"num_cached_tokens", s.cached_prompt_tokens},
                         {"timings", {{"time_to_first_token_s", s.first_token_s}, {"total_s", secs}}}});
      if (spec_level != SpecStatsLevel::None)
        results.back()["speculative_decoding_stats"] = spec_request_stats_json(s.spec_stats);
    }
  }
  std::printf("[generate] %zu tokens in %.3fs (%.2f tok/s)\n", total_tokens, secs, secs > 0 ? total_tokens / secs : 0.0);
  std::printf("[prefix-cache] %lld of %lld prompt tokens served from the cache\n", static_cast<long long>(cached_tokens),
              static_cast<long long>(prompt_tokens));
  std::string spec_section;  // --profile's speculative-decoding section
  if (le.loop && le.loop->stats().speculative) {  // --speculative-config: acceptance over every replica
    SpecDecodeStats sd;
    // The cost model's counts over every replica; its estimates are the first replica's.
    SpecCostStats cost = le.loop->stats().spec_cost;
    auto add = [&sd](const SpecDecodeStats& s) {
      sd.num_drafts += s.num_drafts;
      sd.num_draft_tokens += s.num_draft_tokens;
      sd.num_accepted_tokens += s.num_accepted_tokens;
      sd.draft_prefix_cache.queried_tokens += s.draft_prefix_cache.queried_tokens;
      sd.draft_prefix_cache.hit_tokens += s.draft_prefix_cache.hit_tokens;
    };
    add(le.loop->stats().spec_decode);
    for (const auto& l : le.more_loops) {
      const EngineLoopStats st = l->stats();
      add(st.spec_decode);
      for (size_t k = 0; k < std::min(cost.chosen_k.size(), st.spec_cost.chosen_k.size()); ++k)
        cost.chosen_k[k] += st.spec_cost.chosen_k[k];
      cost.steps_speculating += st.spec_cost.steps_speculating;
      cost.steps_plain += st.spec_cost.steps_plain;
      cost.probes += st.spec_cost.probes;
    }
    std::printf("[speculative] %lld drafts, %lld draft tokens, %lld accepted (%.1f %%), mean acceptance length %.2f\n",
                static_cast<long long>(sd.num_drafts), static_cast<long long>(sd.num_draft_tokens),
                static_cast<long long>(sd.num_accepted_tokens), 100.0 * sd.acceptance_rate(),
                sd.mean_acceptance_length());
    if (sd.draft_prefix_cache.queried_tokens > 0)
      std::printf("[prefix-cache] draft model: %lld of %lld looked-up tokens served from its cache\n",
                  static_cast<long long>(sd.draft_prefix_cache.hit_tokens),
                  static_cast<long long>(sd.draft_prefix_cache.queried_tokens));
    if (cost.cost_model)
      std::printf("[speculative] cost model: %lld decode steps speculating, %lld plain, %lld probes\n",
                  static_cast<long long>(cost.steps_speculating), static_cast<long long>(cost.steps_plain),
                  static_cast<long long>(cost.probes));
    spec_section = format_spec_decode_section(sd, cost);
  }
  profile.finish(secs, int64_t(total_tokens), spec_section);  // --profile: the timing report and trace
  if (!o.output_json.empty()) {
    std::ofstream f(o.output_json);
    f << nlohmann::ordered_json{{"model", model_dir}, {"results", results},
                                {"total_tokens", total_tokens}, {"seconds", secs}}
             .dump(2)
      << "\n";
    if (!f) fail(o.output_json, ": cannot write --output-json");
  }
  if (le.dp > 1) {
    const auto counts = router.routed_counts();
    for (size_t r = 0; r < counts.size(); ++r)
      std::printf("[replica %zu] %lld request(s), %lld prompt tokens\n", r, static_cast<long long>(counts[r].requests),
                  static_cast<long long>(counts[r].prompt_tokens));
  }
  router.shutdown();
  for (const auto& v : seqs)
    for (const auto& s : v)
      if (s.finish_reason == "error") return 1;
  return 0;
}

}  // namespace pypto::cli
