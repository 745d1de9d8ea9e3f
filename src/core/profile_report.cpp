#include "core/profile_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string_view>

namespace pypto::prof {
namespace {

double ms(int64_t ns) { return double(ns) / 1e6; }

double pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * double(sorted.size() - 1);
  const size_t lo = size_t(rank), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

bool is(const Event& e, std::string_view name) { return name == e.name; }
bool cat(const Event& e, std::string_view c) { return c == e.cat; }

struct Iter {
  const Event* span = nullptr;  // iteration (or step when the loop is not instrumented)
  const Event* step = nullptr;
  int64_t end() const { return span->ts_ns + span->dur_ns; }
  std::vector<const Event*> inner;
};

void add(StepLayers& a, const StepLayers& b, double scale) {
  a.e2e += b.e2e * scale;
  a.kernel += b.kernel * scale;
  a.model_host += b.model_host * scale;
  a.sched_prep += b.sched_prep * scale;
  a.drafting += b.drafting * scale;
  a.sampling += b.sampling * scale;
  a.wrap += b.wrap * scale;
}

}  // namespace

Stats stats_of(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.total += x;
  s.mean = s.total / double(v.size());
  s.p50 = pct(v, 50);
  s.p99 = pct(v, 99);
  return s;
}

std::vector<double> request_ttfts_s(const Trace& t) {
  std::map<int32_t, std::pair<int64_t, int64_t>> per_track;  // track -> (arrival, last prefill end)
  for (const Event& e : t.events) {
    if (std::string_view(e.cat) != "request") continue;
    auto& [arrival, first] = per_track.try_emplace(e.track, -1, -1).first->second;
    if (std::string_view(e.name) == "queued" && arrival < 0) arrival = e.ts_ns;
    if (std::string_view(e.name) == "prefill") first = std::max(first, e.ts_ns + e.dur_ns);
  }
  std::vector<double> out;
  for (const auto& [track, v] : per_track)
    if (v.first >= 0 && v.second >= v.first) out.push_back(double(v.second - v.first) / 1e9);
  return out;
}

ProfileReport analyze_trace(const Trace& t, Level level) {
  ProfileReport r;
  r.level = level;
  // Engine-thread iterations: "iteration" spans when the loop is instrumented, else "step" spans.
  bool have_iterations = false;
  for (const Event& e : t.events) have_iterations |= cat(e, "span") && is(e, "iteration");
  const char* outer = have_iterations ? "iteration" : "step";
  std::vector<Iter> iters;
  for (const Event& e : t.events)
    if (cat(e, "span") && is(e, outer)) iters.push_back({&e, nullptr, {}});
  std::sort(iters.begin(), iters.end(), [](const Iter& a, const Iter& b) {
    return a.span->track != b.span->track ? a.span->track < b.span->track : a.span->ts_ns < b.span->ts_ns;
  });
  // Assign every engine event to the iteration containing it (same track). A step whose
  // iteration had not closed when the trace was collected (the caller saw its last output,
  // which is published inside the iteration) stands for its own iteration.
  auto containing = [&](const Event& e) -> Iter* {
    auto it = std::upper_bound(iters.begin(), iters.end(), e, [](const Event& x, const Iter& i) {
      return x.track != i.span->track ? x.track < i.span->track : x.ts_ns < i.span->ts_ns;
    });
    if (it == iters.begin()) return nullptr;
    --it;
    if (it->span->track != e.track || e.ts_ns + e.dur_ns > it->end()) return nullptr;
    return &*it;
  };
  std::vector<Iter> orphans;
  for (const Event& e : t.events) {
    if (cat(e, "request") || (cat(e, "span") && is(e, outer))) continue;
    Iter* it = containing(e);
    if (!it && have_iterations && cat(e, "span") && is(e, "step")) orphans.push_back({&e, &e, {}});
    if (!it) continue;
    if (cat(e, "span") && is(e, "step")) it->step = &e;
    it->inner.push_back(&e);
  }
  if (!have_iterations)
    for (Iter& i : iters) i.step = i.span;
  if (!orphans.empty()) {
    for (Iter& o : orphans)  // their phases and ops lie inside the step span
      for (const Event& e : t.events)
        if (&e != o.span && e.track == o.span->track && e.ts_ns >= o.span->ts_ns &&
            e.ts_ns + e.dur_ns <= o.span->ts_ns + o.span->dur_ns && !cat(e, "request"))
          o.inner.push_back(&e);
    iters.insert(iters.end(), orphans.begin(), orphans.end());
    std::sort(iters.begin(), iters.end(), [](const Iter& a, const Iter& b) {
      return a.span->track != b.span->track ? a.span->track < b.span->track : a.span->ts_ns < b.span->ts_ns;
    });
  }
  // Keep iterations that ran work (the step was annotated with its tokens).
  std::vector<Iter> busy;
  for (Iter& i : iters)
    if (i.step && (i.step->args[1] > 0 || i.step->args[2] > 0)) busy.push_back(std::move(i));

  std::map<std::string, double> fam, ops;
  std::map<int64_t, double> per_layer;
  for (size_t k = 0; k < busy.size(); ++k) {
    const Iter& it = busy[k];
    StepRecord s;
    s.prefill_tokens = std::max<int64_t>(0, it.step->args[1]);
    s.decode_tokens = std::max<int64_t>(0, it.step->args[2]);
    const bool next_same = k + 1 < busy.size() && busy[k + 1].span->track == it.span->track;
    const int64_t e2e_ns = next_same ? busy[k + 1].span->ts_ns - it.span->ts_ns : it.span->dur_ns;
    int64_t kernel = 0, forward = 0, schedule = 0, execute = 0, sample = 0, update = 0, phases = 0, drafting = 0;
    std::map<std::string, double> step_fam, step_ops;
    std::map<int64_t, double> step_layers;
    // Drafting spans (speculative decoding) never nest in each other; what lies inside one is
    // the drafter's, not the target model's.
    std::vector<const Event*> drafts;
    for (const Event* e : it.inner)
      if (cat(*e, "span") && is(*e, "draft")) drafts.push_back(e), drafting += e->dur_ns;
    auto in_draft = [&](const Event& e) {
      for (const Event* d : drafts)
        if (&e != d && e.ts_ns >= d->ts_ns && e.ts_ns + e.dur_ns <= d->ts_ns + d->dur_ns) return true;
      return false;
    };
    for (const Event* e : it.inner) {
      if (!drafts.empty() && in_draft(*e)) continue;
      if (cat(*e, "op")) {
        const std::string name = e->name;
        const std::string family = name.substr(0, name.find('.'));
        if (family != "host") kernel += e->dur_ns;
        step_fam[family] += ms(e->dur_ns);
        step_ops[name] += ms(e->dur_ns);
        if (e->args[0] >= 0) step_layers[e->args[0]] += ms(e->dur_ns);
      } else if (cat(*e, "span") && is(*e, "forward")) {
        forward += e->dur_ns;
      } else if (cat(*e, "phase")) {
        const std::string_view n = e->name;
        if (n == "schedule") schedule += e->dur_ns, phases += e->dur_ns;
        else if (n == "execute") execute += e->dur_ns, phases += e->dur_ns;
        else if (n == "sample") sample += e->dur_ns, phases += e->dur_ns;
        else if (n == "update") update += e->dur_ns, phases += e->dur_ns;
      }
    }
    r.has_kernel_detail |= !step_fam.empty();
    StepLayers& L = s.layers;
    L.e2e = ms(e2e_ns);
    L.kernel = ms(kernel);
    L.model_host = ms(forward - kernel);
    L.sched_prep = ms(schedule + (execute - forward) - drafting);
    L.drafting = ms(drafting);
    r.has_drafting |= drafting > 0;
    L.sampling = ms(sample + update);
    L.wrap = ms((it.span != it.step ? it.span->dur_ns - it.step->dur_ns : 0) + (it.step->dur_ns - phases));
    step_fam["sampling"] += ms(sample);
    if (drafting > 0) step_fam["drafting"] += ms(drafting);
    if (s.is_decode()) {
      for (auto& [k2, v] : step_fam) fam[k2] += v;
      for (auto& [k2, v] : step_ops) ops[k2] += v;
      for (auto& [k2, v] : step_layers) per_layer[k2] += v;
    }
    r.steps.push_back(s);
  }

  std::vector<double> decode_ms;
  for (const StepRecord& s : r.steps) {
    if (s.is_decode()) {
      r.decode_steps++;
      r.decode_tokens += s.decode_tokens;
      r.decode_s += s.layers.e2e / 1e3;
      decode_ms.push_back(s.layers.e2e);
      add(r.decode_mean, s.layers, 1.0);
    } else {
      r.prefill_steps++;
      r.prefill_tokens += s.prefill_tokens;
      r.prefill_s += s.layers.e2e / 1e3;
      add(r.prefill_mean, s.layers, 1.0);
    }
  }
  StepLayers zero;
  if (r.decode_steps) {
    StepLayers m = zero;
    add(m, r.decode_mean, 1.0 / double(r.decode_steps));
    r.decode_mean = m;
  }
  if (r.prefill_steps) {
    StepLayers m = zero;
    add(m, r.prefill_mean, 1.0 / double(r.prefill_steps));
    r.prefill_mean = m;
  }
  r.decode_step_ms = stats_of(decode_ms);
  const double n = double(std::max<size_t>(1, r.decode_steps));
  const double denom = r.decode_mean.e2e > 0 ? r.decode_mean.e2e : 1;
  for (auto& [k, v] : fam) r.families.push_back({k, v / n, v / n / denom});
  for (auto& [k, v] : ops) r.ops.push_back({k, v / n, v / n / denom});
  for (auto& [k, v] : per_layer) r.layers.push_back({"layer " + std::to_string(k), v / n, v / n / denom});
  auto by_time = [](const NamedTime& a, const NamedTime& b) { return a.ms_per_step > b.ms_per_step; };
  std::sort(r.families.begin(), r.families.end(), by_time);
  std::sort(r.ops.begin(), r.ops.end(), by_time);
  return r;
}

std::string format_report(const ProfileReport& r, const RunInfo& info) {
  std::string o;
  char b[256];
  auto line = [&](const char* fmt, auto... a) {
    if constexpr (sizeof...(a) == 0) {
      o += fmt;  // a plain line: no format to expand
    } else {
      std::snprintf(b, sizeof b, fmt, a...);
      o += b;
    }
    o += '\n';
  };
  line("==================== profile (level %s) ====================", level_name(r.level));
  if (info.load_s >= 0) line("model load + staging      %10.3f s", info.load_s);
  if (info.warmup_s >= 0) line("warm-up (excluded)        %10.3f s", info.warmup_s);
  if (!info.ttft_s.empty()) {
    Stats t = stats_of(info.ttft_s);
    line("time to first token       %10.2f ms mean, %.2f p50, %.2f p99 (%zu request(s))", t.mean * 1e3, t.p50 * 1e3,
         t.p99 * 1e3, t.n);
  }
  line("prefill                   %10zu step(s), %lld tokens, %.2f ms, %.1f tokens/s", r.prefill_steps,
       static_cast<long long>(r.prefill_tokens), r.prefill_s * 1e3, r.prefill_s > 0 ? double(r.prefill_tokens) / r.prefill_s : 0.0);
  line("decode                    %10zu step(s), %lld tokens, %.1f tokens/s", r.decode_steps,
       static_cast<long long>(r.decode_tokens), r.decode_s > 0 ? double(r.decode_tokens) / r.decode_s : 0.0);
  line("TPOT (decode step)        %10.3f ms mean, %.3f p50, %.3f p99", r.decode_step_ms.mean, r.decode_step_ms.p50,
       r.decode_step_ms.p99);
  if (info.wall_s > 0) line("generation wall time      %10.3f s, %lld output tokens", info.wall_s, static_cast<long long>(info.output_tokens));

  auto layers_block = [&](const char* title, const StepLayers& L) {
    const double e = L.e2e > 0 ? L.e2e : 1;
    line("-- %s: time layers of one step (ms, share of end-to-end) --", title);
    if (r.has_kernel_detail) {
      line("  (1) kernel time                    %9.3f  %5.1f%%", L.kernel, 100 * L.kernel / e);
      line("  (2) model, outside kernels         %9.3f  %5.1f%%", L.model_host, 100 * L.model_host / e);
    } else {
      line("  (1)+(2) model forward              %9.3f  %5.1f%%   (--profile-level kernel splits it)",
           L.kernel + L.model_host, 100 * (L.kernel + L.model_host) / e);
    }
    line("  (3) scheduling + batch prep        %9.3f  %5.1f%%", L.sched_prep, 100 * L.sched_prep / e);
    if (r.has_drafting)
      line("  (3') drafting (speculation)        %9.3f  %5.1f%%", L.drafting, 100 * L.drafting / e);
    line("  (4) sampling + output processing   %9.3f  %5.1f%%", L.sampling, 100 * L.sampling / e);
    line("  (5) engine loop / API wrap         %9.3f  %5.1f%%", L.wrap, 100 * L.wrap / e);
    line("      residual (unattributed)        %9.3f  %5.1f%%", L.residual(), 100 * L.residual() / e);
    line("      = end-to-end step time         %9.3f", L.e2e);
  };
  if (r.decode_steps) layers_block("decode", r.decode_mean);
  if (r.prefill_steps) layers_block("prefill", r.prefill_mean);
  o += "      detokenization runs on the caller's thread, overlapped with the next step (not in the sum)\n";
  if (!r.families.empty()) {
    line("-- decode step by op family (ms per step, share) --");
    for (const NamedTime& f : r.families) line("  %-22s %9.3f  %5.1f%%", f.name.c_str(), f.ms_per_step, 100 * f.share);
  }
  if (!r.layers.empty()) {
    line("-- decode step by layer (ms per step, share) --");
    for (const NamedTime& f : r.layers) line("  %-22s %9.3f  %5.1f%%", f.name.c_str(), f.ms_per_step, 100 * f.share);
  }
  if (r.level >= Level::Verbose && !r.ops.empty()) {
    line("-- decode step by op (ms per step, share) --");
    for (const NamedTime& f : r.ops) line("  %-28s %9.3f  %5.1f%%", f.name.c_str(), f.ms_per_step, 100 * f.share);
  }
  if (!info.speculation.empty()) {
    line("-- speculative decoding --");
    o += info.speculation;
  }
  o += "============================================================\n";
  return o;
}

}  // namespace pypto::prof
