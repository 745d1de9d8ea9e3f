#!/bin/bash
# Speculative decoding's figures (issue 30) on make-test-model checkpoints (random weights, real
# shapes), for a quiet host: run it with the machine otherwise idle and name the CPU beside the
# figures (the first line it prints).
#
#   bench/engine/spec_decode_runs.sh [BUILD_DIR=build] [WORK_DIR=/tmp/pypto-spec] [PHASE=all|verify|ngram|draft]
#                                    [LAYERS_14B=4] [REPEATS=3]
#
# MODEL_06=DIR / MODEL_14=DIR (environment) use existing checkpoints instead of making them.
#  verify  the (k + 1)-row verify step against the one-row step, k = 1..8 (bench_verify_rows):
#          the qwen3-0.6b shape in bf16 and the qwen3-14b shape in int8 (LAYERS_14B of its 40
#          layers: a step is per-layer work plus the lm_head, so a few layers give the ratio's
#          shape; the lm_head's share is larger than in the 40-layer model). Issue goal: <= 1.15x
#          for k <= 4.
#  ngram   n-gram speculation (k 4, lookup 2..4) against plain decoding on the copy / repeat /
#          random prompts of bench_spec_decode (batch 1, alternating runs on two loaded engines).
#  draft   a draft model: the 0.6b shape as its own draft (acceptance 1: the cost of k draft
#          passes + one verify against k + 1 plain steps), and a 4-layer 0.6b-shape draft with
#          other random weights (acceptance ~0: the throughput floor against plain decoding,
#          which the throttle must keep >= 0.95x). Random weights cannot show a real draft's
#          acceptance: docs/status.md gives the TPOT formula with these measured costs.
set -euo pipefail
BUILD=$(realpath "${1:-build}")
WORK=${2:-/tmp/pypto-spec}
PHASE=${3:-all}
L14=${4:-4}
REPEATS=${5:-3}
BIN=$BUILD/src/cli/pypto-serving
VERIFY=$BUILD/bench/model/bench_verify_rows
SPEC=$BUILD/bench/engine/bench_spec_decode
mkdir -p "$WORK"
Q06=${MODEL_06:-$WORK/qwen3-0.6b}
Q06_DRAFT=$WORK/qwen3-0.6b-l4-seed7
Q14=${MODEL_14:-$WORK/qwen3-14b-l$L14}
make_model() {  # DIR ARGS...
  local dir=$1
  shift
  [ -f "$dir/config.json" ] || "$BIN" make-test-model "$@" --out "$dir" >/dev/null
}
make_model "$Q06" --preset qwen3-0.6b
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$PHASE" = all ] || [ "$PHASE" = verify ]; then
  make_model "$Q14" --preset qwen3-14b --layers "$L14"
  echo "== verify rows: qwen3-0.6b shape (28 layers), bf16, context 512"
  "$VERIFY" --model "$Q06" --context 512 --max-k 8 --runs 7
  echo "== verify rows: qwen3-14b shape ($L14 of 40 layers), int8, context 512"
  "$VERIFY" --model "$Q14" --context 512 --max-k 8 --runs 7 --quantization int8
fi
if [ "$PHASE" = all ] || [ "$PHASE" = ngram ]; then
  echo "== n-gram speculation, k 4, qwen3-0.6b shape bf16"
  "$SPEC" --model "$Q06" --k 4 --tokens 32 --prompt-len 64 --repeats "$REPEATS"
fi
if [ "$PHASE" = all ] || [ "$PHASE" = draft ]; then
  make_model "$Q06_DRAFT" --preset qwen3-0.6b --layers 4 --seed 7
  echo "== draft model: the target as its own draft (acceptance 1), k 4"
  "$SPEC" --model "$Q06" --draft "$Q06" --k 4 --tokens 32 --prompt-len 64 --repeats "$REPEATS"
  echo "== draft model: 4 layers, other random weights (acceptance ~0), k 4"
  "$SPEC" --model "$Q06" --draft "$Q06_DRAFT" --k 4 --tokens 64 --prompt-len 64 --repeats "$REPEATS"
fi
