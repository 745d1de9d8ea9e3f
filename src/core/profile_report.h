#pragma once
// The --profile timing report, computed from a recorded prof::Trace.
//
// Per engine-loop iteration that ran work (a "step"), on the engine thread:
//   end-to-end step time  = this iteration's start → the next busy iteration's start (for the
//                           last one: its own length). For decode steps this is TPOT.
//   ① kernel time         = Σ "op" events that are not host.* (needs --profile-level kernel)
//   ② model, not kernels  = forward span − ①
//   ③ scheduling + prep   = "schedule" phase + ("execute" phase − forward span) − ③'
//   ③' drafting           = Σ "draft" spans (speculative decoding: the drafter's passes and
//                           prefills in "schedule", the MTP / EAGLE-3 head rows in "execute");
//                           what runs inside them (a draft model's forward and its ops) counts
//                           here only, not in ①, ② or the op families
//   ④ sampling + output   = "sample" + "update" phases (detokenization runs on the caller's
//                           thread, overlapped with the next step, and is reported apart)
//   ⑤ engine/API wrap     = iteration − step span (request intake, publishing outputs)
//                           + step span − its phases
//   residual              = end-to-end − (① + ② + ③ + ④ + ⑤): loop wake-up and lock hand-off
// Every layer is measured; only the residual is a difference.
#include <cstdint>
#include <string>
#include <vector>

#include "core/profiler.h"

namespace pypto::prof {

struct StepLayers {
  double e2e = 0, kernel = 0, model_host = 0, sched_prep = 0, drafting = 0, sampling = 0, wrap = 0;
  double residual() const { return e2e - (kernel + model_host + sched_prep + drafting + sampling + wrap); }
};

struct StepRecord {
  int64_t prefill_tokens = 0, decode_tokens = 0;
  StepLayers layers;
  bool is_decode() const { return prefill_tokens == 0 && decode_tokens > 0; }
};

struct NamedTime {
  std::string name;
  double ms_per_step = 0;  // mean over decode steps
  double share = 0;        // of the mean decode end-to-end step time
};

struct Stats {
  size_t n = 0;
  double mean = 0, p50 = 0, p99 = 0, total = 0;
};

struct ProfileReport {
  Level level = Level::Off;
  std::vector<StepRecord> steps;
  size_t prefill_steps = 0, decode_steps = 0;
  int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_s = 0, decode_s = 0;       // Σ end-to-end time of those steps
  Stats decode_step_ms;                      // TPOT per step
  StepLayers decode_mean, prefill_mean;      // ms
  bool has_kernel_detail = false;            // ① separated from ②
  bool has_drafting = false;                 // some step ran a "draft" span (③' shown)
  std::vector<NamedTime> families;           // attention, mlp, norm, lm_head, sampling, …
  std::vector<NamedTime> layers;             // per transformer layer
  std::vector<NamedTime> ops;                // each op name (verbose)
};

// What the caller measured outside the engine thread.
struct RunInfo {
  double load_s = -1;       // checkpoint open + staging
  double warmup_s = -1;     // warm-up request (excluded from everything else)
  std::vector<double> ttft_s;
  int64_t output_tokens = 0;
  double wall_s = 0;        // generation wall time
  // --speculative-config: the engine's acceptance and cost-model section, already formatted
  // (engine/spec_cost_report.h); "" when speculation is off.
  std::string speculation;
};

Stats stats_of(std::vector<double> v);
// Engine-side TTFT per request: arrival ("queued" start) to the end of its last "prefill" event
// (the iteration that published its first token).
std::vector<double> request_ttfts_s(const Trace& t);
ProfileReport analyze_trace(const Trace& t, Level level);
std::string format_report(const ProfileReport& r, const RunInfo& info);

}  // namespace pypto::prof
