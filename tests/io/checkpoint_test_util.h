#pragma once
// Helpers of the checkpoint tests: test models in per-process temporary directories, config.json
// edits, and the error a checkpoint directory fails to open and validate with.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json_fields.h"
#include "model/test_model.h"
#include "model/weight_staging.h"

namespace pypto::test {

// <tmp>/pypto_io_test_<name>_<pid>, removed first (ctest runs the suites as parallel processes)
// and again when the process exits, whatever the test did (a hybrid MoE checkpoint is ~73 MB: left
// behind by every run they filled /tmp).
inline std::filesystem::path io_temp_dir(const std::string& name) {
  struct RemovedAtExit {
    std::vector<std::filesystem::path> dirs;
    ~RemovedAtExit() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static RemovedAtExit created;
  std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("pypto_io_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  created.dirs.push_back(d);
  return d;
}

// make-test-model with `opt` into io_temp_dir(name).
inline std::filesystem::path make_model_in_temp(const std::string& name, TestModelOptions opt) {
  const std::filesystem::path d = io_temp_dir(name);
  opt.out_dir = d.string();
  opt.show_progress = false;
  make_test_model(opt);
  return d;
}

// What opening and validating the checkpoint throws ("" when it loads).
inline std::string open_error(const std::filesystem::path& dir) {
  try {
    auto ck = Checkpoint::open(dir.string());
    validate_qwen3_checkpoint(*ck);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Rewrites dir/config.json with `f` applied.
inline void edit_config(const std::filesystem::path& dir, const std::function<void(nlohmann::json&)>& f) {
  nlohmann::json j = nlohmann::json::parse(read_text_file((dir / "config.json").string()));
  f(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

}  // namespace pypto::test
