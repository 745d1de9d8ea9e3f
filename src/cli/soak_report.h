#pragma once
// `bench soak`'s results: the terminal summary, DIR/soak.json (config, totals, readings, windows,
// every failure), DIR/soak-latency.svg (p50/p99 latency per time window) and DIR/soak.html.
#include <string>

#include <nlohmann/json.hpp>

#include "cli/bench_soak.h"

namespace pypto::bench {

void print_soak_summary(const SoakResult& r);
void save_soak_results(const std::string& dir, const nlohmann::ordered_json& config, const SoakResult& r);
// The latency-over-time plot alone (an SVG document).
std::string soak_latency_svg(const SoakResult& r, const std::string& title);

}  // namespace pypto::bench
