// POST /start_profile and /stop_profile (registered only with --profile): a window of engine
// activity recorded as a Chrome/Perfetto trace (core/profile_control.h, docs/measurement.md).
#include "core/profile_control.h"
#include "serve/routes.h"

namespace pypto {

void handle_start_profile(ServerState& s, const httplib::Request&, httplib::Response& res) {
  const prof::Level level = prof::parse_level(s.options.profile_level);
  const bool started = prof::start_recording(level);  // idempotent: false when already recording
  write_json(res, nlohmann::ordered_json{{"recording", true}, {"started", started}, {"level", prof::level_name(level)}});
}

void handle_stop_profile(ServerState& s, const httplib::Request&, httplib::Response& res) {
  const prof::StopResult r = prof::stop_recording(s.options.profile_output);  // file complete on return
  write_json(res, nlohmann::ordered_json{{"recording", false},
                                         {"trace", r.path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.path)},
                                         {"events", r.events}});
}

}  // namespace pypto
