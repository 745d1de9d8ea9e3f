#!/usr/bin/env bash
# dp x tp comparison on this machine with the offline CLI (issue 7): for dp1xtp1 (all cores,
# unpinned), dp1xtp2 and dp2xtp1 (one core group per device), measures
#   batch-1 decode latency: one 16-token prompt, 64 greedy tokens, (total - TTFT) / 63;
#   32-request throughput: 32 different prompts of ~16 tokens, 32 greedy tokens each, tokens / s.
# dp1xtp2 runs its ranks three ways (--distributed-executor-backend): threads of one process, mp
# (forked rank processes, the default) and, when mpirun is installed, mpi (two processes under
# mpirun, TCP over loopback).
# Usage: bench/parallel/tp_dp.sh BINARY MODEL_DIR   (make the model with
#   BINARY make-test-model --preset qwen3-0.6b --out MODEL_DIR)
set -euo pipefail
BIN=${1:?binary}
MODEL=${2:?model dir}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON=(--model "$MODEL" --kv-cache-memory 512MiB --max-model-len 512 --max-num-seqs 32)
GREEDY='"temperature": 0, "ignore_eos": true'

LAUNCH=()  # a launcher before the binary (mpirun for the mpi row)
run() {  # name, flags...; prints "latency_ms throughput_tok_s"
  local name=$1
  shift
  "${LAUNCH[@]}" "$BIN" "${COMMON[@]}" "$@" --prompt "The quick brown fox jumps over the lazy dog again and again" \
    --generate-config "{$GREEDY, \"max_new_tokens\": 64}" --output-json "$TMP/lat.json" >/dev/null 2>"$TMP/err" ||
    { cat "$TMP/err"; exit 1; }
  local prompts=()
  for i in $(seq 1 32); do prompts+=(--prompt "Request number $i: write a short story about a robot and a cat"); done
  "${LAUNCH[@]}" "$BIN" "${COMMON[@]}" "$@" "${prompts[@]}" --generate-config "{$GREEDY, \"max_new_tokens\": 32}" \
    --output-json "$TMP/tput.json" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; exit 1; }
  python3 - "$name" "$TMP/lat.json" "$TMP/tput.json" <<'PY'
import json, sys
name, lat, tput = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
r = lat["results"][0]
n = len(r["token_ids"])
t = r["timings"]
decode_ms = (t["total_s"] - t["time_to_first_token_s"]) / (n - 1) * 1e3
print(f"| {name:12} | {decode_ms:10.1f} | {tput['total_tokens'] / tput['seconds']:10.2f} |")
PY
}

echo "| config   | decode ms/token (batch 1) | 32-request tok/s |"
echo "| -------- | ---------: | ---------: |"
run dp1xtp1 --threads "$(nproc)"
run dp1xtp1-1t --threads 1
run dp1xtp2-thr --devices 0,1 --tp 2 --distributed-executor-backend threads
run dp1xtp2-mp --devices 0,1 --tp 2 --distributed-executor-backend mp
if command -v mpirun >/dev/null; then
  LAUNCH=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
    OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1 mpirun -np 2 --bind-to core)
  run dp1xtp2-mpi --tp 2 --distributed-executor-backend mpi
  LAUNCH=()
fi
run dp2xtp1 --devices 0,1 --dp 2
