// linear on AMX-BF16 tiles (linear_amx_impl.h) and the AMX-INT8 core (linear_amx_int8_impl.h), compiled with the AVX-512 and AMX flags. Fills
// the AVX-512 table's optional AMX slot only where the OS granted the tile state (amx_usable()).
#include "kernels/cpu/linear_amx_impl.h"
#include "kernels/cpu/linear_amx_int8_impl.h"

#include "core/cpu_features.h"

namespace pypto::cpu {
void fill_linear_amx(KernelTable& t) {
  if (!amx_usable()) return;
  t.linear_cols_amx = amx::linear_cols_amx;
  t.linear_cols_amx_int8 = amx::linear_cols_amx_int8;
}
}  // namespace pypto::cpu
