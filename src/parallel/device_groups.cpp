#include "parallel/device_groups.h"

#include <sched.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace pypto {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(sep, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  return out;
}

// A non-negative integer filling all of `item`, or -1.
int parse_index(const std::string& item) {
  if (item.empty() || item.size() > 9) return -1;
  int v = 0;
  for (char c : item) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::vector<int> parse_device_list(const std::string& flag, const std::string& text) {
  std::vector<int> ids;
  std::set<int> seen;
  for (const std::string& item : split(text, ',')) {
    const int v = parse_index(item);
    if (v < 0) fail(flag, " '", text, "': '", item, "' is not a device id (expected a non-negative integer)");
    if (!seen.insert(v).second) fail(flag, " '", text, "': device ", v, " is listed twice (each device serves one rank)");
    ids.push_back(v);
  }
  return ids;
}

std::vector<std::vector<int>> parse_cpu_groups(const std::string& text) {
  std::vector<std::vector<int>> groups;
  std::map<int, size_t> owner;
  for (const std::string& g : split(text, ',')) {
    std::vector<int> cores;
    for (const std::string& part : split(g, '+')) {
      const size_t dash = part.find('-');
      int lo, hi;
      if (dash == std::string::npos) {
        lo = hi = parse_index(part);
      } else {
        lo = parse_index(part.substr(0, dash));
        hi = parse_index(part.substr(dash + 1));
      }
      if (lo < 0 || hi < 0 || hi < lo)
        fail("--cpu-groups '", text, "': '", part, "' is not a core or a range like 0-7");
      for (int c = lo; c <= hi; ++c) {
        auto [it, fresh] = owner.emplace(c, groups.size());
        if (!fresh) fail("--cpu-groups '", text, "': core ", c, " is in group ", it->second, " and group ", groups.size());
        cores.push_back(c);
      }
    }
    groups.push_back(std::move(cores));
  }
  return groups;
}

std::vector<int> available_cores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cores.push_back(c);
  }
  if (cores.empty()) cores.push_back(0);
  return cores;
}

ParallelLayout plan_parallel_layout(int device, const std::string& devices_flag, int tp, int dp,
                                    const std::string& cpu_groups_flag, const std::vector<int>& available, int pp) {
  if (tp < 1) fail("--tp ", tp, ": expected a positive number of devices per replica");
  if (dp < 1) fail("--dp ", dp, ": expected a positive number of replicas");
  if (pp < 1) fail("--pp ", pp, ": expected a positive number of pipeline stages");
  ParallelLayout L;
  L.tp = tp;
  L.dp = dp;
  L.pp = pp;
  if (!devices_flag.empty()) {
    L.devices = parse_device_list("--devices", devices_flag);
  } else {
    if (device < 0) fail("--device ", device, ": expected a non-negative device id");
    L.devices = {device};
  }
  const int need = tp * dp * pp;
  if (pp > 1 && static_cast<int>(L.devices.size()) != need)
    fail("--dp ", dp, " x --pp ", pp, " x --tp ", tp, " needs ", need, " devices but ",
         devices_flag.empty() ? std::string("only --device is given") : str_cat("--devices '", devices_flag, "' lists ", L.devices.size()),
         ": give --devices with ", need, " comma-separated ids (replica i, stage s, rank t uses device [(i*pp + s)*tp + t])");
  if (static_cast<int>(L.devices.size()) != need) {
    if (devices_flag.empty())
      fail("--dp ", dp, " x --tp ", tp, " needs ", need, " devices: give --devices with ", need,
           " comma-separated ids (replica i uses devices [i*tp, (i+1)*tp))");
    fail("--devices '", devices_flag, "' lists ", L.devices.size(), " device(s) but --dp ", dp, " x --tp ", tp,
         " needs ", need, " (replica i uses devices [i*tp, (i+1)*tp))");
  }

  std::vector<std::vector<int>> groups;
  const int max_id = *std::max_element(L.devices.begin(), L.devices.end());
  if (!cpu_groups_flag.empty()) {
    groups = parse_cpu_groups(cpu_groups_flag);
    const std::set<int> ok(available.begin(), available.end());
    for (size_t g = 0; g < groups.size(); ++g)
      for (int c : groups[g])
        if (!ok.count(c))
          fail("--cpu-groups '", cpu_groups_flag, "': core ", c, " (group ", g, ") is not available to this process (",
               "available: ", format_core_list(available), ")");
    if (max_id >= static_cast<int>(groups.size()))
      fail("device ", max_id, " has no core group: --cpu-groups '", cpu_groups_flag, "' defines ", groups.size(),
           " group(s), devices 0..", groups.size() - 1);
    L.pinned = true;
  } else if (devices_flag.empty() && need == 1 && device == 0) {
    // The plain single-device case keeps its threads unpinned on every core (the default).
    groups = {available};
    L.pinned = false;
  } else {
    const int n_groups = max_id + 1;
    const int per = static_cast<int>(available.size()) / n_groups;
    if (per < 1)
      fail("device ", max_id, " needs ", n_groups, " core groups but only ", available.size(),
           " core(s) are available (", format_core_list(available), "); use lower device ids or --cpu-groups");
    for (int g = 0; g < n_groups; ++g) groups.emplace_back(available.begin() + g * per, available.begin() + (g + 1) * per);
    L.pinned = true;
  }
  for (int d : L.devices) L.cores.push_back(groups[size_t(d)]);
  return L;
}

std::string format_core_list(const std::vector<int>& cores) {
  std::string s;
  for (size_t i = 0; i < cores.size();) {
    size_t j = i;
    while (j + 1 < cores.size() && cores[j + 1] == cores[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(cores[i]);
    if (j > i) {
      s += '-';
      s += std::to_string(cores[j]);
    }
    i = j + 1;
  }
  return s;
}

}  // namespace pypto
