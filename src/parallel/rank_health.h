#pragma once
// Process-wide state of the ranks that are other processes (--distributed-executor-backend mp|mpi),
// as rank 0 sees it: the first fault (a rank died or stopped answering) and whether rank 0 is
// stopping them on purpose. The rank monitor (parallel/replicas/rank_monitor.h) writes it; /health
// reads it (the server reports unhealthy as soon as a fault is recorded). Thread-safe.
#include <optional>
#include <string>

namespace pypto {

// Records `what` as the fault unless one is recorded already; returns true for the first.
bool record_rank_fault(const std::string& what);
// The first fault recorded, if any.
std::optional<std::string> rank_fault();

// Rank 0 is shutting the other ranks down (a rank exiting with status 0 is then no fault).
void mark_ranks_stopping();
bool ranks_stopping();

}  // namespace pypto
