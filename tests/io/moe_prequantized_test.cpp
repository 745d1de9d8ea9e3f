// Pre-quantized Qwen3-MoE checkpoints (make-test-model --preset tiny-moe --quant-format fp8 |
// gptq | awq): the experts are staged in the checkpoint's format with exactly its values, the
// router stays a float .weight, a missing expert tensor or a quantized router is named, and asking
// to quantize them again is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint_test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/quantized_source.h"
#include "model/test_model.h"
#include "model/weight_staging.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

fs::path make_moe(const std::string& name, QuantMethod m) {
  TestModelOptions opt{.preset = "tiny-moe"};
  opt.quant = m;
  opt.dtype = m == QuantMethod::Fp8 ? DType::BF16 : DType::F16;
  return test::make_model_in_temp("moeq_" + name, opt);
}

std::string read_binary(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(MoePrequantized, ExpertsStagedInTheCheckpointFormatRouterFloat) {
  auto backend = make_reference_backend();
  for (QuantMethod m : {QuantMethod::Fp8, QuantMethod::Gptq, QuantMethod::Awq}) {
    SCOPED_TRACE(quant_method_name(m));
    const fs::path d = make_moe(quant_method_name(m), m);
    auto ck = Checkpoint::open(d.string());
    EXPECT_EQ(test::open_error(d), "");
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.show_progress = false});
    const WeightFormat f = m == QuantMethod::Fp8 ? WeightFormat::Fp8 : WeightFormat::Int4;
    ASSERT_EQ(w.layers.size(), 3u);
    for (int i : {0, 2}) {
      const Qwen3LayerWeights& L = w.layers[size_t(i)];
      ASSERT_TRUE(L.sparse);
      EXPECT_EQ(L.router.format, WeightFormat::Float);
      EXPECT_EQ(L.router.dtype, m == QuantMethod::Fp8 ? DType::BF16 : DType::F16);
      ASSERT_EQ(L.experts.size(), 8u);
      for (const auto& x : L.experts) {
        EXPECT_EQ(x.gate_up.format, f);
        EXPECT_EQ(x.down.format, f);
        EXPECT_EQ(x.gate_up.n_out, 2 * 128);
        EXPECT_EQ(x.down.k_in, 128);
      }
    }
    EXPECT_EQ(w.layers[1].gate_up.format, f);  // the dense layer (mlp_only_layers)
    // The staged expert dequantizes to exactly the checkpoint's values (the decoders are held to
    // the formats' definitions in quantized_source_test / gptq_source_test): gate rows, then up.
    const Qwen3ExpertWeights& x = w.layers[2].experts[5];
    std::vector<float> row(64);
    for (int32_t r = 0; r < 256; r++) {
      backend->weight_rows(&r, 1, x.gate_up, row.data());
      const std::string proj = std::string("model.layers.2.mlp.experts.5.") + (r < 128 ? "gate_proj" : "up_proj");
      for (int64_t c = 0; c < 64; c++) {
        const float want = m == QuantMethod::Fp8 ? read_fp8_projection(*ck, proj).at(r % 128, c)
                                                 : read_int4_projection(*ck, proj).at(r % 128, c);
        ASSERT_EQ(row[size_t(c)], want) << proj << " [" << r % 128 << ", " << c << "]";
      }
    }
    EXPECT_THROW(stage_qwen3_weights(*ck, *backend, {.show_progress = false, .quantization = WeightFormat::Int8}),
                 Error);
    fs::remove_all(d);
  }
}

TEST(MoePrequantized, MissingExpertAndQuantizedRouterAreNamed) {
  const fs::path d = make_moe("missing", QuantMethod::Gptq);
  // Rename layer 2's expert 3 down_proj.scales and layer 0's router weight to a GPTQ qweight in
  // the safetensors header (data offsets are relative to the data, so the header may change
  // length): the loader names both.
  const fs::path st = d / "model.safetensors";
  std::string bytes = read_binary(st);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  auto rename = [&](const std::string& from, const std::string& to) {
    ASSERT_TRUE(header.contains(from)) << from;
    header[to] = header[from];
    header.erase(from);
  };
  rename("model.layers.2.mlp.experts.3.down_proj.scales", "model.layers.2.mlp.experts.3.down_proj.scalez");
  rename("model.layers.0.mlp.gate.weight", "model.layers.0.mlp.gate.qweight");
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // keep the data 8-byte aligned
  const uint64_t len = text.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  out += text + bytes.substr(8 + n);
  std::ofstream(st, std::ios::binary) << out;
  const std::string e = test::open_error(d);
  EXPECT_NE(e.find("model.layers.2.mlp.experts.3.down_proj.scales: missing (expected F16 or BF16 [2, 64])"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("model.layers.0.mlp.gate.weight: a quantized router is not supported (Qwen's gptq checkpoints "
                   "keep it F16)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("model.layers.0.mlp.gate.weight: missing (expected F16 [8, 64])"), std::string::npos) << e;
  fs::remove_all(d);
}
