// Test models made once under concurrency (model/test_model_cache.h): makers racing in several
// processes and threads for one directory all get the same complete model and leave no
// temporary copies; different options never share a directory.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/checkpoint.h"
#include "model/test_model_cache.h"

namespace fs = std::filesystem;

namespace pypto {
namespace {

fs::path fresh_dir(const std::string& what) {
  const fs::path d = fs::temp_directory_path() / ("pypto_model_cache_" + what + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Entries of `parent` whose name says they are a maker's temporary copy.
std::vector<std::string> leftovers(const fs::path& parent) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parent))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Every maker writes its own id and waits inside make() until all have entered it, so they all
// overlap however the threads are scheduled: exactly one directory wins, the others are
// discarded, and every caller sees the winner's whole content.
TEST(BuildDirectoryOnce, ThreadsRacingKeepOneCompleteCopy) {
  const fs::path parent = fresh_dir("threads");
  const std::string dir = (parent / "d").string();
  constexpr int kMakers = 8;
  std::atomic<int> made{0}, failed{0};
  std::vector<std::string> seen(kMakers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kMakers; ++i) {
    threads.emplace_back([&, i] {
      try {
        build_directory_once(dir, [&](const std::string& tmp) {
          made.fetch_add(1);
          std::ofstream(fs::path(tmp) / "part1") << i;
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
          while (made.load() < kMakers && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::ofstream(fs::path(tmp) / "part2") << i;
        });
        seen[i] = read_text(fs::path(dir) / "part1") + "/" + read_text(fs::path(dir) / "part2");
      } catch (const std::exception&) {
        failed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(made.load(), kMakers) << "the makers did not all overlap, so the test proved less";
  const std::set<std::string> distinct(seen.begin(), seen.end());
  ASSERT_EQ(distinct.size(), 1u) << "callers saw different contents";
  const std::string s = *distinct.begin();
  EXPECT_EQ(s.substr(0, s.find('/')), s.substr(s.find('/') + 1)) << "parts of two makers mixed: " << s;
  EXPECT_TRUE(fs::exists(fs::path(dir) / ".complete"));
  EXPECT_TRUE(leftovers(parent).empty());
  fs::remove_all(parent);
}

TEST(BuildDirectoryOnce, FailedMakerLeavesNothingAndTheNextOneBuilds) {
  const fs::path parent = fresh_dir("fail");
  const std::string dir = (parent / "d").string();
  EXPECT_THROW(build_directory_once(dir, [](const std::string&) { throw std::runtime_error("disk full"); }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(leftovers(parent).empty());
  build_directory_once(dir, [](const std::string& tmp) { std::ofstream(fs::path(tmp) / "x") << "ok"; });
  EXPECT_EQ(read_text(fs::path(dir) / "x"), "ok");
  fs::remove_all(parent);
}

// Separate processes (as ctest -j runs test cases) plus threads in this one, all making the same
// tiny model at once: one directory, loadable, byte-identical to a model made alone.
TEST(CachedTestModel, ProcessesAndThreadsRacingGetOneLoadableModel) {
  const fs::path parent = fresh_dir("procs");
  TestModelOptions opt;
  opt.preset = "tiny";
  opt.show_progress = false;
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        const std::string d = cached_test_model(parent.string(), "tiny", opt);
        rc = fs::exists(fs::path(d) / "config.json") ? 0 : 2;
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  std::vector<std::string> dirs(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&, i] { dirs[i] = cached_test_model(parent.string(), "tiny", opt); });
  for (auto& t : threads) t.join();
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a maker process failed (status " << status << ")";
  }
  EXPECT_EQ(dirs[0], dirs[1]);
  EXPECT_TRUE(leftovers(parent).empty());
  EXPECT_NO_THROW(Checkpoint::open(dirs[0]));

  const fs::path alone = fresh_dir("alone");
  opt.out_dir = alone.string();
  make_test_model(opt);
  EXPECT_EQ(read_text(fs::path(dirs[0]) / "model.safetensors"), read_text(alone / "model.safetensors"));
  fs::remove_all(alone);
  fs::remove_all(parent);
}

TEST(CachedTestModel, DifferentOptionsGetDifferentDirectories) {
  const fs::path parent = fresh_dir("keys");
  TestModelOptions a;
  a.preset = "tiny";
  a.show_progress = false;
  TestModelOptions b = a;
  b.seed = 1;
  TestModelOptions c = a;
  c.out_dir = "/elsewhere";  // not part of the key
  EXPECT_NE(test_model_key(a), test_model_key(b));
  EXPECT_EQ(test_model_key(a), test_model_key(c));
  const std::string da = cached_test_model(parent.string(), "tiny", a);
  const std::string db = cached_test_model(parent.string(), "tiny", b);
  EXPECT_NE(da, db);
  EXPECT_NE(read_text(fs::path(da) / "model.safetensors"), read_text(fs::path(db) / "model.safetensors"));
  EXPECT_EQ(cached_test_model(parent.string(), "tiny", c), da);
  fs::remove_all(parent);
}

}  // namespace
}  // namespace pypto
