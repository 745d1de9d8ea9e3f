#!/usr/bin/env bash
# The AMX matrix product at prefill shapes (512 rows; qwen3-0.6b's gate_up and down) against
# oneDNN's matmul (benchdnn, bf16 x bf16 -> f32, weights in oneDNN's own packed layout), in
# alternating rounds on this machine, with the AMX tile peak measured in the same run.
#
#   bench/peers/gemm_side_by_side.sh BENCHDNN [ROUNDS=3] [THREADS=2]
#
# BENCHDNN is oneDNN's tests/benchdnn/benchdnn built beside the project (never inside it), e.g.
# cmake -DDNNL_CPU_RUNTIME=OMP -DONEDNN_BUILD_GRAPH=OFF -DDNNL_ENABLE_PRIMITIVE="MATMUL;REORDER".
# Ours is bench_kernels' BM_GemmPath at `medium` (x rounded to one bf16, the same products as
# oneDNN's bf16 inputs; ours also converts x from f32 inside the timed call) and at `high` (x as
# hi + lo: two tile products per multiply-add). Each side's figure is its best repetition
# (oneDNN: the fastest run; ours: the fastest of 3), the rounds' median of those.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 BENCHDNN [ROUNDS=3] [THREADS=2]" >&2
  exit 2
fi
benchdnn="$1" rounds="${2:-3}" threads="${3:-2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bk="$here/build/bench/kernels/bench_kernels"
[ -x "$benchdnn" ] || { echo "$0: BENCHDNN '$benchdnn' is not an executable (oneDNN's tests/benchdnn/benchdnn)" >&2; exit 2; }
[ -x "$bk" ] || { echo "$0: $bk is missing: build the project first (bash scripts/build.sh)" >&2; exit 2; }
shapes=("gate_up 1 512x1024:1024x6144" "down 2 512x3072:3072x1024")
declare -A ours_med ours_high peer
peaks=()
for r in $(seq "$rounds"); do
  for s in "${shapes[@]}"; do
    read -r name idx prb <<<"$s"
    echo "[gemm side-by-side] round $r/$rounds: oneDNN $name" >&2
    line=$(OMP_NUM_THREADS="$threads" OMP_PROC_BIND=close "$benchdnn" --matmul --mode=P --dt=bf16:bf16:f32 \
      --stag=ab --wtag=any --dtag=ab "$prb" | grep '^perf,')
    # perf template: ...,%Gops%,%+ctime%,%-time%,%-Gflops%,... : the fastest run's GFLOP/s.
    peer[$name]+="$(echo "$line" | awk -F, '{printf "%.0f", $9}') "
  done
  echo "[gemm side-by-side] round $r/$rounds: bench_kernels" >&2
  out=$(PYPTO_BENCH_THREADS="$threads" "$bk" --benchmark_filter='BM_PeakAmxBf16|BM_GemmPath/[12]/512/[34]' 2>/dev/null)
  peaks+=("$(echo "$out" | awk '/^BM_PeakAmxBf16/ {for (i = 1; i <= NF; ++i) if ($i ~ /^GFLOP\/s_wall=/) {sub(/GFLOP\/s_wall=/, "", $i); print $i}}')")
  for s in "${shapes[@]}"; do
    read -r name idx prb <<<"$s"
    get() { echo "$out" | awk -v p="BM_GemmPath/$idx/512/$1/repeats:3/real_time_max" '$1 == p {for (i = 1; i <= NF; ++i) if ($i ~ /^GFLOP\/s=/) {sub(/GFLOP\/s=/, "", $i); print $i}}'; }
    ours_med[$name]+="$(get 4) "
    ours_high[$name]+="$(get 3) "
  done
done
# bench_kernels prints rates like 2.26137k/s: to plain numbers.
num() { sed -e 's#/s##' | awk '{v = $1; if (v ~ /k$/) {sub(/k$/, "", v); v *= 1000} printf "%.0f\n", v}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# shellcheck disable=SC2046
peak=$(median $(printf '%s\n' "${peaks[@]}" | num))
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads, $rounds rounds; AMX TDPBF16PS peak $peak GFLOP/s (runs: $(printf '%s\n' "${peaks[@]}" | num | tr '\n' ' '))"
for s in "${shapes[@]}"; do
  read -r name idx prb <<<"$s"
  # shellcheck disable=SC2086
  m=$(median $(printf '%s\n' ${ours_med[$name]} | num)) h=$(median $(printf '%s\n' ${ours_high[$name]} | num))
  # shellcheck disable=SC2086
  p=$(median ${peer[$name]})
  pct() { awk -v a="$1" -v b="$peak" 'BEGIN {printf "%.1f %%", 100 * a / b}'; }
  echo "$name m=512 GFLOP/s: pypto medium $m ($(pct "$m") of peak), oneDNN bf16 $p ($(pct "$p")), ratio $(awk -v a="$m" -v b="$p" 'BEGIN {printf "%.2f", a / b}'); pypto high $h (two products: $(pct "$((2 * h))") of the tile peak)"
  echo "  runs: medium ${ours_med[$name]}| high ${ours_high[$name]}| oneDNN ${peer[$name]}"
done
