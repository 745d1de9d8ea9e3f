#pragma once
// The speculative-decoding section of the --profile report and of the offline run's summary:
// acceptance (engine/spec_decode_stats.h) and the cost model's decisions and estimates
// (engine/spec_cost_stats.h), the same facts /metrics exports (serve/spec_decode_metrics.h).
#include <string>

#include "engine/spec_cost_stats.h"
#include "engine/spec_decode_stats.h"

namespace pypto {

// Lines indented by two spaces, each ending in '\n'.
std::string format_spec_decode_section(const SpecDecodeStats& acceptance, const SpecCostStats& cost);

}  // namespace pypto
