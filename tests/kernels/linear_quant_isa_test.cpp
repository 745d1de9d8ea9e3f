// The int8-activation quantized kernels of every vector table this CPU builds (AVX2:
// linear_quant_avx2.cpp; AVX-512 VNNI: linear_quant_vnni.cpp) called directly on the same packed
// weights: the activations each table's quantize_row_int8 makes are the same bytes, scales and group
// sums, and the outputs are the same bits (the integer sums are exact and the f32 epilogues the same
// operations in the same order), whole or in column chunks (the backend's chunks are multiples of
// 128 columns). On an AVX2-only CPU only the chunking is compared.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace pypto::test {
namespace {

std::vector<const cpu::KernelTable*> int8_tables() {
  std::vector<const cpu::KernelTable*> v;
  if (cpu_isa() >= Isa::Avx2 && cpu::kernel_table_avx2().linear_cols_q8) v.push_back(&cpu::kernel_table_avx2());
  if (cpu_isa() >= Isa::Avx512 && cpu::kernel_table_avx512().linear_cols_q8) v.push_back(&cpu::kernel_table_avx512());
  return v;
}

// y [m, n] of one table: x quantized by that table, then its kernel over [0, n) or over the column
// chunks [0, 128), [128, 256), ...
struct Out {
  std::vector<uint8_t> xq;
  std::vector<float> xscale;
  std::vector<int32_t> xsum;
  std::vector<float> y;
};
Out run(const cpu::KernelTable& kt, const RandomQuant& rq, const uint8_t* packed, const std::vector<float>& x,
        const std::vector<float>& bias, int64_t m, bool chunked) {
  const QuantizedWeight& w = rq.w;
  const cpu::QuantPanels l = cpu::quant_panels(w.format, w.n_out, w.k_in, w.group);
  const bool int4 = w.format == WeightFormat::Int4;
  const int64_t ldq = cpu::quant_act_stride(w.k_in, int4 ? w.group : 0);
  Out o;
  o.xq.assign(size_t(m * ldq), 0xCD);
  o.xscale.resize(size_t(m));
  o.xsum.assign(size_t(m * l.groups), 0);
  for (int64_t i = 0; i < m; ++i)
    o.xscale[size_t(i)] = int8_row_scale(kt.quantize_row_int8(x.data() + i * w.k_in, w.k_in, ldq, !int4, int4 ? w.group : 0,
                                                              o.xq.data() + i * ldq, o.xsum.data() + i * l.groups));
  o.y.assign(size_t(m * w.n_out), NAN);
  cpu::QuantLinearTask t;
  t.format = w.format;
  t.m = m;
  t.k = w.k_in;
  t.n_out = w.n_out;
  t.group = w.group;
  t.groups = l.groups;
  t.w = packed;
  t.scale = reinterpret_cast<const float*>(packed + l.scale_offset);
  t.aux = packed + l.aux_offset;
  t.xq = o.xq.data();
  t.ldq = ldq;
  t.xscale = o.xscale.data();
  t.xsum = o.xsum.data();
  t.bias = bias.data();
  t.y = o.y.data();
  const auto fn = int4 ? kt.linear_cols_q4 : kt.linear_cols_q8;
  if (!chunked) fn(t, 0, w.n_out);
  else
    for (int64_t c = 0; c < w.n_out; c += 128) fn(t, c, std::min<int64_t>(c + 128, w.n_out));
  return o;
}

TEST(LinearQuantIsa, Int8ActivationKernelsAgreeBitForBit) {
  const std::vector<const cpu::KernelTable*> tables = int8_tables();
  if (tables.empty()) GTEST_SKIP() << "no int8-activation kernels on this CPU";
  for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 32},
                      {WeightFormat::Int4, 128}, {WeightFormat::Int4, 24}})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{300, 200}, {150, 1024}, {17, 136}}) {
      const int64_t kk = f == WeightFormat::Int8 ? k + 3 : k;  // Int8: k off the quad
      RandomQuant rq = random_quant(f, n, kk, g, uint32_t(n * 13 + kk));
      const cpu::QuantPanels l = cpu::quant_panels(f, n, kk, rq.w.group);
      AlignedBuffer packed(l.total_bytes);
      cpu::pack_quant_panels(rq.w, packed.data(), 0, n);
      std::vector<float> x = random_f32(size_t(17 * kk), uint32_t(kk), -2.0f, 2.0f);
      std::vector<float> bias = random_f32(size_t(n), 9u);
      for (int64_t m : {1, 2, 3, 5, 8, 9, 17}) {
        SCOPED_TRACE(testing::Message() << weight_format_name(f) << " g" << g << " n" << n << " k" << kk << " m" << m);
        const Out first = run(*tables[0], rq, packed.data(), x, bias, m, false);
        for (const cpu::KernelTable* kt : tables)
          for (bool chunked : {false, true}) {
            SCOPED_TRACE(testing::Message() << kt->name << (chunked ? " chunked" : ""));
            const Out o = run(*kt, rq, packed.data(), x, bias, m, chunked);
            ASSERT_EQ(o.xq, first.xq);
            ASSERT_EQ(0, std::memcmp(o.xscale.data(), first.xscale.data(), o.xscale.size() * sizeof(float)));
            ASSERT_EQ(o.xsum, first.xsum);
            ASSERT_EQ(0, std::memcmp(o.y.data(), first.y.data(), o.y.size() * sizeof(float)));
          }
      }
    }
  if (tables.size() < 2) std::printf("[ note     ] one int8-activation table here (%s): column chunks compared only\n", tables[0]->name);
}

}  // namespace
}  // namespace pypto::test
