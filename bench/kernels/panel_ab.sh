#!/bin/bash
# The column-panel linears of two revisions in one process (bench/kernels/panel_ab/): side A is
# REV's headers (panel_columns.h, linear_bf16_panels_f32_impl.h, linear_f16_panels_impl.h), side
# B the working tree's; each case alternates 50 ms slices of A and B for 30 rounds and prints the
# median ratio B / A with its quartiles. On a shared host whose speed moves within seconds this
# separates changes of 10 % that two processes run one after the other cannot. AVX2 build; the
# threads are OpenMP's (OMP_NUM_THREADS, default 2). Same-code A/A runs gave 0.96-1.01x on the
# lm_head shapes, but 0.93x at m = 4 on weights that stay in L2 / L3 (n = 256 and 2,048, k = 1,024):
# for such shapes compare against an A/A run (REV = HEAD with a clean tree).
#   bench/kernels/panel_ab.sh REV [ 'N K M [bf16|f16]' ... ]
# Default cases: Qwen3-0.6B's lm_head (151,936 × 1,024) and the 30B-A3B's (× 2,048) at m = 2, 3,
# 4, 5, 8, 16 (bf16), the 0.6B's gate_up (6,144 × 1,024) at m = 4, and the f16 lm_head at m = 4, 16.
set -euo pipefail
REV=${1:?usage: panel_ab.sh REV [cases]}
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/a/kernels/cpu"
for f in panel_columns.h linear_bf16_panels_f32_impl.h linear_f16_panels_impl.h; do
  git -C "$ROOT" show "$REV:src/kernels/cpu/$f" > "$OUT/a/kernels/cpu/$f"
done
FLAGS="-O3 -DNDEBUG -std=c++20 -mavx2 -mfma -mf16c -fno-trapping-math -ffp-contract=off -fopenmp"
SRC=$ROOT/bench/kernels/panel_ab
echo "building side A ($REV) and side B (working tree)" >&2
# Side A finds the revision's three headers first (quoted includes fall back to -I in order).
g++ $FLAGS -DPANEL_AB_NS=side_a -I"$OUT/a" -I"$ROOT/src" -c "$SRC/panel_ab_side.cpp" -o "$OUT/a.o"
g++ $FLAGS -DPANEL_AB_NS=side_b -I"$ROOT/src" -c "$SRC/panel_ab_side.cpp" -o "$OUT/b.o"
g++ $FLAGS -I"$ROOT/src" "$SRC/panel_ab_main.cpp" "$OUT/a.o" "$OUT/b.o" -o "$OUT/panel_ab"
if [ $# -eq 0 ]; then
  set -- "151936 1024 2" "151936 1024 3" "151936 1024 4" "151936 1024 5" "151936 1024 8" "151936 1024 16" \
    "151936 2048 4" \
    "151936 2048 16" "6144 1024 4" "151936 1024 4 f16" "151936 1024 16 f16"
fi
for c in "$@"; do
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=true "$OUT/panel_ab" $c
done
