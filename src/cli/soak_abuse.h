#pragma once
// `bench soak`: the abusive clients. Bodies the server must refuse with a 4xx and an error JSON
// (never a 5xx, a dropped connection or a crash), and connections that open and then say nothing.
// Clients that vanish mid-stream or read slowly reuse catalogue entries (soak_client.h).
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli/soak_client.h"

namespace pypto::bench {

enum class AbuseKind {
  Malformed,     // not JSON (an object cut short)
  UnknownField,  // a field the API does not know
  WrongType,     // max_tokens a string
  Oversized,     // a prompt of --oversized-bytes (over the context length, or over --max-body-bytes)
  DeepBody,      // "prompt" nested --deep-depth arrays deep
  DeepSchema,    // a json_schema nested --deep-depth objects deep, ending in an unsupported keyword
  Idle,          // a connection that sends half a request, then nothing for --idle-seconds
};
const std::vector<AbuseKind>& all_abuse_kinds();
const char* abuse_kind_name(AbuseKind k);
// The kind with this name, if any.
std::optional<AbuseKind> abuse_kind_named(const std::string& name);

struct AbuseOptions {
  size_t oversized_bytes = size_t(2) << 20;
  // Raise once the server bounds nesting (issue #28 points 1-2); deeper than that must still be a
  // 4xx. 3,000 crashed main's schema compiler before the limits.
  int deep_depth = 128;
  double idle_s = 3;
};

// The raw body a refused kind sends (not Idle).
std::string abuse_body(AbuseKind k, const std::string& model, const AbuseOptions& o);

// Runs one abusive client against base_url ("http://host:port"). Body kinds: Rejected is the only
// good result. Idle: Answered when the connection could be opened and held (the server may close
// it first), Dropped when it could not be opened.
Exchange run_abuse(AbuseKind k, const std::string& base_url, const std::string& model, const AbuseOptions& o);

}  // namespace pypto::bench
