#!/bin/bash
# Quantized decode at `high` (16-bit activations: bf16x2, or int16 blocks on AVX2) against `medium`
# (int8 activations) on the whole model (issue 33, point 2: high's decode rate >= 95 % of medium's),
# with bf16 weights beside them: ROUNDS alternating rounds of bench_model (decode at context 128,
# one sequence; prefill of PROMPTS tokens), one line per round and configuration, then the medians
# and high / medium per weight format.
#
#   bench/model/quant_high_vs_medium.sh [BUILD_DIR=build] [MODEL=(made: qwen3-0.6b shape, 28 layers)]
#                                       [ROUNDS=3] [THREADS=2] [PROMPTS=128] [FORMATS=int4,int8]
#
# Run it with the machine otherwise idle; name the CPU beside the figures (bench_model prints it).
set -euo pipefail
BUILD=$(realpath "${1:-build}")
MODEL=${2:-}
ROUNDS=${3:-3}
THREADS=${4:-2}
PROMPTS=${5:-128}
FORMATS=${6:-int4,int8}
BENCH=$BUILD/bench/model/bench_model
if [ -z "$MODEL" ]; then
  MODEL=/tmp/pypto-quant-bench/qwen3-0.6b
  [ -f "$MODEL/config.json" ] || "$BUILD/src/cli/pypto-serving" make-test-model --preset qwen3-0.6b --out "$MODEL" >/dev/null
fi
lscpu | awk -F: '/^Model name|^CPU family|^Model:/ {gsub(/^ +/, "", $2); printf "%s: %s; ", $1, $2} END {print ""}'
echo "ISA flags: $(grep -m1 -o -wE 'avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_int8|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
configs=("none high")
for f in ${FORMATS//,/ }; do configs+=("$f high" "$f medium"); done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for cfg in "${configs[@]}"; do
    set -- $cfg
    log=$("$BENCH" --model "$MODEL" --threads "$THREADS" --runs 3 --contexts 128 --prompts "$PROMPTS" \
      --decode-batches 1 --quantization "$1" --matmul-precision "$2" 2>&1)
    [ "$r" = 1 ] && [ "$cfg" = "none high" ] && echo "$log" | sed -n '1,3p'
    dec=$(echo "$log" | awk '$1=="decode" && $2=="@" {print $5, $7; exit}')
    pre=$(echo "$log" | awk '$1=="prefill" {print $3; exit}')
    bw=$(echo "$log" | awk '/memory bandwidth bound/ {print $4; exit}')
    line="round $r $1 $2 decode_tok/s,of_bound: $dec prefill_tok/s: $pre bw_GB/s: $bw"
    echo "$line" | tee -a "$out"
  done
done
echo "medians over $ROUNDS rounds (decode tok/s, prefill tok/s):"
awk '{key=$3" "$4; d[key]=d[key]" "$6; p[key]=p[key]" "$9}
  function med(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
  END { for (k in d) { md[k] = med(d[k]); printf "  %-14s decode %7.2f  prefill %7.1f\n", k, md[k], med(p[k]) }
        for (k in d) if (k ~ / high$/ && k !~ /^none/) { f = k; sub(/ high$/, "", f)
          if ((f " medium") in md) printf "  %s: high / medium decode = %.3f\n", f, md[k] / md[f " medium"] } }' "$out"
