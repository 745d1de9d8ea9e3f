#pragma once
// bench serve: the server's speculative-decoding counters (/metrics, vllm:spec_decode_*), read
// before and after a run so the report can state the run's acceptance. A server without them
// (speculation off, or another server) gives nothing and the report says nothing.
#include <cstdint>
#include <optional>

#include "cli/bench_client.h"

namespace pypto::bench {

struct SpecDecodeCounters {
  double drafts = 0, draft_tokens = 0, accepted_tokens = 0;  // summed over engines
  // The cost model's decode steps with and without drafts and its probes (pypto:spec_decode_*).
  double steps_speculating = 0, steps_plain = 0, probes = 0;
};

// GET base_url/metrics; nullopt when it fails or has no vllm:spec_decode_* counters.
std::optional<SpecDecodeCounters> scrape_spec_decode(const Endpoint& ep);

// after - before, or nullopt when either is missing.
std::optional<SpecDecodeCounters> spec_decode_delta(const std::optional<SpecDecodeCounters>& before,
                                                    const std::optional<SpecDecodeCounters>& after);

// Parses Prometheus text: sums the samples of the three counters over their label sets.
std::optional<SpecDecodeCounters> parse_spec_decode_counters(const std::string& text);

}  // namespace pypto::bench
