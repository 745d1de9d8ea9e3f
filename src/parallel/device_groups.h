#pragma once
// Device groups (the seed's --device/--devices/--tp/--dp): dp × tp devices, replica i owning
// devices [i·tp, (i+1)·tp), its rank t on device devices[i·tp + t]. On the CPU backend a device
// is a group of cores: the cores this process may use are split into equal groups, one per
// device id (0 .. max id), unless --cpu-groups lists the groups explicitly (e.g. one per NUMA
// node). Each rank's compute threads are pinned to its group.
#include <string>
#include <vector>

namespace pypto {

// With pipeline parallelism (--pp) a replica has pp × tp ranks: rank stage * tp + t is stage
// `stage`'s tensor-parallel rank t, each on its own device.
struct ParallelLayout {
  int tp = 1, dp = 1, pp = 1;
  std::vector<int> devices;               // dp × pp × tp device ids, replica-major
  std::vector<std::vector<int>> cores;    // cores[i * pp * tp + r]: cores of replica i's rank r
  bool pinned = false;                    // false: one device on all cores, threads unpinned

  int ranks_per_replica() const { return pp * tp; }
  const std::vector<int>& rank_cores(int replica, int rank) const {
    return cores[size_t(replica * ranks_per_replica() + rank)];
  }
};

// Parses a comma-separated list of device ids ("0,1,2,3"): non-negative integers without
// duplicates. `flag` names the flag in error messages.
std::vector<int> parse_device_list(const std::string& flag, const std::string& text);

// Parses --cpu-groups: groups separated by ',', each a core ("3"), a range ("0-7") or several of
// those joined by '+' ("0-3+8-11"). A core may not appear in two groups.
std::vector<std::vector<int>> parse_cpu_groups(const std::string& text);

// The cores this process may run on (sched_getaffinity), ascending.
std::vector<int> available_cores();

// Checks the flags and places every rank. `devices_flag` is --devices ("" = just --device);
// `cpu_groups_flag` is --cpu-groups ("" = split `available` equally into max id + 1 groups).
// Throws Error saying what was expected when len(devices) != dp × tp, an id has no core group,
// or a group names a core this process may not use.
// pp > 1: each replica's pp × tp ranks (pipeline stages of tp ranks) need that many devices.
ParallelLayout plan_parallel_layout(int device, const std::string& devices_flag, int tp, int dp,
                                    const std::string& cpu_groups_flag, const std::vector<int>& available, int pp = 1);

// "0-3" / "0,2,5" style text for logs.
std::string format_core_list(const std::vector<int>& cores);

}  // namespace pypto
