#pragma once
// Printing and saving benchmark results: the terminal summary (laid out like vLLM's), the JSON
// file and the HTML report of each `bench` mode.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_offline.h"
#include "cli/bench_serve.h"

namespace pypto::bench {

void print_serve_summary(const ServeRun& run);
// Writes DIR/serve.json and DIR/serve.html (one section per concurrency of a sweep).
void save_serve_results(const std::string& dir, const nlohmann::ordered_json& config, const std::vector<ServeRun>& runs);

void print_latency_summary(const LatencyResult& r);
void save_latency_results(const std::string& dir, const nlohmann::ordered_json& config, const LatencyResult& r);

void print_throughput_summary(const ThroughputResult& r);
void save_throughput_results(const std::string& dir, const nlohmann::ordered_json& config, const ThroughputResult& r);

}  // namespace pypto::bench
