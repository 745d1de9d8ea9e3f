#pragma once
// The CLI test suites' checkpoints: a fixture base whose suite makes its test models once, under a
// temp dir of its own (named for the suite and the process, so concurrent runs do not collide),
// and removes them after the suite. Suite is the deriving fixture (each has its own dir).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/test_model.h"

namespace pypto::test {

template <class Suite>
class CliTestModels : public ::testing::Test {
 protected:
  // Called first in Suite::SetUpTestSuite: the dir is TMP/<prefix><pid>.
  static void start_models(const std::string& prefix) {
    dir_ = std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()));
  }
  // Makes the test model `o` as dir/name (without a progress bar).
  static void make_model(const std::string& name, TestModelOptions o) {
    o.out_dir = (dir_ / name).string();
    o.show_progress = false;
    make_test_model(o);
  }
  static std::string model_path(const std::string& name) { return (dir_ / name).string(); }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static inline std::filesystem::path dir_;
};

}  // namespace pypto::test
