#include "serve/spec_decode_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pypto {

namespace {

void counter_header(std::string& out, const std::string& name, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
}

// A gauge's value: an estimate not measured yet (< 0) is NaN.
std::string value(double v, bool estimate) {
  if (estimate && v < 0) return "NaN";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void render_spec_decode_metrics(std::string& out, const std::vector<EngineGauges>& gauges,
                                const std::function<std::string(size_t)>& labels) {
  if (std::none_of(gauges.begin(), gauges.end(), [](const EngineGauges& g) { return g.speculative; })) return;
  auto counter = [&](const char* name, const char* help, auto get) {
    counter_header(out, name, help);
    for (size_t i = 0; i < gauges.size(); ++i)
      out += std::string(name) + "{" + labels(i) + "} " + std::to_string(get(gauges[i].spec_decode)) + "\n";
  };
  counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.",
          [](const SpecDecodeStats& s) { return s.num_drafts; });
  counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.",
          [](const SpecDecodeStats& s) { return s.num_draft_tokens; });
  counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
          [](const SpecDecodeStats& s) { return s.num_accepted_tokens; });
  // The draft model's own prefix cache, beside the target's vllm:prefix_cache_{queries,hits}_total.
  counter("pypto:draft_prefix_cache_queries_total",
          "Draft model prefix cache queries, in terms of number of queried tokens (0 for other drafters).",
          [](const SpecDecodeStats& s) { return s.draft_prefix_cache.queried_tokens; });
  counter("pypto:draft_prefix_cache_hits_total", "Draft model prefix cache hits, in terms of number of cached tokens.",
          [](const SpecDecodeStats& s) { return s.draft_prefix_cache.hit_tokens; });
  const char* per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
  counter_header(out, per_pos, "Accepted tokens per draft position.");
  for (size_t i = 0; i < gauges.size(); ++i) {
    const SpecDecodeStats& s = gauges[i].spec_decode;
    // Every position up to the configured k, so a position never accepted still reads 0.
    const size_t k = std::max(s.accepted_per_pos.size(), size_t(std::max(0, gauges[i].num_speculative_tokens)));
    for (size_t p = 0; p < k; ++p)
      out += std::string(per_pos) + "{" + labels(i) + ",position=\"" + std::to_string(p) + "\"} " +
             std::to_string(p < s.accepted_per_pos.size() ? s.accepted_per_pos[p] : 0) + "\n";
  }

  // The cost model (engine/spec_cost_model.h): what it chose, and the estimates it chose from.
  auto cost_series = [&](const char* name, const char* type, const char* help, auto get, bool estimate = false) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (size_t i = 0; i < gauges.size(); ++i)
      out += std::string(name) + "{" + labels(i) + "} " + value(double(get(gauges[i].spec_cost)), estimate) + "\n";
  };
  cost_series("pypto:spec_decode_speculating", "gauge",
              "1 while the cost model's decision drafts for some request, 0 while it decodes plainly.",
              [](const SpecCostStats& c) { return c.speculating ? 1 : 0; });
  cost_series("pypto:spec_decode_last_k", "gauge", "The largest k the cost model chose in the last decode step.",
              [](const SpecCostStats& c) { return c.last_k; });
  const char* chosen = "pypto:spec_decode_chosen_k_total";
  counter_header(out, chosen, "Decoding request-steps by the k the cost model chose for the request (0: no drafts).");
  for (size_t i = 0; i < gauges.size(); ++i) {
    const SpecCostStats& c = gauges[i].spec_cost;
    const size_t n = std::max(c.chosen_k.size(), size_t(std::max(0, gauges[i].num_speculative_tokens)) + 1);
    for (size_t k = 0; k < n; ++k)
      out += std::string(chosen) + "{" + labels(i) + ",k=\"" + std::to_string(k) + "\"} " +
             std::to_string(k < c.chosen_k.size() ? c.chosen_k[k] : 0) + "\n";
  }
  cost_series("pypto:spec_decode_steps_speculating_total", "counter",
              "Decode steps where the cost model let some request draft, k > 0 (probes included; a drafter may still propose nothing).",
              [](const SpecCostStats& c) { return c.steps_speculating; });
  cost_series("pypto:spec_decode_steps_plain_total", "counter",
              "Decode steps where the cost model chose k = 0 for every request though some could draft.",
              [](const SpecCostStats& c) { return c.steps_plain; });
  cost_series("pypto:spec_decode_probes_total", "counter",
              "Decode steps that took the losing choice to measure it again.",
              [](const SpecCostStats& c) { return c.probes; });
  cost_series("pypto:spec_decode_plain_step_seconds", "gauge",
              "Estimated seconds of a plain decode step at the last step's batch size (NaN: not measured).",
              [](const SpecCostStats& c) { return c.plain_step_s; }, true);
  cost_series("pypto:spec_decode_spec_step_seconds", "gauge",
              "Estimated seconds of the best speculative step (verify and drafting) at the last step's batch size.",
              [](const SpecCostStats& c) { return c.spec_step_s; }, true);
  cost_series("pypto:spec_decode_plain_tokens_per_second", "gauge",
              "Estimated tokens per second of plain decoding for the last step's requests.",
              [](const SpecCostStats& c) { return c.plain_tokens_per_s; }, true);
  cost_series("pypto:spec_decode_spec_tokens_per_second", "gauge",
              "Estimated tokens per second of the best speculative choice for the last step's requests.",
              [](const SpecCostStats& c) { return c.spec_tokens_per_s; }, true);
}

}  // namespace pypto
