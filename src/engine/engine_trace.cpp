#include "engine/engine_trace.h"

#include "core/profiler.h"

namespace pypto {

void trace_schedule(const SchedulerOutput& so, const Scheduler& scheduler) {
  if (!prof::active(prof::Level::E2E)) return;
  int64_t prefill = 0, decode = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    const Request* r = scheduler.get_request(s.req_id);
    const bool is_prefill = !r || s.num_computed_tokens < r->num_prompt_tokens() || s.num_scheduled_tokens > 1;
    (is_prefill ? prefill : decode) += s.num_scheduled_tokens;
    if (s.is_new) {
      // Sequence k of an n > 1 request is "<request id>\x1f<k>" (engine.cpp).
      const size_t sep = s.req_id.rfind('\x1f');
      prof::request_scheduled_first(s.req_id, sep == std::string::npos ? s.req_id : s.req_id.substr(0, sep));
    }
    prof::request_step(s.req_id, is_prefill ? "prefill" : "decode", s.num_scheduled_tokens, s.num_computed_tokens);
  }
  prof::annotate(prefill, decode);
}

}  // namespace pypto
