#!/bin/bash
# The 8-bit KV cache at long context (issue 31, point 2): logit error of int8 and fp8 KV against
# bf16 (and fp32) KV at the last positions of a long prompt, and the decode-step time at that
# context for bf16 / int8 / fp8 KV, on a make-test-model checkpoint of the qwen3-0.6b shape.
#
#   bench/model/kv8_long_context.sh [BUILD_DIR=build] [WORK_DIR=/tmp/pypto-kv8] [PROMPT_LEN=2560] [LAYERS=28]
#                                   [PHASE=all|logits|decode]
#
# Logits: `pypto-serving logits --last 64` once per KV dtype on the same random prompt (ids drawn
# by a seeded RNG from ordinary tokens), compared in numpy: max |Δlogit|, that over the largest
# |logit|, the mean |Δ|, and how often the argmax agrees. Decode: bench_model --contexts
# PROMPT_LEN (one sequence, 8 single-token steps after the cache holds PROMPT_LEN tokens, median
# of 3 runs) per KV dtype. Run it with the machine otherwise idle; name the CPU beside the figures.
set -euo pipefail
BUILD=$(realpath "${1:-build}")
WORK=${2:-/tmp/pypto-kv8}
T=${3:-2560}
LAYERS=${4:-28}
PHASE=${5:-all}
BIN=$BUILD/src/cli/pypto-serving
BENCH=$BUILD/bench/model/bench_model
PY=${PYPTO_PYTHON:-/usr/bin/python3}
mkdir -p "$WORK"
MODEL=$WORK/qwen3-0.6b-l$LAYERS
[ -f "$MODEL/config.json" ] || "$BIN" make-test-model --preset qwen3-0.6b --layers "$LAYERS" --out "$MODEL" >/dev/null
"$PY" -c "
import random
random.seed($T)
print(','.join(str(random.randrange(0, 151643)) for _ in range($T)))" > "$WORK/ids_$T.txt"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; model $MODEL ($LAYERS layers), prompt $T tokens"
if [ "$PHASE" != decode ]; then
for kv in fp32 bf16 int8 fp8; do
  s=$(date +%s.%N)
  "$BIN" logits --model "$MODEL" --token-ids-file "$WORK/ids_$T.txt" --out "$WORK/logits_${kv}_$T.npy" --last 64 \
    --kv-cache-dtype "$kv" --chunk 512 2>&1 | grep -v '^$' | tail -1
  echo "  $kv: logits in $(echo "$(date +%s.%N) - $s" | bc) s"
done
"$PY" - "$WORK" "$T" <<'PYEOF'
import sys, numpy as np
work, T = sys.argv[1], sys.argv[2]
L = {kv: np.load(f"{work}/logits_{kv}_{T}.npy").astype(np.float64) for kv in ["fp32", "bf16", "int8", "fp8"]}
print(f"logit error at the last 64 positions of a {T}-token prompt:")
for ref in ["fp32", "bf16"]:
    r = L[ref]
    for kv in ["bf16", "int8", "fp8"]:
        if kv == ref:
            continue
        d = np.abs(L[kv] - r)
        agree = np.mean(np.argmax(L[kv], 1) == np.argmax(r, 1))
        print(f"  {kv:>5} vs {ref:>5} KV: max|dlogit| {d.max():.4g}  / max|logit| {d.max() / np.abs(r).max():.3g}"
              f"  mean|dlogit| {d.mean():.3g}  argmax agrees {agree * 100:.0f}%")
PYEOF
fi
[ "$PHASE" = logits ] && exit 0
for kv in bf16 int8 fp8; do
  "$BENCH" --model "$MODEL" --threads "$(nproc)" --runs 3 --contexts "$T" --prompts '' --kv-cache-dtype "$kv" 2>&1 |
    grep -E "^decode @" | sed "s/^/  $kv KV: /"
done
