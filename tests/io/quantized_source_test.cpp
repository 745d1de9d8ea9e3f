// Decoders of pre-quantized projections (src/model/quantized_source.h) on small safetensors
// files built here: block FP8 with tiles that do not divide the matrix, AWQ GEMM packing, slices,
// and the errors for mismatched tensors and misaligned slices. Expected weights come from the
// formats' definitions written out in this file (AutoAWQ's pack loop, the FP8 tile grid), not
// from the decoders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/quantized_source.h"
#include "model/test_model.h"
#include "model/weight_staging.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("pypto_qsrc_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A tensor whose bytes the test owns.
struct OwnedTensor {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
OwnedTensor tensor(const std::string& name, DType dt, Shape shape, const std::vector<T>& v) {
  OwnedTensor t{name, dt, shape, std::vector<uint8_t>(v.size() * sizeof(T))};
  EXPECT_EQ(static_cast<size_t>(shape_numel(shape)) * dtype_size(dt), t.bytes.size()) << name;
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// A one-layer Qwen3 config small enough to write by hand: hidden 64, intermediate 128, 2 heads of
// 32 (1 kv head), vocab 16, tied embeddings.
nlohmann::json small_config(const nlohmann::json& quant) {
  return {{"architectures", {"Qwen3ForCausalLM"}},
          {"vocab_size", 16},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"head_dim", 32},
          {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", 128},
          {"tie_word_embeddings", true},
          {"quantization_config", quant}};
}

std::unique_ptr<Checkpoint> write_checkpoint(const fs::path& dir, const nlohmann::json& config,
                                             const std::vector<OwnedTensor>& tensors) {
  std::ofstream(dir / "config.json") << config.dump(2);
  std::vector<SafetensorWrite> w;
  for (const auto& t : tensors) {
    const OwnedTensor* p = &t;
    w.push_back({t.name, t.dtype, t.shape, [p](uint8_t* d) { std::memcpy(d, p->bytes.data(), p->bytes.size()); }});
  }
  write_safetensors((dir / "model.safetensors").string(), w);
  return Checkpoint::open(dir.string());
}

nlohmann::json fp8_quant(int bn, int bk) {
  return {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {bn, bk}}};
}
nlohmann::json awq_quant(int group) {
  return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", group}, {"zero_point", true}, {"version", "gemm"}};
}

// ---- FP8 -------------------------------------------------------------------------------------

// Random finite e4m3 codes for an [n, k] weight, and a bf16 scale per bn × bk tile (the last
// tile row/column covering the leftovers).
struct Fp8Case {
  int64_t n, k, bn, bk;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scale_bf16;  // [ceil(n/bn), ceil(k/bk)]
  int64_t gk() const { return (k + bk - 1) / bk; }
  // The definition: w = e4m3 · scale of the tile holding (r, c).
  float weight(int64_t r, int64_t c) const {
    return e4m3_to_f32(codes[r * k + c]) * bf16_to_f32(scale_bf16[(r / bn) * gk() + c / bk]);
  }
};

Fp8Case make_fp8_case(int64_t n, int64_t k, int64_t bn, int64_t bk, uint32_t seed) {
  Fp8Case c{n, k, bn, bk, {}, {}};
  std::mt19937 rng(seed);
  c.codes.resize(n * k);
  for (auto& b : c.codes) {
    b = static_cast<uint8_t>(rng());
    if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes in a checkpoint
  }
  const int64_t gn = (n + bn - 1) / bn;
  c.scale_bf16.resize(gn * c.gk());
  // Distinct powers of two and odd mantissas, so a wrong tile index changes the value.
  for (size_t i = 0; i < c.scale_bf16.size(); i++)
    c.scale_bf16[i] = f32_to_bf16(std::ldexp(1.0f + 0.125f * static_cast<float>(i % 7), -int(i % 9)));
  return c;
}

std::vector<OwnedTensor> fp8_tensors(const std::string& proj, const Fp8Case& c) {
  return {tensor(proj + ".weight", DType::F8_E4M3, {c.n, c.k}, c.codes),
          tensor(proj + ".weight_scale_inv", DType::BF16, {(c.n + c.bn - 1) / c.bn, c.gk()}, c.scale_bf16)};
}

void expect_fp8_slice(const Fp8Source& s, const Fp8Case& c, int64_t r0, int64_t c0) {
  for (int64_t r = 0; r < s.n; r++)
    for (int64_t col = 0; col < s.k; col++) {
      ASSERT_EQ(s.at(r, col), c.weight(r0 + r, c0 + col)) << "slice (" << r << ", " << col << ") of W[" << c.n
                                                          << ", " << c.k << "] at (" << r0 << ", " << c0 << ")";
      ASSERT_EQ(s.e4m3[r * s.ld + col], c.codes[(r0 + r) * c.k + c0 + col]);
    }
}

}  // namespace

TEST(QuantizedSource, Fp8TilesCoverLeftovers) {
  // 200 × 300 with 128 × 128 tiles: a 2 × 3 grid whose last row of tiles has 72 rows and last
  // column 44 columns (a Qwen3 shape never needs this, but the format allows it).
  const fs::path d = temp_dir("fp8");
  Fp8Case c = make_fp8_case(200, 300, 128, 128, 1);
  auto ck = write_checkpoint(d, small_config(fp8_quant(128, 128)), fp8_tensors("m.p", c));
  Fp8Source s = read_fp8_projection(*ck, "m.p");
  EXPECT_EQ(s.n, 200);
  EXPECT_EQ(s.k, 300);
  EXPECT_EQ(s.ld, 300);
  EXPECT_EQ(s.grid_n, 2);
  EXPECT_EQ(s.grid_k, 3);
  EXPECT_EQ(s.row_phase, 0);
  EXPECT_EQ(s.col_phase, 0);
  ASSERT_EQ(s.scale.size(), 6u);
  for (size_t i = 0; i < 6; i++) EXPECT_EQ(s.scale[i], bf16_to_f32(c.scale_bf16[i]));
  expect_fp8_slice(s, c, 0, 0);
  // The header's whole-tensor formula, spelled out.
  EXPECT_EQ(s.at(199, 299), e4m3_to_f32(c.codes[199 * 300 + 299]) * s.scale[1 * 3 + 2]);
  fs::remove_all(d);
}

TEST(QuantizedSource, Fp8SlicesKeepTheirTiles) {
  // Non-square tiles (64 rows × 32 columns) and slices that start inside a tile.
  const fs::path d = temp_dir("fp8slice");
  Fp8Case c = make_fp8_case(136, 96, 64, 32, 2);
  auto ck = write_checkpoint(d, small_config(fp8_quant(64, 32)), fp8_tensors("m.p", c));
  struct Slice {
    int64_t r0, r1, c0, c1;
  };
  for (Slice sl : {Slice{0, 68, 0, 96}, Slice{68, 136, 0, 96}, Slice{0, 136, 48, 96}, Slice{10, 75, 5, 70},
                   Slice{128, 136, 64, 96}}) {
    Fp8Source s = read_fp8_projection(*ck, "m.p", sl.r0, sl.r1, sl.c0, sl.c1);
    EXPECT_EQ(s.n, sl.r1 - sl.r0);
    EXPECT_EQ(s.k, sl.c1 - sl.c0);
    EXPECT_EQ(s.row_phase, sl.r0 % 64);
    EXPECT_EQ(s.col_phase, sl.c0 % 32);
    EXPECT_EQ(s.grid_n, (s.n + s.row_phase + 63) / 64);
    EXPECT_EQ(s.grid_k, (s.k + s.col_phase + 31) / 32);
    expect_fp8_slice(s, c, sl.r0, sl.c0);
  }
  EXPECT_THROW(read_fp8_projection(*ck, "m.p", 0, 137), Error);
  EXPECT_THROW(read_fp8_projection(*ck, "m.p", 5, 5), Error);
  fs::remove_all(d);
}

TEST(QuantizedSource, Fp8ScaleDtypesAndShapeErrors) {
  const fs::path d = temp_dir("fp8err");
  Fp8Case c = make_fp8_case(130, 64, 128, 128, 3);
  // f32 and f16 scales widen exactly.
  std::vector<float> s32 = {0.5f, 3.0f};
  std::vector<uint16_t> s16 = {f32_to_f16(0.25f), f32_to_f16(0.001f)};
  auto ck = write_checkpoint(d, small_config(fp8_quant(128, 128)),
                             {tensor("a.weight", DType::F8_E4M3, {130, 64}, c.codes),
                              tensor("a.weight_scale_inv", DType::F32, {2, 1}, s32),
                              tensor("b.weight", DType::F8_E4M3, {130, 64}, c.codes),
                              tensor("b.weight_scale_inv", DType::F16, {2, 1}, s16),
                              tensor("c.weight", DType::F8_E4M3, {130, 64}, c.codes),
                              tensor("c.weight_scale_inv", DType::F32, {1, 1}, std::vector<float>{1.0f}),
                              tensor("d.weight", DType::BF16, {2, 2}, std::vector<uint16_t>(4))});
  Fp8Source a = read_fp8_projection(*ck, "a");
  EXPECT_EQ(a.at(129, 0), e4m3_to_f32(c.codes[129 * 64]) * 3.0f);
  Fp8Source b = read_fp8_projection(*ck, "b");
  EXPECT_EQ(b.at(1, 1), e4m3_to_f32(c.codes[65]) * f16_to_f32(s16[0]));
  EXPECT_EQ(b.scale[1], f16_to_f32(s16[1]));
  try {
    read_fp8_projection(*ck, "c");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              d.string() + ": tensor 'c.weight_scale_inv' is F32 [1, 1], expected BF16 or F16 or F32 [2, 1]");
  }
  try {
    read_fp8_projection(*ck, "d");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              d.string() + ": tensor 'd.weight' is BF16 [2, 2], expected a 2-D F8_E4M3 [out, in] weight (quant_method fp8)");
  }
  try {
    read_fp8_projection(*ck, "e");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), d.string() + ": tensor 'e.weight' not found in the checkpoint");
  }
  fs::remove_all(d);
}

// ---- AWQ -------------------------------------------------------------------------------------

namespace {

// AutoAWQ's GEMM packing (awq/modules/linear/gemm.py, WQLinear_GEMM.from_linear), restated:
// for each packed column j and slot i, word j of a row ORs in intweight[row][8j + order[i]] << 4i,
// where intweight is [in, out] (the transposed nn.Linear weight).
std::vector<int32_t> autoawq_pack(const std::vector<uint8_t>& int_in_out, int64_t rows, int64_t cols) {
  static const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<int32_t> packed(rows * cols / 8, 0);
  for (int64_t row = 0; row < rows; row++)
    for (int64_t col = 0; col < cols / 8; col++)
      for (int i = 0; i < 8; i++)
        packed[row * (cols / 8) + col] |=
            static_cast<int32_t>(static_cast<uint32_t>(int_in_out[row * cols + col * 8 + order_map[i]]) << (4 * i));
  return packed;
}

struct AwqCase {
  int64_t n, k, g;                // out, in, group
  std::vector<uint8_t> q;         // [n, k] 0..15 (nn.Linear orientation)
  std::vector<uint8_t> z;         // [n, k/g]
  std::vector<uint16_t> s_f16;    // [k/g, n] as stored
  float weight(int64_t r, int64_t c) const {
    const int64_t gi = c / g;
    return (float(q[r * k + c]) - float(z[r * (k / g) + gi])) * f16_to_f32(s_f16[gi * n + r]);
  }
};

AwqCase make_awq_case(int64_t n, int64_t k, int64_t g, uint32_t seed) {
  AwqCase c{n, k, g, {}, {}, {}};
  std::mt19937 rng(seed);
  c.q.resize(n * k);
  for (auto& v : c.q) v = rng() & 15;
  c.z.resize(n * (k / g));
  for (auto& v : c.z) v = rng() & 15;
  c.s_f16.resize((k / g) * n);
  for (auto& v : c.s_f16) v = f32_to_f16(std::ldexp(1.0f + float(rng() % 1024) / 1024.0f, -int(rng() % 8)));
  return c;
}

std::vector<OwnedTensor> awq_tensors(const std::string& proj, const AwqCase& c) {
  std::vector<uint8_t> q_in_out(c.k * c.n), z_g_out((c.k / c.g) * c.n);  // transposed, as AutoAWQ packs
  for (int64_t r = 0; r < c.n; r++) {
    for (int64_t col = 0; col < c.k; col++) q_in_out[col * c.n + r] = c.q[r * c.k + col];
    for (int64_t gi = 0; gi < c.k / c.g; gi++) z_g_out[gi * c.n + r] = c.z[r * (c.k / c.g) + gi];
  }
  return {tensor(proj + ".qweight", DType::I32, {c.k, c.n / 8}, autoawq_pack(q_in_out, c.k, c.n)),
          tensor(proj + ".qzeros", DType::I32, {c.k / c.g, c.n / 8}, autoawq_pack(z_g_out, c.k / c.g, c.n)),
          tensor(proj + ".scales", DType::F16, {c.k / c.g, c.n}, c.s_f16)};
}

void expect_awq_slice(const AwqSource& s, const AwqCase& c, int64_t r0, int64_t c0) {
  ASSERT_EQ(s.groups, s.k / c.g);
  for (int64_t r = 0; r < s.n; r++)
    for (int64_t col = 0; col < s.k; col++) {
      ASSERT_EQ(s.q[r * s.k + col], c.q[(r0 + r) * c.k + c0 + col]) << "q (" << r << ", " << col << ")";
      ASSERT_EQ(s.at(r, col), c.weight(r0 + r, c0 + col)) << "w (" << r << ", " << col << ")";
    }
  for (int64_t r = 0; r < s.n; r++)
    for (int64_t gi = 0; gi < s.groups; gi++) {
      ASSERT_EQ(s.zero[r * s.groups + gi], c.z[(r0 + r) * (c.k / c.g) + c0 / c.g + gi]);
      ASSERT_EQ(s.scale[r * s.groups + gi], f16_to_f32(c.s_f16[(c0 / c.g + gi) * c.n + r0 + r]));
    }
}

}  // namespace

TEST(QuantizedSource, AwqNibbleOrder) {
  // Out features 0..7 of one input row holding the values 0..7: slot s keeps column
  // {0,2,4,6,1,3,5,7}[s], so the word reads 0x75316420 (slot 0 in the low nibble).
  const fs::path d = temp_dir("awqorder");
  std::vector<int32_t> qweight(32, 0);  // [32 in, 1]
  qweight[0] = 0x75316420;
  auto ck = write_checkpoint(d, small_config(awq_quant(32)),
                             {tensor("m.p.qweight", DType::I32, {32, 1}, qweight),
                              tensor("m.p.qzeros", DType::I32, {1, 1}, std::vector<int32_t>{0x00000010}),
                              tensor("m.p.scales", DType::F16, {1, 8}, std::vector<uint16_t>(8, f32_to_f16(1.0f)))});
  AwqSource s = read_awq_projection(*ck, "m.p");
  ASSERT_EQ(s.n, 8);
  ASSERT_EQ(s.k, 32);
  for (int r = 0; r < 8; r++) EXPECT_EQ(s.q[r * 32 + 0], r) << "out feature " << r;
  // Zero word 0x10: slot 1 (= column 2) holds 1, the others 0.
  for (int r = 0; r < 8; r++) EXPECT_EQ(s.zero[r], r == 2 ? 1 : 0) << "out feature " << r;
  EXPECT_EQ(s.at(2, 0), 1.0f);  // (2 - 1) · 1
  EXPECT_EQ(s.at(3, 0), 3.0f);
  fs::remove_all(d);
}

TEST(QuantizedSource, AwqUnpacksWholeTensorsAndAlignedSlices) {
  const fs::path d = temp_dir("awq");
  AwqCase c = make_awq_case(40, 256, 64, 4);  // 5 packed words per row, 4 groups
  auto ck = write_checkpoint(d, small_config(awq_quant(64)), awq_tensors("m.p", c));
  AwqSource s = read_awq_projection(*ck, "m.p");
  EXPECT_EQ(s.n, 40);
  EXPECT_EQ(s.k, 256);
  EXPECT_EQ(s.group, 64);
  EXPECT_EQ(s.groups, 4);
  expect_awq_slice(s, c, 0, 0);
  struct Slice {
    int64_t r0, r1, c0, c1;
  };
  for (Slice sl : {Slice{8, 24, 0, 256}, Slice{0, 40, 64, 192}, Slice{32, 40, 192, 256}}) {
    AwqSource t = read_awq_projection(*ck, "m.p", sl.r0, sl.r1, sl.c0, sl.c1);
    EXPECT_EQ(t.n, sl.r1 - sl.r0);
    EXPECT_EQ(t.k, sl.c1 - sl.c0);
    expect_awq_slice(t, c, sl.r0, sl.c0);
  }
  const std::string tail = ") does not align with the AWQ packing: rows must be multiples of 8 (one int32 packs 8 "
                           "output features) and columns multiples of group_size 64";
  for (Slice sl : {Slice{4, 40, 0, 256}, Slice{0, 20, 0, 256}, Slice{0, 40, 32, 256}, Slice{0, 40, 0, 100}}) {
    try {
      read_awq_projection(*ck, "m.p", sl.r0, sl.r1, sl.c0, sl.c1);
      ADD_FAILURE() << sl.r0 << " " << sl.r1 << " " << sl.c0 << " " << sl.c1;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), str_cat("m.p: slice rows [", sl.r0, ", ", sl.r1, ") x columns [", sl.c0, ", ",
                                               sl.c1, tail));
    }
  }
  fs::remove_all(d);
}

TEST(QuantizedSource, AwqOddGroupSizes) {
  // A group of 12 inputs: input ranges that are not multiples of 8 (the unpacker's block) and
  // 108 = 64 + 44 input rows (its tile of 64, then 5 blocks of 8 and 4 single rows).
  const fs::path d = temp_dir("awqodd");
  AwqCase c = make_awq_case(16, 108, 12, 6);
  auto ck = write_checkpoint(d, small_config(awq_quant(12)), awq_tensors("m.p", c));
  expect_awq_slice(read_awq_projection(*ck, "m.p"), c, 0, 0);
  expect_awq_slice(read_awq_projection(*ck, "m.p", 8, 16, 12, 96), c, 8, 12);
  expect_awq_slice(read_awq_projection(*ck, "m.p", 0, 8, 0, 12), c, 0, 0);
  fs::remove_all(d);
}

TEST(QuantizedSource, AwqShapeErrors) {
  const fs::path d = temp_dir("awqerr");
  AwqCase c = make_awq_case(16, 64, 32, 5);
  auto good = awq_tensors("a", c);
  auto bad_scales = awq_tensors("b", c);
  bad_scales[2].shape = {16, 2};  // [out, groups] instead of [groups, out]
  auto bad_zeros = awq_tensors("c", c);
  bad_zeros[1].dtype = DType::F32;
  std::vector<OwnedTensor> all;
  for (auto* v : {&good, &bad_scales, &bad_zeros})
    for (auto& t : *v) all.push_back(t);
  all.push_back(tensor("e.qweight", DType::I32, {48, 2}, std::vector<int32_t>(96)));  // 48 rows: not 32k
  auto ck = write_checkpoint(d, small_config(awq_quant(32)), all);
  expect_awq_slice(read_awq_projection(*ck, "a"), c, 0, 0);
  auto error_of = [&](const char* proj) {
    try {
      read_awq_projection(*ck, proj);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  EXPECT_EQ(error_of("b"), d.string() + ": tensor 'b.scales' is F16 [16, 2], expected F16 or BF16 [2, 16]");
  EXPECT_EQ(error_of("c"), d.string() + ": tensor 'c.qzeros' is F32 [2, 2], expected I32 [2, 2]");
  EXPECT_EQ(error_of("e"), d.string() + ": tensor 'e.qweight' has 48 input rows, not a multiple of the AWQ group_size 32");
  fs::remove_all(d);
}

// ---- validation of a whole checkpoint --------------------------------------------------------

namespace {

// Every tensor of small_config()'s one layer, quantized as `method` (content is irrelevant here).
std::vector<OwnedTensor> small_checkpoint(const std::string& method) {
  std::vector<OwnedTensor> v;
  auto floats = [&](const std::string& name, Shape s) {
    v.push_back(tensor(name, DType::BF16, s, std::vector<uint16_t>(shape_numel(s))));
  };
  floats("model.embed_tokens.weight", {16, 64});
  floats("model.norm.weight", {64});
  const std::string p = "model.layers.0.";
  for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight"}) floats(p + n, {64});
  for (const char* n : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) floats(p + n, {32});
  struct P {
    const char* name;
    int64_t out, in;
  };
  for (P pr : {P{"self_attn.q_proj", 64, 64}, P{"self_attn.k_proj", 32, 64}, P{"self_attn.v_proj", 32, 64},
               P{"self_attn.o_proj", 64, 64}, P{"mlp.gate_proj", 128, 64}, P{"mlp.up_proj", 128, 64},
               P{"mlp.down_proj", 64, 128}}) {
    const std::string n = p + pr.name;
    if (method == "fp8") {
      v.push_back(tensor(n + ".weight", DType::F8_E4M3, {pr.out, pr.in}, std::vector<uint8_t>(pr.out * pr.in)));
      v.push_back(tensor(n + ".weight_scale_inv", DType::BF16, {1, 1}, std::vector<uint16_t>(1)));
    } else {
      v.push_back(tensor(n + ".qweight", DType::I32, {pr.in, pr.out / 8}, std::vector<int32_t>(pr.in * pr.out / 8)));
      v.push_back(tensor(n + ".qzeros", DType::I32, {pr.in / 32, pr.out / 8}, std::vector<int32_t>(pr.in / 32 * pr.out / 8)));
      v.push_back(tensor(n + ".scales", DType::F16, {pr.in / 32, pr.out}, std::vector<uint16_t>(pr.in / 32 * pr.out)));
    }
  }
  return v;
}

std::vector<std::string> problems_of(const fs::path& d, const nlohmann::json& quant,
                                     const std::vector<OwnedTensor>& tensors) {
  auto ck = write_checkpoint(d, small_config(quant), tensors);
  std::vector<std::string> problems;
  validate_quantized_projections(*ck, problems);
  return problems;
}

void edit(std::vector<OwnedTensor>& v, const std::string& name, const std::function<void(OwnedTensor&)>& f) {
  for (auto& t : v)
    if (t.name == name) return f(t);
  ADD_FAILURE() << "no tensor " << name;
}

}  // namespace

TEST(QuantizedSource, ValidatesCompleteCheckpoints) {
  const fs::path d = temp_dir("valid");
  EXPECT_EQ(problems_of(d, fp8_quant(128, 128), small_checkpoint("fp8")), std::vector<std::string>{});
  EXPECT_EQ(problems_of(d, awq_quant(32), small_checkpoint("awq")), std::vector<std::string>{});
  fs::remove_all(d);
}

TEST(QuantizedSource, ValidationListsEveryProblem) {
  const fs::path d = temp_dir("invalid");
  auto fp8 = small_checkpoint("fp8");
  edit(fp8, "model.layers.0.mlp.up_proj.weight", [](OwnedTensor& t) {  // stored as bf16: not quantized
    t.dtype = DType::BF16;
    t.shape = {64, 128};
    t.bytes.resize(64 * 128 * 2);
  });
  edit(fp8, "model.layers.0.self_attn.k_proj.weight_scale_inv", [](OwnedTensor& t) { t.name = "unrelated"; });
  edit(fp8, "model.norm.weight", [](OwnedTensor& t) {
    t.dtype = DType::I32;
    t.bytes.resize(64 * 4);
  });
  EXPECT_EQ(problems_of(d, fp8_quant(128, 128), fp8),
            (std::vector<std::string>{
                "model.norm.weight: dtype I32, expected BF16 or F16 or F32 (fp8 checkpoint)",
                "model.layers.0.self_attn.k_proj.weight_scale_inv: missing (expected BF16 or F16 or F32 [1, 1])",
                "model.layers.0.mlp.up_proj.weight: shape [64, 128], expected [128, 64]",
                "model.layers.0.mlp.up_proj.weight: dtype BF16, expected F8_E4M3 (fp8 checkpoint)",
            }));

  auto awq = small_checkpoint("awq");
  edit(awq, "model.layers.0.mlp.down_proj.scales", [](OwnedTensor& t) { t.shape = {128, 2}; });
  edit(awq, "model.layers.0.self_attn.o_proj.qzeros", [](OwnedTensor& t) { t.name = "model.layers.0.self_attn.o_proj.qzero"; });
  EXPECT_EQ(problems_of(d, awq_quant(32), awq),
            (std::vector<std::string>{
                "model.layers.0.self_attn.o_proj.qzeros: missing (expected I32 [2, 8])",
                "model.layers.0.mlp.down_proj.scales: shape [128, 2], expected [4, 64]",
            }));
  // A group that does not divide an in_features cannot describe the checkpoint.
  auto problems = problems_of(d, awq_quant(128), small_checkpoint("awq"));
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0],
            "model.layers.0.self_attn.q_proj: [out 64, in 64] cannot be AWQ-packed (in must be a multiple of "
            "group_size 128, out a multiple of 8)");
  fs::remove_all(d);
}

// ---- make-test-model's pre-quantized checkpoints ---------------------------------------------

namespace {

fs::path make_model(const std::string& name, QuantMethod quant, const std::string& preset = "tiny") {
  fs::path d = fs::temp_directory_path() / ("pypto_qsrc_model_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  TestModelOptions opt;
  opt.preset = preset;
  opt.layers = 2;
  opt.seed = 11;
  opt.quant = quant;
  opt.dtype = quant == QuantMethod::Awq ? DType::F16 : DType::BF16;
  opt.out_dir = d.string();
  opt.show_progress = false;
  make_test_model(opt);
  return d;
}

}  // namespace

TEST(QuantizedSource, MakeTestModelWritesFaithfulQuantizations) {
  // Every projection decodes to the bf16 checkpoint of the same seed within the format's step:
  // FP8 |dW| <= 2^-4 |W| + scale · 2^-10 (half an E4M3 step; the subnormal step is 2^-9 · scale),
  // AWQ |dW| <= scale (half a step, except where the 4-bit range clamps), most within scale / 2.
  const fs::path base = make_model("bf16", QuantMethod::None);
  auto ref = Checkpoint::open(base.string());
  for (QuantMethod m : {QuantMethod::Fp8, QuantMethod::Awq}) {
    const fs::path d = make_model(quant_method_name(m), m);
    auto ck = Checkpoint::open(d.string());
    ASSERT_EQ(ck->config().quant.method, m);
    std::vector<std::string> problems;
    validate_quantized_projections(*ck, problems);
    EXPECT_EQ(problems, std::vector<std::string>{});
    if (m == QuantMethod::Awq) {
      EXPECT_EQ(ck->config().quant.awq_group, 64);  // tiny: hidden 64 is not a multiple of 128
      EXPECT_EQ(ck->config().torch_dtype, DType::F16);
      EXPECT_EQ(ck->get("model.embed_tokens.weight").info->dtype, DType::F16);
    } else {
      EXPECT_EQ(ck->get("model.embed_tokens.weight").info->dtype, DType::BF16);
      EXPECT_EQ(ck->get("model.layers.0.self_attn.k_proj.weight_scale_inv").info->dtype, DType::BF16);
    }
    for (int layer = 0; layer < 2; layer++)
      for (const char* p : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
        const std::string proj = str_cat("model.layers.", layer, ".", p);
        const TensorRef& w = ref->get(proj + ".weight");
        const int64_t n = w.info->shape[0], k = w.info->shape[1];
        Fp8Source f;
        AwqSource a;
        if (m == QuantMethod::Fp8) f = read_fp8_projection(*ck, proj);
        if (m == QuantMethod::Awq) a = read_awq_projection(*ck, proj);
        int64_t within_half = 0;
        double worst = 0;
        for (int64_t r = 0; r < n; r++)
          for (int64_t c = 0; c < k; c++) {
            const float want = load_as_f32(w.data(), DType::BF16, static_cast<size_t>(r * k + c));
            if (m == QuantMethod::Fp8) {
              const float err = std::fabs(f.at(r, c) - want);
              worst = std::max(worst, double(err) / (std::ldexp(std::fabs(want), -4) + std::ldexp(f.scale_at(r, c), -10)));
              within_half++;
            } else {
              const float err = std::fabs(a.at(r, c) - want);
              const float step = a.scale[static_cast<size_t>(r * a.groups + c / a.group)];
              worst = std::max(worst, double(err) / step);
              within_half += err <= 0.5f * step * 1.001f;
            }
          }
        EXPECT_LE(worst, 1.0 + 1e-6) << quant_method_name(m) << " " << proj;
        EXPECT_GE(double(within_half), 0.99 * double(n * k)) << quant_method_name(m) << " " << proj;
      }
    fs::remove_all(d);
  }
  fs::remove_all(base);
}

TEST(QuantizedSource, MakeTestModelRefusesAnAwqGroupThatDoesNotDivide) {
  TestModelOptions opt;
  opt.quant = QuantMethod::Awq;
  opt.quant_group = 48;
  opt.out_dir = (fs::temp_directory_path() / ("pypto_qsrc_g48_" + std::to_string(getpid()))).string();
  opt.show_progress = false;
  try {
    make_test_model(opt);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--quant-group 48 does not divide every projection's in_features (hidden_size 64, q rows "
                           "128, intermediate_size 128)");
  }
  opt.quant = QuantMethod::Fp8;
  EXPECT_THROW(make_test_model(opt), Error);
  fs::remove_all(opt.out_dir);
}

TEST(QuantizedSource, CheckpointValidationListsQuantizedTensors) {
  // validate_qwen3_checkpoint (what loading runs) reports a pre-quantized checkpoint's problems
  // through validate_quantized_projections, with the unquantized tensors' own checks beside.
  for (QuantMethod m : {QuantMethod::Fp8, QuantMethod::Awq}) {
    const fs::path d = make_model(std::string("bad_") + quant_method_name(m), m);
    const std::string dropped = m == QuantMethod::Fp8 ? "model.layers.1.mlp.up_proj.weight_scale_inv"
                                                      : "model.layers.1.mlp.up_proj.qzeros";
    {
      auto f = SafetensorsFile::open((d / "model.safetensors").string());
      std::vector<SafetensorWrite> ts;
      for (const auto& t : f->tensors()) {
        if (t.name == dropped) continue;
        const uint8_t* src = f->data(t);
        const size_t n = t.end - t.begin;
        ts.push_back({t.name, t.dtype, t.shape, [src, n](uint8_t* dst) { std::memcpy(dst, src, n); }});
      }
      write_safetensors((d / "new.safetensors").string(), ts);
    }
    fs::rename(d / "new.safetensors", d / "model.safetensors");
    auto ck = Checkpoint::open(d.string());
    EXPECT_NO_THROW(ck->get("model.layers.1.mlp.up_proj." + std::string(m == QuantMethod::Fp8 ? "weight" : "qweight")));
    try {
      validate_qwen3_checkpoint(*ck);
      ADD_FAILURE() << quant_method_name(m);
    } catch (const Error& e) {
      const std::string expected = m == QuantMethod::Fp8 ? dropped + ": missing (expected BF16 or F16 or F32 [1, 1])"
                                                         : dropped + ": missing (expected I32 [1, 16])";  // in 64 = one group
      EXPECT_EQ(std::string(e.what()),
                d.string() + ": checkpoint does not match config.json (1 tensor):\n  " + expected);
    }
    fs::remove_all(d);
  }
}
