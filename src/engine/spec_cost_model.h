#pragma once
// The measured cost model of speculative decoding ("never slower", issue 30 point 4). Speculation
// pays only when the tokens a verify step emits outweigh what it costs: a step verifying k drafts
// computes k + 1 rows per request (on a dense target nearly free; on an MoE target every row
// routes to its own experts, so a 2-row step read 1.86x the bytes of a plain step on the
// 35B-A3B shape) and the drafter runs k passes (an MTP head with a 248K-row lm_head: 0.44x a plain
// step each). So the engine times its own steps and chooses each decoding request's k per step:
//
//   rate(k_1..k_b) = sum_i E(a_i, k_i) / (verify(b, 1 + sum_i k_i / b) + max_i k_i * draft(b))
//   E(a, k) = (1 - a^(k+1)) / (1 - a)   expected tokens of a verify of k drafts (k + 1 when a = 1)
//
// over the step's b decoding requests, each with its measured per-position acceptance a_i and
// k_i <= cap_i (its throttle's k and the tokens it has left); plain decoding is rate(0..0) =
// b / verify(b, 1). The verify cost depends on the step's rows (1 + sum k_i / b per request: one
// forward pass over all of them), the drafting cost on its passes (the largest k_i).
//
// Per-request choice: for every pass count P = 1 .. max_k, the draft positions (request i, j <=
// min(P, cap_i)) are taken in order of their expected tokens a_i^j, highest first: for a given
// number of rows that is the most tokens any assignment gets, so the best prefix over all P is
// the best assignment. A request that keeps rejecting (a_i ~ 0) adds rows and no tokens: k_i = 0,
// while one that copies its prompt keeps drafting in the same step. Speculation must beat plain
// decoding by kMargin, else every k_i = 0.
//
// Granularity: the step's cost depends on the batch as a whole (its rows are one forward pass), and
// it grows with the batch (more requests' rows per expert, a bigger share of compute over
// bandwidth), so costs are kept per batch-size bucket (1, 2, 3-4, 5-8, ... decoding requests) and,
// in a bucket, on a grid of rows per request 1 .. max_k + 1; a step between grid points (mixed k)
// counts for the nearest one, moved along the current slope. Requests whose drafts keep being
// rejected are also stopped one by one by their SpecThrottle (cap_i = 0).
//
// Estimates: the median of the last kWindow step times per (bucket, grid point) over steps that only
// decode (prefill chunks would mix another cost in), so one noisy step (the host is shared) cannot
// flip the choice; a grid point not re-measured for kStale decode steps keeps only its median, so
// its next sample (a probe's) weighs as much as the old estimate. The drafter's time per pass per
// bucket is an EMA. Unmeasured rows are interpolated linearly between measured ones (extrapolated
// with the last slope): the prior that a verify's cost grows about linearly in its rows. A grid
// point's estimate is at least that of every smaller one (more rows never cost less; grid points
// timed in different load spells of a shared host can say otherwise), so at acceptance 0, where a
// verify emits what a plain step does, speculation never looks faster than plain decoding.
//
// Warm-up, sized for slow steps (issue 30/37: the full-depth Qwen3.6-27B shape with MTP on 2
// threads, a 1.3 s plain step, a 98 ms drafting pass, a step drafting k = 1/2/3 costing
// 1.60/2.29/2.73x a plain one, every draft accepted: a 24-token request is only ~6-12 steps, so
// each warm-up step is several % of it). The first decode steps of a bucket explore: one plain
// step, then one step with every request at its cap (the longest k; k = 1 only when the engine's
// drafts have mostly been rejected, global acceptance < kExploreLongest), and from the third step
// on it decides from the first sample of each grid point (the median window fills later), the
// rows between plain and the cap on the straight line. On the shape above at max k = 3, with the
// acceptance prior after one fully accepted run (alpha 0.95): verify(4) = 2.73 * 1.3 - 3 * 0.098
// = 3.25 s, so the line gives verify(2) = 1.95 s, verify(3) = 2.60 s, and the rates are k = 3:
// 3.71 / 3.54 s = 1.05 tok/s, k = 2: 2.85 / 2.80 = 1.02, k = 1: 1.95 / 2.05 = 0.95, plain
// 1 / 1.3 = 0.77: it speculates at k = 3 from the third step. The warm-up costs one plain step
// (1.3 s for 1 token, where k = 3 gives 1.47 tokens per plain step's time): the 24-token request
// takes 1.3 + 5 * 3.55 + 2.98 (the last step has room for 2 drafts) = 22.0 s against 21.3 s at a
// forced k = 3, 97 % of its rate (SlowStepsConvergeWithinAShortRequest). The previous warm-up
// (plain, then k = 1, then k = 3 extrapolated from k = 1's slope) reached 93 %.
//
// Not giving up on one sample: a single step time can be off by more than kMargin (a drafter
// catching its context up after a plain step, the shared host), and with 1.3 s steps the next
// probe (kFirstProbe steps) comes after the request ends, so a wrong "off" costs the whole
// request. So while a bucket has fewer than kConfirm speculative step times, a verdict for plain
// that wins by less than kNoise (8 %) speculates again with the best speculative plan: at most
// kConfirm - 1 more steps, each at most 8 % slower than plain when plain really was better. A
// verdict driven by acceptance (drafts rejected: a few tenths of a token per draft) wins by
// more than that, and a request's rejections also stop it through its throttle.
//
// Probing: the losing side is retried now and then, so a change is noticed (a request starts
// copying its prompt; a cost measured during a noisy spell): after `interval` decode steps one
// step takes the other choice (k = 1 when speculation is off, k = 0 when it is on). A probe that
// does not change the decision doubles the interval (kFirstProbe .. kMaxProbe steps); a changed
// decision resets it. The probes' cost is bounded by their backoff: at kFirstProbe = 32, with
// every draft rejected, the probe steps are about 1 in 32 at first and 1 in 1024 later. The
// interval is counted in decode steps, not seconds: a probe's extra cost is a share of one step,
// so steps bound the overhead at any step time (1/32 of a step's cost, whether a step takes 1 ms
// or 1.3 s); slow steps are served by the warm-up above, not by faster probes.
//
// The choice of k only changes speed: verification is lossless whatever k is (engine/spec_verify.h).
#include <cstdint>
#include <span>
#include <vector>

#include "engine/spec_cost_stats.h"

namespace pypto {

// Expected tokens a verify of k drafts emits when each draft is accepted with probability a
// (independently, until the first rejection), the target's own token included: 1 + a + .. + a^k.
double expected_tokens(double a, int32_t k);

// A request's per-position acceptance, from its verify steps: a run of k drafts with `accepted`
// of them accepted saw `accepted` successes and, when accepted < k, one failure (the maximum-
// likelihood estimate of a geometric run). Counts decay so recent behaviour dominates.
class AcceptanceEstimate {
 public:
  static constexpr double kDecay = 0.9;  // per verify step of this request
  void observe(int32_t drafted, int32_t accepted);
  // Blended with `prior` (the engine-wide estimate) at weight 1 observation.
  double alpha(double prior) const { return (successes_ + prior) / (successes_ + failures_ + 1.0); }
  double observations() const { return successes_ + failures_; }

 private:
  double successes_ = 0, failures_ = 0;
};

class SpecCostModel {
 public:
  static constexpr double kMargin = 0.03;      // speculation must beat plain decoding by 3 %
  static constexpr double kEma = 0.25;         // weight of a new drafting time
  static constexpr int32_t kWindow = 5;        // step times per grid point (median)
  static constexpr int32_t kStale = 256;       // decode steps without a sample: keep the median only
  static constexpr int32_t kFirstProbe = 32;   // decode steps before the first probe
  static constexpr int32_t kMaxProbe = 1024;
  static constexpr int32_t kContextLead = 4;   // steps before a probe a drafter resumes its context
  static constexpr double kGlobalDecay = 0.99;
  static constexpr double kExploreLongest = 0.5;  // engine-wide acceptance to explore at the cap
  static constexpr int32_t kConfirm = 3;        // speculative step times before a close "off"
  static constexpr double kNoise = 0.08;        // "close": plain ahead by less than this

  // enabled false ("cost_model": false in --speculative-config): always max_k (the throttle
  // still applies per request), for measuring what forced speculation gives.
  explicit SpecCostModel(int32_t max_k = 0, bool enabled = true);

  // One decoding request of the step: its acceptance and the most drafts it may take.
  struct Candidate {
    double alpha = 0;
    int32_t cap = 0;
  };
  // Each request's k for this step (parallel to `requests`, k_i <= cap_i). Counts a decode step
  // towards the next probe. No candidate with cap > 0: all 0, and nothing is counted.
  std::vector<int32_t> choose(std::span<const Candidate> requests);
  // The largest k of choose() (tests of one request, or of a uniform batch).
  int32_t choose_k(std::span<const Candidate> requests);
  // The decision without probing or exploration, for the rows measured so far (tests, bench).
  std::vector<int32_t> best(std::span<const Candidate> requests) const;
  int32_t best_k(std::span<const Candidate> requests) const;

  // A step that only decoded: `batch` requests computing `rows` rows per request on average
  // (1 + the step's drafts / batch), in `seconds` (forward, and sampling of every row).
  void observe_step(int32_t batch, double rows, double seconds);
  // The drafter's time for a step of `batch` requests that ran `passes` drafting passes.
  void observe_drafting(int32_t batch, int32_t passes, double seconds);
  // Every verify step of any request: the engine-wide acceptance, a new request's prior.
  void observe_acceptance(int32_t drafted, int32_t accepted);
  double global_alpha() const;

  // Whether a drafter with per-request context (an MTP head, a draft model) should keep it up to
  // date in the step choose_k() just chose for: speculation is on, or k = 1 is explored, or a
  // probe comes within kContextLead steps. False in plain probes and the plain exploration step,
  // which measure what plain decoding costs. When false, an MTP head skips its rows (keeping the
  // target's hidden rows and filling them in one pass when its context is needed again) and a
  // draft model its prefill.
  bool context_needed() const { return context_; }

  bool enabled() const { return enabled_; }
  int32_t max_k() const { return max_k_; }
  // Estimated seconds of a step of `batch` requests at `rows` rows per request (< 0: unknown).
  double step_seconds(int32_t batch, double rows) const;
  double draft_seconds(int32_t batch) const;
  int64_t probes() const { return stats_.probes; }
  int32_t probe_interval() const { return interval_; }
  // The decisions so far and the current estimates (/metrics, --profile).
  const SpecCostStats& stats() const { return stats_; }

 private:
  struct GridPoint {
    std::vector<double> samples;  // the last kWindow step times, a ring
    size_t next = 0;              // where the next sample goes
    double median = -1;           // < 0: never measured
    int64_t last_step = 0;        // decode step of the newest sample
  };
  struct Bucket {
    std::vector<GridPoint> cost;  // [max_k + 2] step times at r rows per request (index r >= 1)
    double draft = -1;            // seconds per drafting pass; < 0 unknown
  };
  // A per-request assignment and what it is expected to give.
  struct Plan {
    std::vector<int32_t> ks;
    double seconds = -1, rate = -1;  // < 0: the costs are not known
  };
  static size_t bucket_index(int32_t batch);
  const Bucket* find(int32_t batch) const;
  Bucket& at(int32_t batch);
  static double estimate(const Bucket& b, double rows);
  // Step times measured at rows >= 2 (in the windows) of bucket `b`.
  static size_t spec_samples(const Bucket& b);
  void add_sample(GridPoint& p, double seconds);
  // Plain decoding and the best speculative assignment for `requests` on bucket `b`.
  Plan plain_plan(const Bucket& b, std::span<const Candidate> requests) const;
  Plan best_spec_plan(const Bucket& b, std::span<const Candidate> requests) const;
  // The decision between the two (kMargin); records the estimates in stats_ when `record`.
  std::vector<int32_t> decide(const Bucket& b, std::span<const Candidate> requests, SpecCostStats* record) const;
  void count(std::span<const int32_t> ks);

  int32_t max_k_;
  bool enabled_;
  std::vector<Bucket> buckets_;
  double global_successes_ = 0, global_failures_ = 0;
  int32_t decision_ = 0;          // the largest k of the last non-probe choice
  int32_t since_probe_ = 0;
  int32_t interval_ = kFirstProbe;
  bool probed_ = false;           // the last choice was a probe: judge it at the next decision
  int32_t before_probe_ = 0;
  bool context_ = true;
  int64_t decode_steps_ = 0;      // steps that chose (the clock of staleness)
  SpecCostStats stats_;
};

}  // namespace pypto
