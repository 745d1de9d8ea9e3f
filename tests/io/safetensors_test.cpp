// Malformed safetensors files: each case fails with a message naming the file and the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

std::string file_image(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; i++) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + std::string(data_bytes, '\x01');
}

// The Error message from parsing `image`, or "" when it parses.
std::string parse_error(const std::string& image) {
  size_t start = 0;
  try {
    parse_safetensors_header(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "w.safetensors", &start);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ParsesAValidHeader) {
  std::string img = file_image(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
                               R"("a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"__metadata__":{"format":"pt"}})",
                               12);
  size_t start = 0;
  auto t = parse_safetensors_header(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "w", &start);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[0].dtype, DType::BF16);
  EXPECT_EQ(t[1].shape, Shape{2});
  EXPECT_EQ(start, img.size() - 12);
}

TEST(Safetensors, RejectsShortFile) {
  EXPECT_EQ(parse_error("abc"), "w.safetensors: not a safetensors file: 3 bytes, shorter than the 8-byte header length");
}

TEST(Safetensors, RejectsHeaderLengthPastEnd) {
  std::string img = file_image("{}", 0);
  img[0] = 100;
  EXPECT_EQ(parse_error(img), "w.safetensors: safetensors header length 100 runs past the end of the file (10 bytes)");
}

TEST(Safetensors, RejectsInvalidJson) {
  EXPECT_EQ(parse_error(file_image("{not json", 0)), "w.safetensors: safetensors header is not valid JSON");
  EXPECT_EQ(parse_error(file_image("[1,2]", 0)), "w.safetensors: safetensors header must be a JSON object");
}

TEST(Safetensors, RejectsUnsupportedDtype) {
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[0,1]}})", 1)),
            "w.safetensors: tensor 'x': dtype F8_E5M2 is not supported (supported: BF16, F16, F32, F8_E4M3, I32, I64, BOOL)");
}

TEST(Safetensors, ReadsQuantizedCheckpointDtypes) {
  // F8_E4M3 is 1 byte an element (a 2x3 block-FP8 weight), I32 4 (an AWQ qweight [3, 1]).
  std::string img = file_image(R"({"w":{"dtype":"F8_E4M3","shape":[2,3],"data_offsets":[0,6]},)"
                               R"("q":{"dtype":"I32","shape":[3,1],"data_offsets":[8,20]}})",
                               20);
  size_t start = 0;
  auto t = parse_safetensors_header(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "w", &start);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].dtype, DType::I32);
  EXPECT_EQ(t[1].dtype, DType::F8_E4M3);
  // A span that would fit 2-byte elements is refused for F8_E4M3.
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,8]}})", 8)),
            "w.safetensors: tensor 'x': data_offsets span 8 bytes but F8_E4M3 [4] needs 4");
}

TEST(Safetensors, RejectsOffsetsOutsideDataArea) {
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8)),
            "w.safetensors: tensor 'x': data_offsets [0, 16] lie outside the data area (8 bytes)");
}

TEST(Safetensors, RejectsSizeMismatch) {
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
            "w.safetensors: tensor 'x': data_offsets span 8 bytes but F32 [3] needs 12");
}

TEST(Safetensors, RejectsOverlap) {
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                   R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                   12)),
            "w.safetensors: tensors 'x' and 'y' overlap in the data area");
}

TEST(Safetensors, RejectsBadShapeAndOffsets) {
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
            "w.safetensors: tensor 'x': shape must hold non-negative integers, got [-1]");
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4)),
            "w.safetensors: tensor 'x': data_offsets begin 4 > end 0");
  EXPECT_EQ(parse_error(file_image(R"({"x":{"dtype":"F32","shape":[1]}})", 4)),
            "w.safetensors: tensor 'x': data_offsets must be [begin, end] of non-negative integers");
  // A shape whose element count overflows 64 bits must not wrap around to a small size.
  EXPECT_EQ(parse_error(file_image(
                R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", 4)),
            "w.safetensors: tensor 'x': shape [4294967296,4294967296,4] is larger than the file's data area");
}

TEST(Safetensors, WriterRoundTrips) {
  fs::path dir = fs::temp_directory_path() / ("pypto_st_roundtrip_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string p = (dir / "m.safetensors").string();
  float vals[3] = {1.5f, -2.0f, 3.25f};
  write_safetensors(p, {{"v", DType::F32, {3}, [&](uint8_t* d) { std::memcpy(d, vals, sizeof vals); }},
                        {"z", DType::BF16, {2, 2}, [](uint8_t* d) { std::memset(d, 0, 8); }}});
  auto f = SafetensorsFile::open(p);
  const SafetensorInfo* v = f->find("v");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(reinterpret_cast<const float*>(f->data(*v))[2], 3.25f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f->data(*v)) % 64, 0u) << "tensor data should be 64-byte aligned";
  EXPECT_EQ(f->find("z")->shape, (Shape{2, 2}));
  fs::remove_all(dir);
}
