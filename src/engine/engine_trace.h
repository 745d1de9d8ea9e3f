#pragma once
// Profiling hooks of the engine (core/profiler.h): per step, the token counts of the step span and
// each scheduled request's "queued" / "prefill" / "decode" event on its own trace track.
#include "engine/scheduler.h"
#include "engine/scheduler_output.h"

namespace pypto {

// Call right after Scheduler::schedule(), inside the step span. Does nothing unless profiling.
// A step's rows are decode rows when they are a request's next token, with its drafts when
// speculating (a verify step); the step span's decode count starts at one token per such request.
void trace_schedule(const SchedulerOutput& so, const Scheduler& scheduler);
// Call after Scheduler::update_from_output, inside the step span: the decode count becomes the
// tokens the decode rows emitted (a verify step emits 1 + its accepted drafts), so the report's
// decode tokens/s is what users receive.
void trace_update(const SchedulerOutput& so, const Scheduler& scheduler, const std::vector<EngineCoreOutput>& outs);

}  // namespace pypto
