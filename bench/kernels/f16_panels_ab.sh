#!/bin/bash
# Two builds of bench_kernels side by side on the f16-weight linears (BM_LinearF16: the lm_head of
# Qwen's GPTQ / AWQ checkpoints, f32 x), alternating rounds: e.g. a build before and after a change
# of the f16 kernels. Prints, per benchmark, the median GMAC/s of each side, the median of the
# per-round ratios B / A (and their range), and % of the read bound (m = 1) or of the f32-FMA
# peak (m = 4, 16) that each run measured itself.
#   bench/kernels/f16_panels_ab.sh BENCH_A BENCH_B [ROUNDS=3] [THREADS=2] [FILTER]
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-3}; THREADS=${4:-2}
FILTER=${5:-'BM_LinearF16/[01]/(1|4|16)/0/'}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    bin=$A; [ "$side" = B ] && bin=$B
    echo "round $r/$ROUNDS: $side ($bin)" >&2
    PYPTO_BENCH_THREADS=$THREADS "$bin" --benchmark_filter="$FILTER" --benchmark_format=json \
      > "$OUT/$side.$r.json" 2> /dev/null
  done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {}
for side in "AB":
    for r in range(1, rounds + 1):
        for b in json.load(open(f"{out}/{side}.{r}.json"))["benchmarks"]:
            runs.setdefault(b["name"].split("/min_time")[0], {}).setdefault(side, []).append(b)
print(f"{'benchmark':26s} {'A GMAC/s':>9s} {'B GMAC/s':>9s} {'B/A median (range)':>20s}  % of bound A -> B")
for name, s in runs.items():
    ga = [b["GMAC/s"] for b in s["A"]]; gb = [b["GMAC/s"] for b in s["B"]]
    ratios = [y / x for x, y in zip(ga, gb)]
    key = "pct_bw" if "pct_bw" in s["A"][0] else "pct_fma_peak"
    pa = st.median(b[key] for b in s["A"]); pb = st.median(b[key] for b in s["B"])
    print(f"{name:26s} {st.median(ga):9.2f} {st.median(gb):9.2f} {st.median(ratios):8.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
          f"  {key} {pa:5.1f} -> {pb:5.1f}")
PY
