#!/usr/bin/env bash
# Pipeline throughput (issue 18): --pp 2 with 1, 2 and 4 micro-batches per step against one rank,
# with the offline CLI, stages as processes (mp, one core group each).
#   decode: 16 requests (SEQS) of ~16 prompt tokens, 64 greedy tokens each (almost every step a
#     16-sequence decode); decode tok/s = (generated - 16) / (wall - the slowest first token);
#     with SEQS > 16 (more than one step of --max-num-seqs 16 holds): generated / wall.
#   prefill: 16 prompts of ~310 tokens (4940 in all), one output token; prompt tok/s.
# --pp-micro-batch-tokens 1 lets even a 16-token decode step split, to show what splitting does;
# the last row of each table is the default policy (at most 4 parts of at least 64 tokens).
# --pp-virtual-engines rows: two engines (8 of the 16 sequences each) whose steps are in flight
# together through the two stages (parallel/replicas/step_pipeline.h).
# Each row gives the median and the best of REPEAT runs (default 3: on a shared machine a run can
# be paused). KINDS="decode" (default "decode prefill") runs only those tables, ONLY=REGEX only the
# rows whose name matches.
# Usage: bench/parallel/pp_micro.sh BINARY MODEL_DIR   (make the model with
#   BINARY make-test-model --preset qwen3-0.6b --out MODEL_DIR)
set -euo pipefail
BIN=${1:?binary}
MODEL=${2:?model dir}
REPEAT=${REPEAT:-3}
KINDS=${KINDS:-decode prefill}
ONLY=${ONLY:-}  # an extended regex: run only the rows whose name matches it
SEQS=${SEQS:-16}  # requests (each engine schedules at most 16 sequences per step)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON=(--model "$MODEL" --kv-cache-memory 512MiB --max-model-len 1024 --max-num-seqs 16)
GREEDY='"temperature": 0, "ignore_eos": true'

run() {  # kind (decode|prefill), name, flags...
  local kind=$1 name=$2
  shift 2
  if [ -n "$ONLY" ] && ! [[ "$name" =~ $ONLY ]]; then return 0; fi
  local prompts=() out=64
  for i in $(seq 1 "$SEQS"); do
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
import json, statistics, sys
kind, name, rates = sys.argv[1], sys.argv[2], []
for path in sys.argv[3:]:
    j = json.load(open(path))
    rs = j["results"]
    if kind == "decode":
        gen = sum(len(r["token_ids"]) for r in rs)
        ttft = max(r["timings"]["time_to_first_token_s"] for r in rs)
        total = max(r["timings"]["total_s"] for r in rs)
        # More requests than one step holds run in rounds: then every generated token over the
        # whole run (the ~16-token prompts cost little), else the decode steps after the last prefill.
        rates.append(gen / total if len(rs) > 16 else (gen - len(rs)) / (total - ttft))
    else:
        rates.append(sum(len(r["prompt_token_ids"]) for r in rs) / j["seconds"])
print(f"| {name:44} | {statistics.median(rates):9.1f} | {max(rates):9.1f} |")
PY
  rm -f "$TMP"/r*.json
}

for kind in $KINDS; do
  echo
  echo "| $kind: config | $( [ $kind = decode ] && echo 'decode tok/s, median' || echo 'prompt tok/s, median') | best |"
  echo "| --- | ---: | ---: |"
  run $kind "pp1 (1 rank, 1 core)" --threads 1
  for m in 1 2 4; do
    run $kind "pp2 mp, $m micro-batch(es)" --pp 2 --devices 0,1 --pp-micro-batches "$m" --pp-micro-batch-tokens 1
  done
  run $kind "pp2 mp, default (4 parts of >= 64 tokens)" --pp 2 --devices 0,1
  run $kind "pp2 mp, --pp-virtual-engines (2 steps in flight)" --pp 2 --devices 0,1 --pp-virtual-engines
  run $kind "pp2 threads, --pp-virtual-engines" --pp 2 --devices 0,1 --pp-virtual-engines \
    --distributed-executor-backend threads
done
