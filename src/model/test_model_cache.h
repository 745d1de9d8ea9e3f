#pragma once
// Test models made once and shared: by tests running as separate processes (ctest -j), by two
// checkouts' test runs on one machine, and by concurrent first runs of the built-in default
// model. A model's directory is named after its options, so callers that want different models
// never share, overwrite or remove each other's; it is built in a private temporary sibling and
// renamed into place complete, so no caller ever sees a half-written one.
#include <functional>
#include <string>

#include "model/test_model.h"

namespace pypto {

// A stable text of every option that changes the files make_test_model writes (out_dir and
// show_progress excluded).
std::string test_model_key(const TestModelOptions& opt);

// Makes `dir` once: when `dir/.complete` exists it returns at once; otherwise make(tmp) fills a
// fresh temporary sibling private to this thread of this process, the marker is written into it
// and it is renamed to `dir`. When another maker renamed first, this one's copy is discarded and
// the winner's kept. Error (naming `dir`) when no complete directory exists afterwards.
void build_directory_once(const std::string& dir, const std::function<void(const std::string& tmp)>& make);

// The checkpoint of `opt` (its out_dir is ignored) in `parent`/`name`-<16 hex digits of
// test_model_key(opt)>, made on first use by build_directory_once. Returns the directory.
std::string cached_test_model(const std::string& parent, const std::string& name, TestModelOptions opt);

}  // namespace pypto
