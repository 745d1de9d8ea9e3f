#include "cli/bench_spec_decode.h"

#include <httplib.h>

#include <cstdlib>
#include <sstream>
#include <string>

namespace pypto::bench {

std::optional<SpecDecodeCounters> parse_spec_decode_counters(const std::string& text) {
  SpecDecodeCounters c;
  bool found = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t brace = line.find('{'), space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, brace == std::string::npos ? space : brace);
    double* into = name == "vllm:spec_decode_num_drafts_total"           ? &c.drafts
                   : name == "vllm:spec_decode_num_draft_tokens_total"    ? &c.draft_tokens
                   : name == "vllm:spec_decode_num_accepted_tokens_total" ? &c.accepted_tokens
                   : name == "pypto:spec_decode_steps_speculating_total"  ? &c.steps_speculating
                   : name == "pypto:spec_decode_steps_plain_total"        ? &c.steps_plain
                   : name == "pypto:spec_decode_probes_total"             ? &c.probes
                                                                          : nullptr;
    if (!into) continue;
    *into += std::strtod(line.c_str() + space + 1, nullptr);
    found = true;
  }
  if (!found) return std::nullopt;
  return c;
}

std::optional<SpecDecodeCounters> scrape_spec_decode(const Endpoint& ep) {
  httplib::Client cli(ep.base_url);
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  const httplib::Result res = cli.Get("/metrics");
  if (!res || res->status != 200) return std::nullopt;
  return parse_spec_decode_counters(res->body);
}

std::optional<SpecDecodeCounters> spec_decode_delta(const std::optional<SpecDecodeCounters>& before,
                                                    const std::optional<SpecDecodeCounters>& after) {
  if (!before || !after) return std::nullopt;
  return SpecDecodeCounters{after->drafts - before->drafts,
                            after->draft_tokens - before->draft_tokens,
                            after->accepted_tokens - before->accepted_tokens,
                            after->steps_speculating - before->steps_speculating,
                            after->steps_plain - before->steps_plain,
                            after->probes - before->probes};
}

}  // namespace pypto::bench
