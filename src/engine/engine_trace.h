#pragma once
// Profiling hooks of the engine (core/profiler.h): per step, the token counts of the step span and
// each scheduled request's "queued" / "prefill" / "decode" event on its own trace track.
#include "engine/scheduler.h"
#include "engine/scheduler_output.h"

namespace pypto {

// Call right after Scheduler::schedule(), inside the step span. Does nothing unless profiling.
void trace_schedule(const SchedulerOutput& so, const Scheduler& scheduler);

}  // namespace pypto
