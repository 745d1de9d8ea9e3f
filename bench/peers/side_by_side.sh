#!/usr/bin/env bash
# Prefill-512 and decode of pypto-serving (bench_model) and llama.cpp (llama-bench) on the same
# weights, alternating runs on this machine, and the ratio of the medians.
#
#   bench/peers/side_by_side.sh MODEL_DIR MODEL.gguf LLAMA_BENCH [ROUNDS=3] [THREADS=2] [QUANT=none] [PRECISION=high]
#
# A Qwen3-MoE or Qwen3.5 / Qwen3.6 hybrid MODEL_DIR is measured with bench_moe (decode of one
# sequence at context 128, prefill 512) instead of bench_model, against llama.cpp's qwen3moe /
# qwen35 / qwen35moe on the same weights.
#
# MODEL.gguf is MODEL_DIR converted with bench/peers/qwen3_to_gguf.py or, for the hybrids,
# bench/peers/qwen35_to_gguf.py (bf16, same tensors), or
# that file quantized with llama-quantize (q8_0, q4_0) when QUANT (our --quantization: int8, int4)
# is given: each side then runs its own format of the same weights;
# LLAMA_BENCH is a llama-bench built beside the project (never inside it). bench_model runs at
# --matmul-precision PRECISION (the server's default, high: 16-bit activations; medium: int8
# activations, as llama.cpp's Q4_0/Q8_0 dot products quantize them); llama.cpp with its defaults,
# weights loaded without mmap.
#
# Long context (issue 31's side by side): PROMPT=N (prefill of N tokens) and DEPTH=D (decode of
# 32 tokens after D tokens of context) in the environment run llama-bench as `-p N -n 0` and
# `-p 0 -n 32 -d D` with flash attention on (`-fa 1`, its long-context path) and bench_model as
# `--prompts N --contexts D`; KV=int8 runs both with an 8-bit cache (our --kv-cache-dtype int8,
# llama.cpp's `-ctk q8_0 -ctv q8_0`), KV=bf16 (default) with 16-bit ones (llama.cpp's f16).
# Dense Qwen3 only. Without them: prefill 512 and tg32 as above.
set -euo pipefail
model="$1" gguf="$2" llama="$3" rounds="${4:-3}" threads="${5:-2}" quant="${6:-none}" precision="${7:-high}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bm="$here/build/bench/model/bench_model"
moe=0
grep -Eq '"model_type": *"qwen3(_moe|_5)' "$model/config.json" && moe=1 && bm="$here/build/bench/model/bench_moe"
ours_pp=() ours_tg=() peer_pp=() peer_tg=()
# The median of the arguments (the middle one; the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
if [ -n "${PROMPT:-}${DEPTH:-}" ]; then
  [ "$moe" = 0 ] || { echo "side_by_side.sh: PROMPT / DEPTH are for dense Qwen3 checkpoints" >&2; exit 2; }
  prompt="${PROMPT:-512}" depth="${DEPTH:-0}" kv="${KV:-bf16}"
  peer_kv=()
  case "$kv" in
    bf16) ;;
    int8) peer_kv=(-ctk q8_0 -ctv q8_0) ;;
    *) echo "side_by_side.sh: KV=$kv (allowed: bf16, int8)" >&2; exit 2 ;;
  esac
  # avg_ts of the llama-bench CSV row, by the header's column names.
  peer_ts() { awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) {gsub(/"/, "", $i); col[$i] = i}; next}
                       {gsub(/"/, "", $0); print $col["avg_ts"]; exit}'; }
  for r in $(seq "$rounds"); do
    echo "[side-by-side] round $r/$rounds: llama-bench pp$prompt, tg32 @ d$depth (fa on, KV $kv)" >&2
    peer_pp+=("$("$llama" -m "$gguf" -p "$prompt" -n 0 -t "$threads" -r 1 -mmp 0 -fa 1 "${peer_kv[@]}" -o csv 2>/dev/null | peer_ts)")
    peer_tg+=("$("$llama" -m "$gguf" -p 0 -n 32 -d "$depth" -t "$threads" -r 1 -mmp 0 -fa 1 "${peer_kv[@]}" -o csv 2>/dev/null | peer_ts)")
    echo "[side-by-side] round $r/$rounds: bench_model prefill $prompt, decode @ $depth (KV $kv)" >&2
    out=$("$bm" --model "$model" --threads "$threads" --runs 1 --contexts "$depth" --prompts "$prompt" --quantization "$quant" \
          --matmul-precision "$precision" --kv-cache-dtype "$kv" 2>/dev/null)
    echo "$out" | grep -E '^(decode|prefill) ' >&2
    ours_pp+=("$(echo "$out" | awk -v p="$prompt" '$1 == "prefill" && $2 == p {print $3}')")
    ours_tg+=("$(echo "$out" | awk -v d="$depth" '$1 == "decode" && $4 == d {print $5}')")
  done
  p1=$(median "${ours_pp[@]}") p2=$(median "${peer_pp[@]}") t1=$(median "${ours_tg[@]}") t2=$(median "${peer_tg[@]}")
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads, $rounds rounds; ours --quantization $quant --matmul-precision $precision --kv-cache-dtype $kv, peer $(basename "$gguf") -fa 1 ${peer_kv[*]}"
  echo "prefill $prompt tok/s: pypto-serving $p1 (runs: ${ours_pp[*]}), llama.cpp $p2 (runs: ${peer_pp[*]}), ratio $(awk -v a="$p1" -v b="$p2" 'BEGIN {printf "%.2f", a / b}')"
  echo "decode @ $depth tok/s: pypto-serving $t1 (runs: ${ours_tg[*]}), llama.cpp tg32 @ d$depth $t2 (runs: ${peer_tg[*]}), ratio $(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.2f", a / b}')"
  exit 0
fi
for r in $(seq "$rounds"); do
  echo "[side-by-side] round $r/$rounds: llama-bench" >&2
  out=$("$llama" -m "$gguf" -p 512 -n 32 -t "$threads" -r 3 -mmp 0 -o csv 2>/dev/null)
  peer_pp+=("$(echo "$out" | awk -F, 'NR>1 && $0 ~ /"512","0"/ {gsub(/"/,"",$0); print}' | awk -F, '{print $(NF-1)}' | head -1)")
  peer_tg+=("$(echo "$out" | awk -F, 'NR>1 && $0 ~ /"0","32"/ {gsub(/"/,"",$0); print}' | awk -F, '{print $(NF-1)}' | head -1)")
  echo "[side-by-side] round $r/$rounds: bench_model" >&2
  if [ "$moe" = 1 ]; then
    out=$("$bm" --model "$model" --threads "$threads" --runs 3 --batches 1 --context 128 --prompt 512 --quantization "$quant" --matmul-precision "$precision" 2>/dev/null)
    ours_pp+=("$(echo "$out" | awk '/^prefill 512/ {print $3}')")
    ours_tg+=("$(echo "$out" | awk '/^decode batch 1 / {print $4}')")
  else
    out=$("$bm" --model "$model" --threads "$threads" --runs 3 --contexts 128 --prompts 512 --quantization "$quant" --matmul-precision "$precision" 2>/dev/null)
    ours_pp+=("$(echo "$out" | awk '/^prefill 512/ {print $3}')")
    ours_tg+=("$(echo "$out" | awk '/^decode @ context 128/ {print $5}')")
  fi
done
p1=$(median "${ours_pp[@]}") p2=$(median "${peer_pp[@]}") t1=$(median "${ours_tg[@]}") t2=$(median "${peer_tg[@]}")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads, $rounds rounds; ours --quantization $quant --matmul-precision $precision, peer $(basename "$gguf")"
echo "prefill 512 tok/s: pypto-serving $p1 (runs: ${ours_pp[*]}), llama.cpp pp512 $p2 (runs: ${peer_pp[*]}), ratio $(awk -v a="$p1" -v b="$p2" 'BEGIN {printf "%.2f", a / b}')"
echo "decode tok/s:      pypto-serving $t1 (@128, runs: ${ours_tg[*]}), llama.cpp tg32 $t2 (runs: ${peer_tg[*]}), ratio $(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.2f", a / b}')"
