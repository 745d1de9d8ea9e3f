#pragma once
// numpy .npy output of the CLI (the logits and inspect --dequantize subcommands).
#include <cstdint>
#include <string>

namespace pypto::cli {

// Writes a float32 [rows, cols] C-order array; Error "--out: ..." naming the path on failure.
void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);

}  // namespace pypto::cli
