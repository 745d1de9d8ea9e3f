#!/usr/bin/env bash
# Embedding throughput of pypto-serving (`embed --runner pooling`) and llama.cpp (llama-embedding
# --pooling last) on the same weights and the same texts, alternating runs, and the ratio of the
# medians (issue 32):
#
#   bench/peers/embedding_side_by_side.sh MODEL_DIR MODEL.gguf LLAMA_EMBEDDING [ROUNDS=3] [INPUTS=256] [WORDS=48] [THREADS=2]
#
# LLAMA_ARGS (environment) sets llama-embedding's batching; its default, 2 sequences per batch of
# 128 tokens, was the fastest of a sweep on this machine (4-layer qwen3-0.6b, 48-word texts, bf16,
# 2 threads): llama-embedding puts a batch's sequences in one attention with a mask, so larger
# batches get slower (-c/-b 128, -np 2: 807 tok/s; 256/5: 674; 512/10: 617; 2048/42: 461;
# 16384/256: 156).
#
# MODEL_DIR is a causal-LM Qwen3 checkpoint (make-test-model; the pooling runner computes
# Qwen3-Embedding's last-token vector on it), MODEL.gguf the same weights converted with
# bench/peers/qwen3_to_gguf.py; LLAMA_EMBEDDING a llama-embedding built beside the project.
# INPUTS texts of WORDS random common words each (one batch of all of them on both sides). Each
# side reports prompt tokens per second with model load excluded: ours from the `embed` stderr
# line, llama.cpp's from its log's time stamps (below).
set -euo pipefail
model="$1" gguf="$2" llama="$3" rounds="${4:-3}" inputs="${5:-256}" words="${6:-48}" threads="${7:-2}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$here/build/src/cli/pypto-serving"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" "$inputs" "$words" <<'PY'
import json, random, sys
work, n, w = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
vocab = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government number "
         "night point home water room mother area money story fact month lot right study book eye job word "
         "business issue side kind head house service friend father power hour game line end member law car "
         "city community name president team minute idea kid body information back parent face others level").split()
rng = random.Random(0)
with open(f"{work}/texts.txt", "w") as t, open(f"{work}/in.jsonl", "w") as j:
    for _ in range(n):
        s = " ".join(rng.choice(vocab) for _ in range(w))
        t.write(s + "\n")
        j.write(json.dumps({"text": s}) + "\n")
PY
ours=() peer=()
for r in $(seq "$rounds"); do
  echo "[embedding side-by-side] round $r/$rounds: llama-embedding" >&2
  # llama-embedding prints no timing of its own: its log stamps each line with the time since
  # start (m.s.ms.us); the batches run from the first "batch_decode" line to the process's exit
  # (the 256 vectors it then prints to /dev/null take a few ms).
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$llama" -m "$gguf" -f "$work/texts.txt" --pooling last -t "$threads" ${LLAMA_ARGS:--c 128 -b 128 -ub 128 -np 2} \
    --no-mmap --embd-output-format array >/dev/null 2>"$work/llama.log"
  t1=$(date +%s.%N)
  peer+=("$(/usr/bin/python3 - "$work/llama.log" "$t0" "$t1" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1], errors="replace") if "batch_decode: n_tokens" in l]
m, s, ms, us = (int(x) for x in lines[0].split()[0].split("."))
start = float(sys.argv[2]) + m * 60 + s + ms / 1e3 + us / 1e6
tokens = sum(int(re.search(r"n_tokens = (\d+)", l).group(1)) for l in lines)
print(round(tokens / (float(sys.argv[3]) - start), 1))
PY
)")
  echo "[embedding side-by-side] round $r/$rounds: pypto-serving embed" >&2
  out=$("$bin" embed --model "$model" --runner pooling --input "$work/in.jsonl" --out "$work/out.npy" --threads "$threads" \
        --max-num-seqs "$inputs" --max-num-batched-tokens 4096 --kv-cache-memory 1GiB 2>&1 >/dev/null)
  ours+=("$(echo "$out" | sed -n 's/.*inputs\/s, \([0-9.]*\) tok\/s.*/\1/p' | tail -1)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
o=$(median "${ours[@]}") p=$(median "${peer[@]}")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads, $rounds rounds, $inputs texts x $words words"
echo "embedding tok/s: pypto-serving $o (runs: ${ours[*]}), llama.cpp llama-embedding $p (runs: ${peer[*]}), ratio $(/usr/bin/python3 -c "print(round($o / $p, 2) if $p else 'n/a')")"
