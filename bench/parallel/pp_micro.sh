#!/usr/bin/env bash
# Pipeline throughput (issue 18): --pp 2 with 1, 2 and 4 micro-batches per step against one rank,
# with the offline CLI, stages as processes (mp, one core group each).
#   decode: 16 requests of ~16 prompt tokens, 64 greedy tokens each (almost every step a
#     16-sequence decode); decode tok/s = (generated - 16) / (wall - the slowest first token).
#   prefill: 16 prompts of ~310 tokens (4940 in all), one output token; prompt tok/s.
# --pp-micro-batch-tokens 1 lets even a 16-token decode step split, to show what splitting does;
# the last row of each table is the default policy (at most 4 parts of at least 64 tokens).
# Each figure is the best of REPEAT runs (default 3: on a shared machine a run can be paused).
# Usage: bench/parallel/pp_micro.sh BINARY MODEL_DIR   (make the model with
#   BINARY make-test-model --preset qwen3-0.6b --out MODEL_DIR)
set -euo pipefail
BIN=${1:?binary}
MODEL=${2:?model dir}
REPEAT=${REPEAT:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON=(--model "$MODEL" --kv-cache-memory 512MiB --max-model-len 1024 --max-num-seqs 16)
GREEDY='"temperature": 0, "ignore_eos": true'

run() {  # kind (decode|prefill), name, flags...
  local kind=$1 name=$2
  shift 2
  local prompts=() out=64
  for i in $(seq 1 16); do
    if [ "$kind" = decode ]; then
      prompts+=(--prompt "Request number $i: write a short story about a robot and a cat")
    else
      prompts+=(--prompt "$(for k in $(seq 1 20); do printf 'Request %s: tell me a long story about robots and cats and dogs ' "$i"; done)")
    fi
  done
  [ "$kind" = prefill ] && out=1
  for k in $(seq 1 "$REPEAT"); do
    "$BIN" "${COMMON[@]}" "$@" "${prompts[@]}" --generate-config "{$GREEDY, \"max_new_tokens\": $out}" \
      --output-json "$TMP/r$k.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; exit 1; }
  done
  python3 - "$kind" "$name" "$TMP"/r*.json <<'PY'
import json, sys
kind, name, best = sys.argv[1], sys.argv[2], 0.0
for path in sys.argv[3:]:
    j = json.load(open(path))
    rs = j["results"]
    if kind == "decode":
        gen = sum(len(r["token_ids"]) for r in rs)
        ttft = max(r["timings"]["time_to_first_token_s"] for r in rs)
        total = max(r["timings"]["total_s"] for r in rs)
        best = max(best, (gen - len(rs)) / (total - ttft))
    else:
        best = max(best, sum(len(r["prompt_token_ids"]) for r in rs) / j["seconds"])
print(f"| {name:36} | {best:9.1f} |")
PY
  rm -f "$TMP"/r*.json
}

for kind in decode prefill; do
  echo
  echo "| $kind: config | $( [ $kind = decode ] && echo 'decode tok/s' || echo 'prompt tok/s') |"
  echo "| --- | ---: |"
  run $kind "pp1 (1 rank, 1 core)" --threads 1
  for m in 1 2 4; do
    run $kind "pp2 mp, $m micro-batch(es)" --pp 2 --devices 0,1 --pp-micro-batches "$m" --pp-micro-batch-tokens 1
  done
  run $kind "pp2 mp, default (4 parts of >= 64 tokens)" --pp 2 --devices 0,1
done
