#!/usr/bin/env bash
# Embedding throughput against the engine's own prefill rate on the same model (issue 32):
#   bash bench/pooling/embedding_throughput.sh BUILD_DIR [LAYERS=4] [INPUTS=256] [LEN=64] [REPEATS=3]
# One random-weight qwen3-0.6b checkpoint cut to LAYERS layers (make-test-model; a causal LM, so
# both runners can load it), and the same shapes as Qwen3-Embedding (preset qwen3-embedding-0.6b):
#  1. `embed --runner pooling`: INPUTS inputs of LEN random token ids, all submitted at once (the
#     engine batches them under --max-num-batched-tokens 4096); its stderr line gives tokens/s
#     from submission to the last vector (model load excluded). Best of REPEATS.
#  2. `bench latency --input-len LEN --output-len 1 --batch-size INPUTS`: the generate runner's
#     prefill of the same batch (its prefill tokens/s; this includes the lm_head rows of the
#     INPUTS last tokens, which pooling skips).
#  3. The same as 1 on the Qwen3-Embedding layout (qwen3-embedding-0.6b preset).
# Prints the CPU model and the figures. Run it on an otherwise idle machine.
set -euo pipefail
build=${1:?usage: embedding_throughput.sh BUILD_DIR [LAYERS] [INPUTS] [LEN] [REPEATS]}
layers=${2:-4} inputs=${3:-256} len=${4:-64} repeats=${5:-3}
bin="$build/src/cli/pypto-serving"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
"$bin" make-test-model --preset qwen3-0.6b --layers "$layers" --out "$work/lm" >/dev/null 2>&1
"$bin" make-test-model --preset qwen3-embedding-0.6b --layers "$layers" --out "$work/emb" >/dev/null 2>&1
python3 - "$work/in.jsonl" "$inputs" "$len" <<'PY'
import json, random, sys
path, n, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(0)
with open(path, "w") as f:
    for _ in range(n):
        f.write(json.dumps({"token_ids": [rng.randrange(100, 150000) for _ in range(L)]}) + "\n")
PY
flags=(--max-num-seqs "$inputs" --max-num-batched-tokens 4096 --max-model-len "$len" --kv-cache-memory 1GiB)
best() {  # best tokens/s of REPEATS embed runs on model $1
  local b=0
  for _ in $(seq "$repeats"); do
    t=$("$bin" embed --model "$1" --runner pooling --input "$work/in.jsonl" --out "$work/out.npy" "${flags[@]}" 2>&1 |
        sed -n 's/.*inputs\/s, \([0-9.]*\) tok\/s.*/\1/p')
    b=$(python3 -c "print(max($b, $t))")
  done
  echo "$b"
}
emb_lm=$(best "$work/lm")
emb_st=$(best "$work/emb")
prefill=$("$bin" bench latency --model "$work/lm" --input-len "$len" --output-len 1 --batch-size "$inputs" \
            --num-iters "$repeats" --num-iters-warmup 1 --max-num-seqs "$inputs" --max-num-batched-tokens 4096 \
            --kv-cache-memory 1GiB --no-save 2>/dev/null | awk '/Prefill tokens\/s:/ {print $NF}')
echo "model: qwen3-0.6b shapes, $layers layers; $inputs inputs x $len tokens"
echo "embed --runner pooling (causal-LM checkpoint):   $emb_lm tok/s"
echo "embed (Qwen3-Embedding layout):                  $emb_st tok/s"
echo "bench latency prefill (generate runner):         $prefill tok/s"
python3 -c "p=float('$prefill' or 0); e=float('$emb_lm'); print(f'embedding / prefill: {e/p:.3f}' if p else 'no prefill figure parsed')"
