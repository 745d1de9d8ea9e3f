#pragma once
// Errors for user input (bad files, flags, requests) are exceptions carrying a message that names
// what is wrong. Internal invariants use PYPTO_ASSERT, which aborts with the location.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

namespace pypto {

// A user-facing error: the message names the file / tensor / field / limit at fault.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Concatenate anything streamable into one message: fail("tensor ", name, " has shape ", s).
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str_cat(args...));
}

[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "pypto: internal invariant violated: %s at %s:%d %s\n", cond, file, line, msg.c_str());
  std::abort();
}

}  // namespace pypto

// Invariants of our own code (not user input). Always on: they are cheap and catch bugs early.
#define PYPTO_ASSERT(cond, ...)                                                        \
  do {                                                                                 \
    if (!(cond)) ::pypto::assert_fail(#cond, __FILE__, __LINE__, ::pypto::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
