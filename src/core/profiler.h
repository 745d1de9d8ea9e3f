#pragma once
// The span recorder behind --profile, the timing report and the Chrome/Perfetto traces.
//
// Cost model. Every hook first reads one global level with a relaxed atomic load and branches on
// it (marked unlikely): with profiling off that branch is all a hook costs (bench/measure has the
// number). With profiling on, a hook takes a steady_clock reading and appends a 48-byte event to
// its thread's buffer (an uncontended lock; no allocation once the buffer has grown).
//
// Model. Each thread has a stack of open spans. A span may have phases: PYPTO_PROF_PHASE /
// PYPTO_PROF_OP end the innermost open span's current phase and start the next, so consecutive
// phases abut and one line per phase is enough at a call site. Phases are recorded as events
// nested in their span (category "phase" for engine-step phases, "op" for kernel calls; an op
// named "host.*" is model code that is not a kernel). Child spans nest inside the parent's
// current phase. Request tracks hold "queued", "prefill" and "decode" events per request.
//
//   PYPTO_PROF_SPAN(level, "step", "schedule");   // span with a first phase
//   PYPTO_PROF_PHASE(level, "execute");           // next phase of the innermost span
//   PYPTO_PROF_LAYER(li, "norm.input");           // kernel-level span "layer" with arg li
//   PYPTO_PROF_OP("attention.qkv_proj");          // kernel-level phase
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pypto::prof {

enum class Level : int { Off = 0, E2E = 1, Kernel = 2, Verbose = 3 };

extern std::atomic<int> g_level;

inline bool active(Level l) {
  return __builtin_expect(g_level.load(std::memory_order_relaxed) >= static_cast<int>(l), 0);
}
void set_level(Level l);
Level level();
// "off", or a comma list of "e2e", "kernel", "verbose" (any order, repeats harmless): the most
// detailed level named. Error naming the value and the allowed levels otherwise.
Level parse_level(const std::string& s);
const char* level_name(Level l);

// Nanoseconds on the steady clock since the recorder's origin (process start of profiling).
int64_t now_ns();

// One recorded interval. Names and categories point at string literals.
struct Event {
  const char* name = "";
  const char* cat = "";
  int64_t ts_ns = 0, dur_ns = 0;
  int32_t track = 0;
  int32_t depth = 0;             // nesting depth on its thread track (0 = outermost)
  int64_t args[3] = {-1, -1, -1};  // meaning by name: layer index, step tokens, ...
};

struct Track {
  int32_t pid = 1;      // 1: engine threads, 2: requests
  int32_t tid = 0;
  std::string name;     // thread / request name
};

struct Trace {
  std::vector<Track> tracks;   // index = Event::track
  std::vector<Event> events;   // sorted by (track, ts)
};

// Names the calling thread's track ("engine replica 0", "tp rank 1"). Before its first event.
void name_this_thread(const std::string& name);

// Takes every event recorded so far (all threads) and clears the buffers.
Trace collect();
// Drops everything recorded so far (e.g. warm-up).
void reset();

// --- request tracks ------------------------------------------------------------------------
// These do nothing unless active(Level::E2E); callers on hot paths test active() first anyway.
void request_arrived(const std::string& request_id);
// Emits one event on the request's track: "queued" from arrival to now (nothing when the arrival
// is unknown).
void request_scheduled_first(const std::string& seq_id, const std::string& request_id);
// A "prefill" / "decode" event for this request from now to the end of the outermost span
// open on this thread (the engine-loop iteration: when its output is published).
void request_step(const std::string& seq_id, const char* kind, int64_t tokens, int64_t start);

// --- spans ---------------------------------------------------------------------------------
namespace detail {
struct Open;
Open* open(const char* name, int64_t arg, const char* first_phase, const char* phase_cat);
void close(Open* o);
void mark(const char* phase, const char* cat);
void annotate(int64_t a1, int64_t a2);
}  // namespace detail

class Span {
 public:
  Span(Level l, const char* name, const char* first_phase = nullptr, int64_t arg = -1, const char* phase_cat = "phase")
      : open_(active(l) ? detail::open(name, arg, first_phase, phase_cat) : nullptr) {}
  ~Span() {
    if (open_) detail::close(open_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  detail::Open* open_;
};

// Sets args[1], args[2] of the innermost open span (e.g. a step's prefill and decode tokens).
inline void annotate(int64_t a1, int64_t a2) {
  if (active(Level::E2E)) detail::annotate(a1, a2);
}

}  // namespace pypto::prof

#define PYPTO_PROF_CAT2(a, b) a##b
#define PYPTO_PROF_CAT(a, b) PYPTO_PROF_CAT2(a, b)
#define PYPTO_PROF_SPAN(level, ...) ::pypto::prof::Span PYPTO_PROF_CAT(pypto_prof_span_, __LINE__)(level, __VA_ARGS__)
#define PYPTO_PROF_LAYER(index, first_op) \
  ::pypto::prof::Span PYPTO_PROF_CAT(pypto_prof_layer_, __LINE__)(::pypto::prof::Level::Kernel, "layer", first_op, index, "op")
#define PYPTO_PROF_PHASE(level, name) \
  do {                                \
    if (::pypto::prof::active(level)) ::pypto::prof::detail::mark(name, "phase"); \
  } while (0)
#define PYPTO_PROF_OP(name) \
  do {                      \
    if (::pypto::prof::active(::pypto::prof::Level::Kernel)) ::pypto::prof::detail::mark(name, "op"); \
  } while (0)
