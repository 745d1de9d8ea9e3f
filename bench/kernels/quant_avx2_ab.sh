#!/bin/bash
# The AVX2 int8- and int4-weight linears of two revisions in one process (bench/kernels/
# quant_avx2_ab/): with int16 activations (the --matmul-precision high path of quantized weights on
# CPUs without a bf16 dot product, src/kernels/cpu/linear_quant_i16_avx2.cpp) or int8 activations
# (medium, src/kernels/cpu/linear_quant_avx2.cpp). Side A is REV's two files, side B the working
# tree's; each case alternates 50 ms slices of A and B for 30 rounds and prints the median ratio
# B / A with its quartiles, as panel_ab.sh does for the bf16 / f16 panels. AVX2 build; the threads
# are OpenMP's (OMP_NUM_THREADS, default 2).
#   bench/kernels/quant_avx2_ab.sh REV [ 'N K M [int8|int4] [int16|int8]' ... ]
# Default cases: Qwen3-14B's qkv (7,168 × 5,120) and lm_head (151,936 × 5,120) at m = 1, 2, 4, 5, 8
# (decode, batched decode, speculative verify), its down (5,120 × 17,408) at m = 5 and prefill
# rows (m = 64).
set -euo pipefail
REV=${1:?usage: quant_avx2_ab.sh REV [cases]}
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
FLAGS="-O3 -DNDEBUG -std=c++20 -mavx2 -mfma -mf16c -fno-trapping-math -ffp-contract=off -fopenmp -I$ROOT/src"
echo "building side A ($REV) and side B (working tree)" >&2
# Each side's namespaces and table fillers renamed, so both link into one binary.
for kind in i16 i8; do
  if [ $kind = i16 ]; then file=linear_quant_i16_avx2.cpp ns=avx2_i16 fill=fill_linear_quant_i16_avx2
  else file=linear_quant_avx2.cpp ns=avx2_quant fill=fill_linear_quant_avx2; fi
  git -C "$ROOT" show "$REV:src/kernels/cpu/$file" > "$OUT/a_$kind.cpp"
  cp "$ROOT/src/kernels/cpu/$file" "$OUT/b_$kind.cpp"
  for side in a b; do
    g++ $FLAGS -D$ns=quant_${kind}_side_${side}_ns -D$fill=fill_quant_${kind}_side_$side \
      -c "$OUT/${side}_$kind.cpp" -o "$OUT/${side}_$kind.o"
  done
done
g++ $FLAGS "$ROOT/bench/kernels/quant_avx2_ab/quant_avx2_ab_main.cpp" "$OUT"/*.o -o "$OUT/quant_avx2_ab"
if [ $# -eq 0 ]; then
  set -- "7168 5120 1" "7168 5120 2" "7168 5120 4" "7168 5120 5" "7168 5120 8" "151936 5120 5" \
    "5120 17408 5" "7168 5120 64"
fi
for c in "$@"; do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=true "$OUT/quant_avx2_ab" $c
done
