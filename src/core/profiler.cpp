#include "core/profiler.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/error.h"

namespace pypto::prof {

std::atomic<int> g_level{0};

void set_level(Level l) { g_level.store(static_cast<int>(l), std::memory_order_relaxed); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

Level parse_level(const std::string& s) {
  // The seed's form is a comma list ("e2e,kernel"); the levels nest (kernel records everything
  // e2e does, verbose everything kernel does), so a list means its most detailed member.
  Level out = Level::Off;
  bool any = false, off = false;
  size_t b = 0;
  for (;;) {
    const size_t e = std::min(s.find(',', b), s.size());
    std::string w = s.substr(b, e - b);
    w.erase(0, w.find_first_not_of(" \t"));
    w.erase(w.find_last_not_of(" \t") + 1);
    Level l;
    if (w == "off") l = Level::Off, off = true;
    else if (w == "e2e") l = Level::E2E;
    else if (w == "kernel") l = Level::Kernel;
    else if (w == "verbose") l = Level::Verbose;
    else fail("--profile-level '", s, "': '", w, "' is not a level; expected a comma list of e2e, kernel, verbose");
    out = std::max(out, l);
    any = true;
    if (e == s.size()) break;
    b = e + 1;
  }
  if (off && out != Level::Off) fail("--profile-level '", s, "': 'off' cannot be combined with other levels");
  PYPTO_ASSERT(any);
  return out;
}

const char* level_name(Level l) {
  switch (l) {
    case Level::Off: return "off";
    case Level::E2E: return "e2e";
    case Level::Kernel: return "kernel";
    case Level::Verbose: return "verbose";
  }
  return "?";
}

namespace {

const std::chrono::steady_clock::time_point g_origin = std::chrono::steady_clock::now();

struct Registry;
Registry& registry();

// One thread's events. The owning thread appends; collect() takes them under the same lock.
struct ThreadBuffer {
  std::mutex mu;
  std::vector<Event> events;
  int32_t track = -1;
};

struct Registry {
  std::mutex mu;
  std::vector<Track> tracks;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::unordered_map<std::string, int32_t> request_tracks;  // seq id -> track
  std::unordered_map<std::string, int64_t> arrivals;        // request id -> ns
  int32_t next_thread_tid = 1, next_request_tid = 1;

  int32_t add_track(int32_t pid, int32_t tid, std::string name) {
    tracks.push_back({pid, tid, std::move(name)});
    return int32_t(tracks.size() - 1);
  }
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

}  // namespace

namespace detail {

struct Open {
  const char* name;
  int64_t ts;
  int64_t args[3];
  const char* phase;      // current phase (nullptr: none open)
  const char* phase_cat;
  int64_t phase_ts;
};

}  // namespace detail

namespace {

struct ThreadState {
  std::shared_ptr<ThreadBuffer> buf;
  std::vector<detail::Open> stack;  // open spans, innermost last
  std::vector<size_t> pending_requests;  // events ending with the outermost span
  std::string name;

  ThreadState() { stack.reserve(16); }
  ThreadBuffer& buffer() {
    if (!buf) {
      buf = std::make_shared<ThreadBuffer>();
      buf->events.reserve(1 << 14);
      Registry& r = registry();
      std::lock_guard<std::mutex> lk(r.mu);
      const int32_t tid = r.next_thread_tid++;
      buf->track = r.add_track(1, tid, name.empty() ? "engine thread " + std::to_string(tid) : name);
      r.buffers.push_back(buf);
    }
    return *buf;
  }
  void push(const Event& e) {
    ThreadBuffer& b = buffer();
    std::lock_guard<std::mutex> lk(b.mu);
    b.events.push_back(e);
    b.events.back().track = b.track;
  }
};

ThreadState& state() {
  thread_local ThreadState s;
  return s;
}

void emit(ThreadState& s, const char* name, const char* cat, int64_t ts, int64_t end, int32_t depth, const int64_t* args) {
  Event e;
  e.name = name;
  e.cat = cat;
  e.ts_ns = ts;
  e.dur_ns = end - ts;
  e.depth = depth;
  if (args) std::copy(args, args + 3, e.args);
  s.push(e);
}

void end_phase(ThreadState& s, detail::Open& o, int64_t now, int32_t depth) {
  if (!o.phase) return;
  const int64_t a[3] = {o.args[0], -1, -1};  // phases carry their span's arg (layer index)
  emit(s, o.phase, o.phase_cat, o.phase_ts, now, depth, a);
  o.phase = nullptr;
}

int32_t request_track(Registry& r, const std::string& seq_id) {
  auto it = r.request_tracks.find(seq_id);
  if (it != r.request_tracks.end()) return it->second;
  std::string shown = seq_id;
  std::replace(shown.begin(), shown.end(), '\x1f', '#');
  const int32_t t = r.add_track(2, r.next_request_tid++, "request " + shown);
  r.request_tracks.emplace(seq_id, t);
  return t;
}

void push_request_event(const std::string& seq_id, const char* name, int64_t ts, int64_t end, int64_t a0, int64_t a1) {
  Registry& r = registry();
  int32_t track;
  {
    std::lock_guard<std::mutex> lk(r.mu);
    track = request_track(r, seq_id);
  }
  ThreadState& s = state();
  ThreadBuffer& b = s.buffer();
  Event e;
  e.name = name;
  e.cat = "request";
  e.ts_ns = ts;
  e.dur_ns = end - ts;
  e.track = track;
  e.args[0] = a0;
  e.args[1] = a1;
  std::lock_guard<std::mutex> lk(b.mu);
  b.events.push_back(e);
  if (end < 0) s.pending_requests.push_back(b.events.size() - 1);
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - g_origin).count();
}

void name_this_thread(const std::string& name) {
  ThreadState& s = state();
  s.name = name;
  if (s.buf) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    r.tracks[size_t(s.buf->track)].name = name;
  }
}

namespace detail {

Open* open(const char* name, int64_t arg, const char* first_phase, const char* phase_cat) {
  ThreadState& s = state();
  const int64_t now = now_ns();
  // An op-level first phase is recorded only at kernel level (the span itself may be e2e).
  if (first_phase && phase_cat[0] == 'o' && !active(Level::Kernel)) first_phase = nullptr;
  s.stack.push_back({name, now, {arg, -1, -1}, first_phase, phase_cat, now});
  return &s.stack.back();  // stable: the stack never reallocates below its reserve in practice
}

void close(Open*) {
  ThreadState& s = state();
  PYPTO_ASSERT(!s.stack.empty(), "profiler span closed twice");
  const int64_t now = now_ns();
  Open& o = s.stack.back();
  const int32_t depth = int32_t(s.stack.size() - 1);
  end_phase(s, o, now, depth + 1);
  emit(s, o.name, "span", o.ts, now, depth, o.args);
  s.stack.pop_back();
  if (s.stack.empty() && !s.pending_requests.empty()) {
    ThreadBuffer& b = s.buffer();
    std::lock_guard<std::mutex> lk(b.mu);
    for (size_t i : s.pending_requests)
      if (i < b.events.size()) b.events[i].dur_ns = now - b.events[i].ts_ns;
    s.pending_requests.clear();
  }
}

void mark(const char* phase, const char* cat) {
  ThreadState& s = state();
  if (s.stack.empty()) return;
  const int64_t now = now_ns();
  Open& o = s.stack.back();
  end_phase(s, o, now, int32_t(s.stack.size()));
  o.phase = phase;
  o.phase_cat = cat;
  o.phase_ts = now;
}

void annotate(int64_t a1, int64_t a2) {
  ThreadState& s = state();
  if (s.stack.empty()) return;
  s.stack.back().args[1] = a1;
  s.stack.back().args[2] = a2;
}

}  // namespace detail

void request_arrived(const std::string& request_id) {
  if (!active(Level::E2E)) return;
  const int64_t now = now_ns();
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.arrivals[request_id] = now;
}

void request_scheduled_first(const std::string& seq_id, const std::string& request_id) {
  if (!active(Level::E2E)) return;
  const int64_t now = now_ns();
  int64_t arrival = -1;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    if (auto it = r.arrivals.find(request_id); it != r.arrivals.end()) arrival = it->second;
  }
  // Unknown arrival (engine driven without the loop, or a request resumed after preemption whose
  // queued time was already shown): no event.
  if (arrival >= 0) push_request_event(seq_id, "queued", arrival, now, -1, -1);
}

void request_step(const std::string& seq_id, const char* kind, int64_t tokens, int64_t start) {
  if (!active(Level::E2E)) return;
  const int64_t now = now_ns();
  ThreadState& s = state();
  // Ends with the outermost open span (patched when it closes); without one, a point event.
  push_request_event(seq_id, kind, now, s.stack.empty() ? now : -1, tokens, start);
}

Trace collect() {
  Registry& r = registry();
  Trace t;
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto& b : r.buffers) {
    std::lock_guard<std::mutex> bl(b->mu);
    t.events.insert(t.events.end(), b->events.begin(), b->events.end());
    b->events.clear();
  }
  // Events still waiting for their iteration to end are left out (dur < 0).
  t.events.erase(std::remove_if(t.events.begin(), t.events.end(), [](const Event& e) { return e.dur_ns < 0; }),
                 t.events.end());
  std::stable_sort(t.events.begin(), t.events.end(), [](const Event& a, const Event& b) {
    return a.track != b.track ? a.track < b.track : a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.depth < b.depth;
  });
  t.tracks = r.tracks;
  r.arrivals.clear();
  return t;
}

void reset() { (void)collect(); }

}  // namespace pypto::prof
