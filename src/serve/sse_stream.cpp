#include "serve/sse_stream.h"

#include "serve/request_common.h"
#include "serve/sse.h"

namespace pypto {

void stream_sse(httplib::Response& res, ServerState& s, SseStream stream) {
  auto st = std::make_shared<SseStream>(std::move(stream));
  ServerState* sp = &s;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, sp](size_t, httplib::DataSink& sink) {
        const SseWrite write = [&sink](const nlohmann::ordered_json& chunk) {
          const std::string ev = sse_event(chunk);
          return sink.write(ev.data(), ev.size());
        };
        if (!st->opening(write)) {
          st->gen->abort();
          return false;
        }
        const bool alive = drive_generation(*sp, *st->gen, st->arrival, [&](std::vector<ChoiceDelta>& deltas) {
          return st->on_deltas(deltas, write);
        });
        if (!alive) return false;
        if (st->include_usage) {
          nlohmann::ordered_json u = st->usage_base;
          u["choices"] = nlohmann::ordered_json::array();
          u["usage"] = usage_json(*st->gen);
          if (!write(u)) return false;
        }
        if (!sink.write(kSseDone.data(), kSseDone.size())) return false;
        sink.done();
        return true;
      },
      [st](bool) { st->gen->abort(); });
}

}  // namespace pypto
