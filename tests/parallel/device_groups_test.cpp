// Device groups: --devices/--tp/--dp/--cpu-groups validation messages and the core placement of
// every rank (replica i owns devices [i*tp, (i+1)*tp); a device is an equal share of the cores).
#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/device_groups.h"

namespace pypto {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::vector<int> kCores16 = [] {
  std::vector<int> v;
  for (int i = 0; i < 16; ++i) v.push_back(i);
  return v;
}();

TEST(DeviceGroups, DefaultDeviceUsesEveryCoreUnpinned) {
  ParallelLayout L = plan_parallel_layout(0, "", 1, 1, "", kCores16);
  EXPECT_FALSE(L.pinned);
  EXPECT_EQ(L.devices, std::vector<int>{0});
  EXPECT_EQ(L.cores[0].size(), 16u);
}

TEST(DeviceGroups, TwoDevicesOnTwoCoresAreOneCoreEach) {
  ParallelLayout L = plan_parallel_layout(0, "0,1", 2, 1, "", {0, 1});
  EXPECT_TRUE(L.pinned);
  EXPECT_EQ(L.rank_cores(0, 0), std::vector<int>{0});
  EXPECT_EQ(L.rank_cores(0, 1), std::vector<int>{1});
}

TEST(DeviceGroups, ReplicaIGetsDevicesITimesTpOnwards) {
  // dp 2 x tp 2 over devices 3,2,1,0 on 16 cores: 4 groups of 4 cores; replica 1 rank 0 is the
  // third listed device (1) = cores 4-7.
  ParallelLayout L = plan_parallel_layout(0, "3,2,1,0", 2, 2, "", kCores16);
  EXPECT_EQ(L.rank_cores(0, 0), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(L.rank_cores(0, 1), (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(L.rank_cores(1, 0), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(L.rank_cores(1, 1), (std::vector<int>{0, 1, 2, 3}));
}

TEST(DeviceGroups, ExplicitCpuGroups) {
  ParallelLayout L = plan_parallel_layout(0, "0,1", 1, 2, "0-3+8-11,4-7", kCores16);
  EXPECT_EQ(L.rank_cores(0, 0), (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  EXPECT_EQ(L.rank_cores(1, 0), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(format_core_list(L.rank_cores(0, 0)), "0-3,8-11");
}

TEST(DeviceGroups, Messages) {
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,1,2", 2, 1, "", kCores16); }),
            "--devices '0,1,2' lists 3 device(s) but --dp 1 x --tp 2 needs 2 (replica i uses devices [i*tp, (i+1)*tp))");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "", 2, 2, "", kCores16); }),
            "--dp 2 x --tp 2 needs 4 devices: give --devices with 4 comma-separated ids (replica i uses devices "
            "[i*tp, (i+1)*tp))");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,0", 2, 1, "", kCores16); }),
            "--devices '0,0': device 0 is listed twice (each device serves one rank)");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,x", 2, 1, "", kCores16); }),
            "--devices '0,x': 'x' is not a device id (expected a non-negative integer)");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,-1", 2, 1, "", kCores16); }),
            "--devices '0,-1': '-1' is not a device id (expected a non-negative integer)");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,", 2, 1, "", kCores16); }),
            "--devices '0,': '' is not a device id (expected a non-negative integer)");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,2", 2, 1, "", {0, 1}); }),
            "device 2 needs 3 core groups but only 2 core(s) are available (0-1); use lower device ids or --cpu-groups");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,1", 2, 1, "0-3", kCores16); }),
            "device 1 has no core group: --cpu-groups '0-3' defines 1 group(s), devices 0..0");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,1", 2, 1, "0-3,3-5", kCores16); }),
            "--cpu-groups '0-3,3-5': core 3 is in group 0 and group 1");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,1", 2, 1, "0,40", kCores16); }),
            "--cpu-groups '0,40': core 40 (group 1) is not available to this process (available: 0-15)");
  EXPECT_EQ(error_of([] { plan_parallel_layout(0, "0,1", 2, 1, "0,5-2", kCores16); }),
            "--cpu-groups '0,5-2': '5-2' is not a core or a range like 0-7");
}

TEST(DeviceGroups, AvailableCoresAreTheAffinityMask) {
  const std::vector<int> cores = available_cores();
  ASSERT_FALSE(cores.empty());
  for (size_t i = 1; i < cores.size(); ++i) EXPECT_LT(cores[i - 1], cores[i]);
}

}  // namespace
}  // namespace pypto
