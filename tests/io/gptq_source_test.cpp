// The GPTQ decoder (read_gptq_projection, src/model/quantized_source.h) on small safetensors files
// built here by packing known values the way AutoGPTQ's QuantLinear.pack lays them out (qweight
// along the inputs, qzeros along the outputs, v1 zeros stored minus one): every value comes back,
// whole and in aligned slices; v2 zeros are taken as stored; act-order g_idx, a v1 zero that does
// not fit 4 bits, bad shapes and misaligned slices are refused naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "checkpoint_test_util.h"
#include "io/safetensors.h"
#include "model/quantized_source.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

struct Bytes {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<uint8_t> data;
};

template <typename T>
Bytes bytes_of(const std::string& name, DType dt, Shape shape, const std::vector<T>& v) {
  Bytes b{name, dt, shape, std::vector<uint8_t>(v.size() * sizeof(T))};
  EXPECT_EQ(static_cast<size_t>(shape_numel(shape)) * dtype_size(dt), b.data.size()) << name;
  std::memcpy(b.data.data(), v.data(), b.data.size());
  return b;
}

nlohmann::json gptq_quant(int group, const char* format = "gptq", bool desc_act = false) {
  return {{"bits", 4},         {"group_size", group}, {"desc_act", desc_act},   {"sym", false},
          {"quant_method", "gptq"}, {"checkpoint_format", format}, {"damp_percent", 0.01}};
}

// Enough of a Qwen3 config.json for Checkpoint::open; the tensors tested are free-standing.
std::unique_ptr<Checkpoint> write_checkpoint(const fs::path& dir, const nlohmann::json& quant,
                                             const std::vector<Bytes>& tensors) {
  fs::create_directories(dir);
  nlohmann::json cfg = {{"architectures", {"Qwen3ForCausalLM"}}, {"vocab_size", 16}, {"hidden_size", 64},
                        {"intermediate_size", 128}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                        {"num_key_value_heads", 1}, {"head_dim", 32}, {"rms_norm_eps", 1e-6},
                        {"max_position_embeddings", 128}, {"tie_word_embeddings", true},
                        {"quantization_config", quant}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  std::vector<SafetensorWrite> w;
  for (const auto& t : tensors) {
    const Bytes* p = &t;
    w.push_back({t.name, t.dtype, t.shape, [p](uint8_t* d) { std::memcpy(d, p->data.data(), p->data.size()); }});
  }
  write_safetensors((dir / "model.safetensors").string(), w);
  return Checkpoint::open(dir.string());
}

// A projection W [n, k] in groups of g inputs: q [n, k] and zero [n, k / g] in 0..15 (the real
// zero points), scales as stored, f16 [k / g, n].
struct GptqCase {
  int64_t n, k, g;
  std::vector<uint8_t> q, zero;
  std::vector<uint16_t> s_f16;
  float weight(int64_t r, int64_t c) const {
    const int64_t gi = c / g;
    return (float(q[r * k + c]) - float(zero[r * (k / g) + gi])) * f16_to_f32(s_f16[gi * n + r]);
  }
};

GptqCase make_case(int64_t n, int64_t k, int64_t g, uint32_t seed, int max_zero) {
  GptqCase c{n, k, g, {}, {}, {}};
  std::mt19937 rng(seed);
  c.q.resize(n * k);
  for (auto& v : c.q) v = rng() & 15;
  c.zero.resize(n * (k / g));
  for (auto& v : c.zero) v = 1 + rng() % max_zero;  // v1 stores zero - 1: 1..max_zero
  c.s_f16.resize((k / g) * n);
  for (auto& v : c.s_f16) v = f32_to_f16(std::ldexp(1.0f + float(rng() % 1024) / 1024.0f, -int(rng() % 8)));
  return c;
}

// qweight [k / 8, n]: word [r][col] holds inputs 8r..8r+7 of output col, input 8r + s in bits
// 4s..4s+3. qzeros [k / g, n / 8]: word [gi][j] holds outputs 8j..8j+7, output 8j + s in bits
// 4s..4s+3, each `zero - zero_offset` (1 for v1). g_idx [k] = input / g.
std::vector<Bytes> gptq_tensors(const std::string& proj, const GptqCase& c, int zero_offset) {
  std::vector<int32_t> qweight(c.k / 8 * c.n), qzeros(c.k / c.g * c.n / 8), g_idx(c.k);
  for (int64_t r = 0; r < c.k / 8; r++)
    for (int64_t col = 0; col < c.n; col++) {
      uint32_t w = 0;
      for (int s = 0; s < 8; s++) w |= uint32_t(c.q[col * c.k + 8 * r + s]) << (4 * s);
      qweight[r * c.n + col] = int32_t(w);
    }
  for (int64_t gi = 0; gi < c.k / c.g; gi++)
    for (int64_t j = 0; j < c.n / 8; j++) {
      uint32_t w = 0;
      for (int s = 0; s < 8; s++)
        w |= (uint32_t(c.zero[(8 * j + s) * (c.k / c.g) + gi] - zero_offset) & 15u) << (4 * s);
      qzeros[gi * (c.n / 8) + j] = int32_t(w);
    }
  for (int64_t i = 0; i < c.k; i++) g_idx[i] = int32_t(i / c.g);
  return {bytes_of(proj + ".qweight", DType::I32, {c.k / 8, c.n}, qweight),
          bytes_of(proj + ".qzeros", DType::I32, {c.k / c.g, c.n / 8}, qzeros),
          bytes_of(proj + ".scales", DType::F16, {c.k / c.g, c.n}, c.s_f16),
          bytes_of(proj + ".g_idx", DType::I32, {c.k}, g_idx)};
}

void expect_slice(const AwqSource& s, const GptqCase& c, int64_t r0, int64_t c0) {
  ASSERT_EQ(s.group, c.g);
  ASSERT_EQ(s.groups, s.k / c.g);
  for (int64_t r = 0; r < s.n; r++)
    for (int64_t col = 0; col < s.k; col++) {
      ASSERT_EQ(s.q[r * s.k + col], c.q[(r0 + r) * c.k + c0 + col]) << "q (" << r << ", " << col << ")";
      ASSERT_EQ(s.at(r, col), c.weight(r0 + r, c0 + col)) << "w (" << r << ", " << col << ")";
    }
  for (int64_t r = 0; r < s.n; r++)
    for (int64_t gi = 0; gi < s.groups; gi++)
      ASSERT_EQ(s.zero[r * s.groups + gi], c.zero[(r0 + r) * (c.k / c.g) + c0 / c.g + gi]) << r << " " << gi;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(read)";
}

}  // namespace

TEST(GptqSource, PackingOrderByHand) {
  // One word per packed axis: inputs 0..7 of output 0 hold 0..7 (word 0x76543210, input 0 in the
  // low nibble); the v1 zero word 0x00000007 gives output 0 the zero point 8, outputs 1..7 the 1
  // of a stored 0.
  const fs::path d = test::io_temp_dir("gptq_order");
  std::vector<int32_t> qweight(8, 0);  // [1, 8]: inputs 0..7 of outputs 0..7
  qweight[0] = 0x76543210;
  auto ck = write_checkpoint(d, gptq_quant(8),
                             {bytes_of("m.p.qweight", DType::I32, {1, 8}, qweight),
                              bytes_of("m.p.qzeros", DType::I32, {1, 1}, std::vector<int32_t>{0x00000007}),
                              bytes_of("m.p.scales", DType::F16, {1, 8}, std::vector<uint16_t>(8, f32_to_f16(0.5f)))});
  AwqSource s = read_gptq_projection(*ck, "m.p");
  ASSERT_EQ(s.n, 8);
  ASSERT_EQ(s.k, 8);
  for (int c = 0; c < 8; c++) EXPECT_EQ(s.q[c], c) << "input " << c;
  EXPECT_EQ(s.zero[0], 8);
  for (int r = 1; r < 8; r++) EXPECT_EQ(s.zero[r], 1) << "output " << r;
  EXPECT_EQ(s.at(0, 0), -4.0f);  // (0 - 8) · 0.5
  EXPECT_EQ(s.at(0, 7), -0.5f);  // (7 - 8) · 0.5
  EXPECT_EQ(s.at(3, 0), -0.5f);  // (0 - 1) · 0.5
  fs::remove_all(d);
}

TEST(GptqSource, UnpacksWholeTensorsAndAlignedSlices) {
  const fs::path d = test::io_temp_dir("gptq");
  // 136 outputs: two row tiles of 64 and a short one; 4 groups of 64 inputs.
  GptqCase c = make_case(136, 256, 64, 3, 15);
  auto ck = write_checkpoint(d, gptq_quant(64), gptq_tensors("m.p", c, 1));
  expect_slice(read_gptq_projection(*ck, "m.p"), c, 0, 0);
  expect_slice(read_int4_projection(*ck, "m.p"), c, 0, 0);
  struct Slice {
    int64_t r0, r1, c0, c1;
  };
  for (Slice sl : {Slice{8, 72, 0, 256}, Slice{0, 136, 64, 192}, Slice{128, 136, 192, 256}}) {
    AwqSource t = read_gptq_projection(*ck, "m.p", sl.r0, sl.r1, sl.c0, sl.c1);
    EXPECT_EQ(t.n, sl.r1 - sl.r0);
    EXPECT_EQ(t.k, sl.c1 - sl.c0);
    expect_slice(t, c, sl.r0, sl.c0);
  }
  for (Slice sl : {Slice{4, 136, 0, 256}, Slice{0, 20, 0, 256}, Slice{0, 136, 32, 256}}) {
    EXPECT_EQ(error_of([&] { read_gptq_projection(*ck, "m.p", sl.r0, sl.r1, sl.c0, sl.c1); }),
              str_cat("m.p: slice rows [", sl.r0, ", ", sl.r1, ") x columns [", sl.c0, ", ", sl.c1,
                      ") does not align with the GPTQ packing: rows must be multiples of 8 (qzeros packs 8 output "
                      "features per int32) and columns multiples of 8 and of group_size 64"));
  }
  fs::remove_all(d);
}

TEST(GptqSource, V2ZerosAreTakenAsStored) {
  const fs::path d = test::io_temp_dir("gptq_v2");
  GptqCase c = make_case(16, 64, 32, 7, 15);
  for (auto& z : c.zero) z -= 1;  // v2 may hold 0..15
  c.zero[0] = 0;
  c.zero[1] = 15;
  auto ck = write_checkpoint(d, gptq_quant(32, "gptq_v2"), gptq_tensors("m.p", c, 0));
  expect_slice(read_gptq_projection(*ck, "m.p"), c, 0, 0);
  fs::remove_all(d);
}

TEST(GptqSource, RefusesWhatTheInt4FormatCannotHold) {
  const fs::path d = test::io_temp_dir("gptq_refuse");
  GptqCase c = make_case(16, 64, 32, 9, 15);
  auto good = gptq_tensors("a", c, 1);
  // Act-order: inputs 0 and 32 swap groups.
  auto act = gptq_tensors("b", c, 1);
  std::vector<int32_t> g(64);
  for (int i = 0; i < 64; i++) g[i] = i / 32;
  std::swap(g[0], g[32]);
  act[3] = bytes_of("b.g_idx", DType::I32, {64}, g);
  // A v1 stored zero 15 (a zero point 0 wrapped by "zero - 1") decodes to 16.
  GptqCase wrapped = c;
  wrapped.zero[5 * 2 + 1] = 0;  // output 5, group 1: stored (0 - 1) & 15 = 15
  auto wrap = gptq_tensors("c", wrapped, 1);
  auto bad_scales = gptq_tensors("e", c, 1);
  bad_scales[2].shape = {16, 2};  // [out, groups] instead of [groups, out]
  std::vector<Bytes> all;
  for (auto* v : {&good, &act, &wrap, &bad_scales})
    for (auto& t : *v) all.push_back(t);
  all.push_back(bytes_of("f.qweight", DType::I32, {8, 12}, std::vector<int32_t>(96)));  // out 12: not 8n
  auto ck = write_checkpoint(d, gptq_quant(32, "gptq", true), all);
  expect_slice(read_gptq_projection(*ck, "a"), c, 0, 0);  // desc_act true with a sequential g_idx loads
  EXPECT_EQ(error_of([&] { read_gptq_projection(*ck, "b"); }),
            d.string() + ": tensor 'b.g_idx' gives input 0 group 1, not 0 = input / group_size: act-order GPTQ "
                         "(quantization_config.desc_act true) is not supported; only g_idx[k] = k / group_size");
  EXPECT_EQ(error_of([&] { read_gptq_projection(*ck, "c"); }),
            d.string() + ": tensor 'c.qzeros' group 1 output 5: stored zero point 15 is 16 under the v1 convention "
                         "(checkpoint_format \"gptq\": stored = zero - 1), which does not fit 4 bits (the tools' wrap "
                         "of a zero point 0); re-export it as checkpoint_format \"gptq_v2\"");
  EXPECT_EQ(error_of([&] { read_gptq_projection(*ck, "e"); }),
            d.string() + ": tensor 'e.scales' is F16 [16, 2], expected F16 or BF16 [2, 16]");
  EXPECT_EQ(error_of([&] { read_gptq_projection(*ck, "f"); }),
            d.string() + ": tensor 'f.qweight' [8, 12] holds W [12, 64]: in must be a multiple of the GPTQ group_size "
                         "32 and out a multiple of 8 (qzeros packs 8 per int32)");
  fs::remove_all(d);
}
