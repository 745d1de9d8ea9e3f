// Two "hosts" on this machine: network namespaces joined by a veth pair that the test makes and
// removes itself (namespace-private 10.218.0.0/24 addresses; nothing outside the namespaces
// changes). mpirun runs in host A and starts rank 0 there and rank 1 in host B (ip netns exec),
// with OpenMPI's TCP transports, its out-of-band channel and PMIx all restricted to the veth
// subnet, so every byte between the ranks crosses a network stack. For --tp 2 and for --pp 2:
// the greedy ids equal one rank's, and host B's veth sent more than 1 MB (--tp 2: rank 1's share
// of the logits, 2 rows x 75,968 vocabulary columns of f32 per step; --pp 2: the last stage's
// logits, twice that; over 17 steps).
// Skipped, with the reason, without MPI, without root, or where namespaces cannot be made.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "model/test_model.h"
#include "process_harness.h"

namespace fs = std::filesystem;

namespace pypto::test {
namespace {

// The two namespaces and the veth pair; removed on destruction (deleting a namespace deletes
// its end of the pair and with it the peer).
class TwoHosts {
 public:
  TwoHosts() {
    const std::string id = std::to_string(getpid());
    a_ = "pypto" + id + "a";
    b_ = "pypto" + id + "b";
    const std::string va = "pp" + id + "a", vb = "pp" + id + "b";
    vb_ = vb;
    const std::string steps[] = {
        "ip netns add " + a_,
        "ip netns add " + b_,
        "ip link add " + va + " type veth peer name " + vb,
        "ip link set " + va + " netns " + a_,
        "ip link set " + vb + " netns " + b_,
        "ip -n " + a_ + " addr add 10.218.0.1/24 dev " + va,
        "ip -n " + b_ + " addr add 10.218.0.2/24 dev " + vb,
        "ip -n " + a_ + " link set " + va + " up",
        "ip -n " + b_ + " link set " + vb + " up",
        "ip -n " + a_ + " link set lo up",
        "ip -n " + b_ + " link set lo up",
    };
    for (const std::string& s : steps) {
      const RunResult r = run_shell(s);
      if (r.exit_code != 0) {
        error_ = s + ": " + r.output;
        return;
      }
    }
  }
  ~TwoHosts() {
    run_shell("ip netns del " + a_);
    run_shell("ip netns del " + b_);
  }
  const std::string& error() const { return error_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  // Bytes host B's veth end has sent.
  long long b_tx_bytes() const {
    const std::string s = read_file_in_ns(b_, "/sys/class/net/" + vb_ + "/statistics/tx_bytes");
    return s.empty() ? -1 : std::stoll(s);
  }

 private:
  static std::string read_file_in_ns(const std::string& ns, const std::string& path) {
    return run_shell("ip netns exec " + ns + " cat " + path).output;
  }
  std::string a_, b_, vb_, error_;
};

// Rank 1 in host B is tensor-parallel rank 1 (--tp 2: all-reduces cross the veth every layer) or
// pipeline stage 1 (--pp 2: hidden states go to it, logits come back from it every step).
TEST(TwoNamespaces, MpiRanksOnTwoNetworkStacksGiveOneRanksGreedyIds) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  if (geteuid() != 0) GTEST_SKIP() << "making network namespaces needs root";
  if (run_shell("command -v ip").exit_code != 0) GTEST_SKIP() << "no `ip` (iproute2; scripts/setup.sh installs it)";
  TwoHosts hosts;
  if (!hosts.error().empty()) GTEST_SKIP() << "cannot make network namespaces here: " << hosts.error();

  const fs::path dir = fs::temp_directory_path() / ("pypto_two_hosts_" + std::to_string(getpid()));
  TestModelOptions o;
  o.out_dir = (dir / "tiny").string();
  o.layers = 4;  // two per stage at --pp 2
  o.show_progress = false;
  make_test_model(o);
  const std::string gen = " --model " + o.out_dir +
                          " --threads 1 --kv-cache-memory 16MiB --prompt-token-ids 1,2,3,4,5 --prompt-token-ids 9,8,7"
                          " --generate-config '{\"max_new_tokens\": 16, \"temperature\": 0}' --output-json ";
  auto ids_of = [](const fs::path& json) {
    std::vector<std::vector<int>> ids;
    for (const auto& r : nlohmann::json::parse(read_file(json))["results"]) ids.push_back(r["token_ids"].get<std::vector<int>>());
    return ids;
  };
  const RunResult one = run_shell(kBinary + gen + (dir / "one.json").string());
  ASSERT_EQ(one.exit_code, 0) << one.output;

  const std::string subnet = "10.218.0.0/24";
  const std::string env = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp"
                          " OMPI_MCA_btl_tcp_if_include=" + subnet + " OMPI_MCA_oob_tcp_if_include=" + subnet +
                          " PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include=" + subnet +
                          " OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none ";
#ifdef PYPTO_MPIEXEC
  const std::string mpirun = PYPTO_MPIEXEC;
#else
  const std::string mpirun = "mpirun";
#endif
  for (const std::string layout : {"--tp 2", "--pp 2"}) {
    SCOPED_TRACE(layout);
    const long long tx0 = hosts.b_tx_bytes();
    const std::string tail = gen + (dir / "two.json").string() + " " + layout + " --distributed-executor-backend mpi";
    const RunResult two = run_shell("timeout 120 ip netns exec " + hosts.a() + " " + env + mpirun + " -np 1 " + kBinary +
                                    tail + " : -np 1 ip netns exec " + hosts.b() + " " + kBinary + tail);
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_EQ(ids_of(dir / "two.json"), ids_of(dir / "one.json"));
    const long long sent = hosts.b_tx_bytes() - tx0;
    EXPECT_GT(sent, 1000000) << "host B's veth sent only " << sent << " bytes: the ranks did not talk over it";
    std::printf("[two hosts] %s: host B's veth sent %lld bytes\n", layout.c_str(), sent);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pypto::test
