// The compile cache on the Qwen3.5 / Qwen3.6 / Qwen3-Next hybrids: a cold start stores the slab, a
// warm start reads it back and binds every weight to the bytes a plain staging produces (GDN,
// gated attention, routed and shared experts, the MTP head; float, int8, int4); a different
// option has another key; a corrupt entry is refused and staged again.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint_test_util.h"
#include "kernels/backend.h"
#include "model/compile_cache.h"

namespace pypto::test {
namespace {

namespace fs = std::filesystem;

// Compares two stagings weight by weight: shapes, formats and the staged bytes of each.
struct SameWeights {
  const Backend& be;
  const ModelConfig& c;
  std::vector<std::string> diffs;

  void linear(const std::string& what, const LinearWeight& a, const LinearWeight& b) {
    if (a.n_out != b.n_out || a.k_in != b.k_in || a.format != b.format || a.group != b.group || a.dtype != b.dtype) {
      diffs.push_back(what + ": shape or format");
      return;
    }
    if (a.n_out == 0) return;
    const size_t n = a.format == WeightFormat::Float ? be.packed_weight_bytes(a.dtype, a.n_out, a.k_in)
                                                     : be.packed_quantized_bytes(a.format, a.n_out, a.k_in, a.group);
    if (std::memcmp(a.data, b.data, n) != 0) diffs.push_back(what + ": bytes");
  }
  void vec(const std::string& what, const float* a, const float* b, int64_t n) {
    if ((a == nullptr) != (b == nullptr)) diffs.push_back(what + ": present in one only");
    else if (a && std::memcmp(a, b, size_t(n) * sizeof(float)) != 0) diffs.push_back(what + ": values");
  }
  void layer(const std::string& p, const Qwen3LayerWeights& a, const Qwen3LayerWeights& b, int tp) {
    vec(p + "input_norm", a.input_norm, b.input_norm, c.hidden_size);
    vec(p + "post_norm", a.post_norm, b.post_norm, c.hidden_size);
    linear(p + "qkv", a.qkv, b.qkv);
    linear(p + "o_proj", a.o_proj, b.o_proj);
    vec(p + "q_norm", a.q_norm, b.q_norm, c.head_dim);
    vec(p + "k_norm", a.k_norm, b.k_norm, c.head_dim);
    linear(p + "gdn.in_proj", a.gdn.in_proj, b.gdn.in_proj);
    linear(p + "gdn.in_proj_ba", a.gdn.in_proj_ba, b.gdn.in_proj_ba);
    linear(p + "gdn.out_proj", a.gdn.out_proj, b.gdn.out_proj);
    vec(p + "gdn.conv", a.gdn.conv, b.gdn.conv, c.gdn_conv_dim() / tp * c.linear_conv_kernel_dim);
    vec(p + "gdn.dt_bias", a.gdn.dt_bias, b.gdn.dt_bias, c.linear_num_value_heads / tp);
    vec(p + "gdn.neg_exp_a", a.gdn.neg_exp_a, b.gdn.neg_exp_a, c.linear_num_value_heads / tp);
    vec(p + "gdn.norm", a.gdn.norm, b.gdn.norm, c.linear_value_head_dim);
    linear(p + "gate_up", a.gate_up, b.gate_up);
    linear(p + "down", a.down, b.down);
    linear(p + "router", a.router, b.router);
    if (a.experts.size() != b.experts.size()) diffs.push_back(p + "experts: count");
    for (size_t e = 0; e < std::min(a.experts.size(), b.experts.size()); ++e) {
      linear(p + "expert gate_up " + std::to_string(e), a.experts[e].gate_up, b.experts[e].gate_up);
      linear(p + "expert down " + std::to_string(e), a.experts[e].down, b.experts[e].down);
    }
    linear(p + "shared gate_up", a.shared_expert.gate_up, b.shared_expert.gate_up);
    linear(p + "shared down", a.shared_expert.down, b.shared_expert.down);
    linear(p + "shared gate", a.shared_expert.gate, b.shared_expert.gate);
  }
  void all(const Qwen3Weights& a, const Qwen3Weights& b) {
    if (a.layers.size() != b.layers.size()) diffs.push_back("layer count");
    for (size_t i = 0; i < std::min(a.layers.size(), b.layers.size()); ++i)
      layer("layer " + std::to_string(i) + " ", a.layers[i], b.layers[i], a.tp_size);
    linear("lm_head", a.lm_head, b.lm_head);
    linear("embed_rows", a.embed_rows, b.embed_rows);
    vec("final_norm", a.final_norm, b.final_norm, c.hidden_size);
    if ((a.embed == nullptr) != (b.embed == nullptr) || a.embed_in_lm_head != b.embed_in_lm_head) diffs.push_back("embed");
    else if (a.embed && !a.embed_in_lm_head && a.embed_rows.n_out == 0 &&
             std::memcmp(a.embed, b.embed, size_t(a.vocab_rows * c.hidden_size) * dtype_size(a.embed_dtype)) != 0)
      diffs.push_back("embed: bytes");
    if (a.mtp.present != b.mtp.present) diffs.push_back("mtp: present");
    if (a.mtp.present) {
      vec("mtp norm_embed", a.mtp.norm_embed, b.mtp.norm_embed, c.hidden_size);
      vec("mtp norm_hidden", a.mtp.norm_hidden, b.mtp.norm_hidden, c.hidden_size);
      vec("mtp norm", a.mtp.norm, b.mtp.norm, c.hidden_size);
      linear("mtp fc", a.mtp.fc, b.mtp.fc);
      linear("mtp kv", a.mtp.kv, b.mtp.kv);
      layer("mtp layer ", a.mtp.layer, b.mtp.layer, a.tp_size);
    }
    if (a.resident_bytes != b.resident_bytes) diffs.push_back("resident_bytes");
  }
};

struct HybridCache {
  fs::path model;
  fs::path cache;
  std::unique_ptr<Backend> be = make_cpu_backend(1);

  HybridCache(const std::string& preset, const std::string& name) {
    TestModelOptions o;
    o.preset = preset;
    model = make_model_in_temp("hcc_" + name, o);
    cache = model / "compile-cache";  // removed with the model directory
    fs::remove_all(cache);
  }
  Qwen3Weights stage(StagingOptions so, bool cached) {
    auto ck = Checkpoint::open(model.string());
    so.show_progress = false;
    if (cached) so.compile_cache_dir = cache.string();
    return stage_qwen3_weights(*ck, *be, so);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> v;
    if (fs::exists(cache))
      for (const auto& e : fs::directory_iterator(cache)) v.push_back(e.path());
    return v;
  }
  // A cold start stores one entry and a warm start reads it back, every weight as plain staging.
  void check_round_trip(const StagingOptions& so, const std::string& what) {
    SCOPED_TRACE(what);
    const size_t before = entries().size();
    const Qwen3Weights plain = stage(so, false);
    const Qwen3Weights cold = stage(so, true);
    EXPECT_FALSE(cold.from_compile_cache) << "a new option must not find another option's entry";
    EXPECT_EQ(entries().size(), before + 1);
    const Qwen3Weights warm = stage(so, true);
    EXPECT_TRUE(warm.from_compile_cache);
    auto ck = Checkpoint::open(model.string());
    for (const Qwen3Weights* w : {&cold, &warm}) {
      SameWeights cmp{*be, ck->config(), {}};
      cmp.all(plain, *w);
      EXPECT_TRUE(cmp.diffs.empty()) << (w == &cold ? "cold: " : "warm: ") << cmp.diffs.size() << " differences, first "
                                     << (cmp.diffs.empty() ? "" : cmp.diffs[0]);
    }
  }
};

TEST(HybridCompileCache, DenseHybridEveryFormatAndOptionHasItsOwnEntry) {
  HybridCache h("tiny-hybrid", "dense");
  StagingOptions so;
  h.check_round_trip(so, "float");
  so.quantization = WeightFormat::Int8;
  h.check_round_trip(so, "int8");
  so.quantization = WeightFormat::Int4;
  so.int4_group = 32;
  h.check_round_trip(so, "int4 g32");
  so.int4_group = 64;
  h.check_round_trip(so, "int4 g64");
  so.mtp = true;
  h.check_round_trip(so, "int4 g64 with the MTP head");
  so.tp_size = 2;
  so.tp_rank = 1;
  h.check_round_trip(so, "--tp 2 rank 1");
  so = {};
  so.layer_begin = 2;
  h.check_round_trip(so, "--pp: layers [2, 4)");
}

TEST(HybridCompileCache, MoeHybridsFusedAndPerExpert) {
  for (const char* preset : {"tiny-hybrid-moe", "tiny-next"}) {
    HybridCache h(preset, std::string("moe_") + preset);
    StagingOptions so;
    so.mtp = true;
    h.check_round_trip(so, std::string(preset) + " float with MTP");
    so.quantization = WeightFormat::Int4;
    h.check_round_trip(so, std::string(preset) + " int4 with MTP");
    so.mtp = false;
    so.quantization = WeightFormat::Int8;  // the shared expert's 24 columns per rank are no whole int4 group
    so.tp_size = 2;
    so.tp_rank = 0;
    so.expert_parallel = true;
    h.check_round_trip(so, std::string(preset) + " int8, --tp 2 rank 0 expert parallel");
  }
}

TEST(HybridCompileCache, CorruptAndTruncatedEntriesAreStagedAgain) {
  HybridCache h("tiny-hybrid-moe", "corrupt");
  StagingOptions so;
  so.quantization = WeightFormat::Int8;
  const Qwen3Weights plain = h.stage(so, false);
  h.stage(so, true);
  ASSERT_EQ(h.entries().size(), 1u);
  const fs::path entry = h.entries()[0];
  {  // one byte of the data area flipped
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(4096 + 3000);
    char b = 0;
    f.read(&b, 1);
    b = char(b ^ 0x5a);
    f.seekp(4096 + 3000);
    f.write(&b, 1);
  }
  auto ck = Checkpoint::open(h.model.string());
  auto same = [&](const Qwen3Weights& w) {
    SameWeights cmp{*h.be, ck->config(), {}};
    cmp.all(plain, w);
    return cmp.diffs.empty();
  };
  const Qwen3Weights after_flip = h.stage(so, true);
  EXPECT_FALSE(after_flip.from_compile_cache) << "a corrupt entry is never used";
  EXPECT_TRUE(same(after_flip));
  EXPECT_TRUE(h.stage(so, true).from_compile_cache) << "and it was stored again";
  fs::resize_file(entry, fs::file_size(entry) / 2);
  const Qwen3Weights after_cut = h.stage(so, true);
  EXPECT_FALSE(after_cut.from_compile_cache) << "a truncated entry is never used";
  EXPECT_TRUE(same(after_cut));
  const Qwen3Weights warm = h.stage(so, true);
  EXPECT_TRUE(warm.from_compile_cache);
  EXPECT_TRUE(same(warm));
}

}  // namespace
}  // namespace pypto::test
