#include "serve/spec_decode_metrics.h"

#include <algorithm>

namespace pypto {

namespace {

void counter_header(std::string& out, const std::string& name, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
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
}

}  // namespace pypto
