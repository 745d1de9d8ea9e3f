// Assembles the per-ISA kernel tables from the <op>_<isa>.cpp files. ISA-neutral code: the fill
// functions are compiled with vector flags, so a table is only built for an ISA this CPU has.
#include "kernels/cpu/kernel_table.h"

#include "core/error.h"

namespace pypto::cpu {

void fill_linear_avx512(KernelTable& t);
void fill_elementwise_avx512(KernelTable& t);
void fill_attention_avx512(KernelTable& t);
void fill_linear_amx(KernelTable& t);
void fill_linear_dequant_avx512(KernelTable& t);
void fill_linear_quant_vnni(KernelTable& t);
void fill_linear_quant_bf16_avx512(KernelTable& t);
void fill_linear_quant_bf16_vbmi(KernelTable& t);
void fill_linear_avx2(KernelTable& t);
void fill_elementwise_avx2(KernelTable& t);
void fill_attention_avx2(KernelTable& t);
void fill_linear_dequant_avx2(KernelTable& t);
void fill_linear_quant_avx2(KernelTable& t);
void fill_linear_quant_i16_avx2(KernelTable& t);

namespace {
bool cpu_has(Isa isa) {
  const CpuFeatures& f = cpu_features();
  bool avx2 = f.avx2 && f.fma && f.f16c;
  if (isa == Isa::Avx2) return avx2;
  return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16;
}
}  // namespace

const KernelTable& kernel_table_avx512() {
  PYPTO_ASSERT(cpu_has(Isa::Avx512), "AVX-512 kernels requested on a CPU without AVX-512 BF16");
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = Isa::Avx512;
    t.name = "cpu-avx512";
    fill_linear_avx512(t);
    fill_elementwise_avx512(t);
    fill_attention_avx512(t);
    fill_linear_amx(t);
    fill_linear_dequant_avx512(t);
    fill_linear_quant_bf16_avx512(t);
    if (cpu_features().avx512_vbmi) fill_linear_quant_bf16_vbmi(t);
    if (cpu_features().avx512_vnni) fill_linear_quant_vnni(t);
    return t;
  }();
  return table;
}

const KernelTable& kernel_table_avx2() {
  PYPTO_ASSERT(cpu_has(Isa::Avx2), "AVX2 kernels requested on a CPU without AVX2/FMA/F16C");
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = Isa::Avx2;
    t.name = "cpu-avx2";
    fill_linear_avx2(t);
    fill_elementwise_avx2(t);
    fill_attention_avx2(t);
    fill_linear_dequant_avx2(t);
    fill_linear_quant_avx2(t);      // int8-activation quantized linears (medium)
    fill_linear_quant_i16_avx2(t);  // int16-activation quantized linears (high: no bf16 dot product)
    return t;
  }();
  return table;
}

const KernelTable* kernel_table(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return &kernel_table_avx512();
    case Isa::Avx2: return &kernel_table_avx2();
    default: return nullptr;
  }
}

}  // namespace pypto::cpu
