#include "parallel/rank_health.h"

#include <atomic>
#include <mutex>

namespace pypto {
namespace {
std::mutex g_mu;
std::optional<std::string> g_fault;
std::atomic<bool> g_stopping{false};
}  // namespace

bool record_rank_fault(const std::string& what) {
  std::lock_guard lock(g_mu);
  if (g_fault) return false;
  g_fault = what;
  return true;
}

std::optional<std::string> rank_fault() {
  std::lock_guard lock(g_mu);
  return g_fault;
}

void mark_ranks_stopping() { g_stopping.store(true); }
bool ranks_stopping() { return g_stopping.load(); }

}  // namespace pypto
