#pragma once
// The engine benches' command line (bench_draft_prefix, bench_mtp_prefix): a reader that walks
// argv flag by flag and hands out the current flag's value, as text or as an integer with a lower
// bound (a missing or bad value throws Error naming the flag), and the main around a bench's run.
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "core/error.h"

namespace pypto::bench {

class FlagReader {
 public:
  FlagReader(int argc, char** argv) : argc_(argc), argv_(argv) {}

  // Moves to the next flag; false past the last.
  bool next() {
    if (++i_ >= argc_) return false;
    flag_ = argv_[i_];
    return true;
  }
  const std::string& flag() const { return flag_; }

  // The current flag's value (the next argument, which it consumes).
  const char* value() {
    if (i_ + 1 >= argc_) fail(flag_, " needs a value");
    return argv_[++i_];
  }

  // The current flag's value as an integer of at least `lo`.
  int number(int lo) {
    const std::string v = value();
    int n = 0;
    try {
      n = std::stoi(v);
    } catch (const std::exception&) {
      fail(flag_, ": not a number: \"", v, "\"");
    }
    if (n < lo) fail(flag_, " must be at least ", lo, ", got ", n);
    return n;
  }

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string flag_;
};

// The flags of the two-turn chat benches (bench_draft_prefix, bench_mtp_prefix); each sets its
// own defaults.
struct ChatBenchFlags {
  std::string model;
  int k = 0, answer = 0, message = 0, tokens = 0, repeats = 0, threads = 0, kv_cache_mib = 0;
};

// Reads the current flag into `c` when it is one of ChatBenchFlags'; false when it is not.
inline bool read_chat_bench_flag(FlagReader& r, ChatBenchFlags& c) {
  const std::string& f = r.flag();
  if (f == "--model") c.model = r.value();
  else if (f == "--k") c.k = r.number(1);
  else if (f == "--answer") c.answer = r.number(1);
  else if (f == "--message") c.message = r.number(1);
  else if (f == "--tokens") c.tokens = r.number(2);
  else if (f == "--repeats") c.repeats = r.number(1);
  else if (f == "--threads") c.threads = r.number(0);
  else if (f == "--kv-cache-mib") c.kv_cache_mib = r.number(16);
  else return false;
  return true;
}

// A bench's main: reads argv with `flag` (false: an unknown flag), then, if `complete` (the
// required flags are there), returns `run`'s exit code; exits 2 on a bad command line (printing
// `usage` when incomplete) and 1 when the run throws, each message prefixed with `name`.
inline int bench_main(const char* name, int argc, char** argv, const std::function<bool(FlagReader&)>& flag,
                      const std::function<bool()>& complete, const char* usage, const std::function<int()>& run) {
  FlagReader r(argc, argv);
  while (r.next()) {
    try {
      if (!flag(r)) {
        std::fprintf(stderr, "%s: unknown flag %s (see the file comment for the flags)\n", name, r.flag().c_str());
        return 2;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", name, e.what());
      return 2;
    }
  }
  if (!complete()) {
    std::fprintf(stderr, "usage: %s %s\n", name, usage);
    return 2;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace pypto::bench
