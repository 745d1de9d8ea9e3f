#!/usr/bin/env bash
# Speculative decoding of pypto-serving and llama.cpp on the same checkpoint: plain decode and
# speculation at each k, tokens/s, speed-up over each engine's own plain decode, drafts and
# acceptance. The engines alternate in rounds (ours, then llama.cpp's, ROUNDS times); medians, and
# each figure's spread over the rounds (min-max).
#
#   bench/peers/spec_side_by_side.sh METHOD MODEL_DIR MODEL.gguf LLAMA_BIN_DIR [ROUNDS=3] [THREADS=2]
#                                   [KS=1,2,3] [TOKENS=64] [PROMPT_LEN=32] [QUANT=int4] [PRECISION=medium]
#                                   [PROMPT_SEED=7]
#   (bench/peers/mtp_side_by_side.sh ARGS... is METHOD mtp.)
#
# METHOD mtp: MODEL_DIR a hybrid checkpoint with its MTP head (mtp.*), e.g. `make-test-model
# --preset qwen3.6-35b-a3b --layers 4 --text-only --mtp oracle` (the head drafts what the target
# emits, so the figures show the costs at full acceptance); MODEL.gguf the same weights with the
# head in llama.cpp's NextN layout, Q4_0 (bench/peers/qwen35_to_gguf.py --mtp --outtype q4_0, then
# llama-quantize ... Q4_0). llama.cpp drafts with `--spec-type draft-mtp`.
# METHOD draft_model: a separate draft checkpoint, DRAFT=DIR and DRAFT_GGUF=FILE in the
# environment (the same weights for both engines; bench/peers/qwen3_to_gguf.py then
# llama-quantize, e.g. Q8_0 beside QUANT int8). The accept-all pair: `make-test-model --preset
# qwen3-0.6b --eagle3 oracle` as the target and the same with `--layers 4` as the draft (the
# target's output projections are zero, so its next token depends only on the current one, and
# the draft, with the same embedding, final norm and lm_head, predicts it); a draft of other
# random weights gives acceptance ~0 (the floor). llama.cpp drafts with `--spec-type
# draft-simple -md DRAFT_GGUF`; ours quantizes the draft as the target (--draft-quantization QUANT).
# METHOD eagle3: an EAGLE-3 head, by default MODEL_DIR/eagle3 (DRAFT=DIR to name another) and
# DRAFT_GGUF=FILE, the same head as llama.cpp's eagle3 architecture (bench/peers/eagle3_to_gguf.py,
# then llama-quantize); `make-test-model --preset qwen3-0.6b --eagle3 oracle` accepts every draft,
# `--eagle3 random` almost none. llama.cpp drafts with `--spec-type draft-eagle3 -md DRAFT_GGUF`.
# LLAMA_BIN_DIR: a llama.cpp build beside the project (never inside it) with llama-server
# (-DLLAMA_BUILD_SERVER=ON): the draft length is a start-up option, so each k is its own server.
#
# Ours: build/bench/engine/bench_spec_decode --method METHOD (one request at a time, random prompt,
# greedy), its plain engine and forced speculation ("cost_model": false: every step drafts k, as
# llama.cpp does with --spec-draft-n-min 0 --spec-draft-p-min 0), and the cost model's column for
# reference; QUANT int4 (g64) or int8 with PRECISION medium (int8 activations, as llama.cpp's Q4_0
# and Q8_0 dot products quantize them). llama.cpp: one slot,
# greedy (top_k 1), EOS ignored, prompt cache off, a random prompt of PROMPT_LEN token ids, decode
# rate from its own timings (tokens after the first over their time), drafts and accepted drafts
# from its timings; its speculative output is compared with its plain output (the same tokens: "same").
# PROMPT_SEED picks llama.cpp's random prompt: llama-server parses every completion as chat content
# and answers HTTP 500 ("does not match the expected Content-only format") on some random-token
# continuations (seed 7's at 128 tokens on the 27B cut; seed 1's passes), which stops the run.
set -euo pipefail
method="$1" model="$2" gguf="$3" bin="$4" rounds="${5:-3}" threads="${6:-2}" ks="${7:-1,2,3}"
tokens="${8:-64}" plen="${9:-32}" quant="${10:-int4}" precision="${11:-medium}" seed="${12:-7}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ours="$here/build/bench/engine/bench_spec_decode"
server="$bin/llama-server"
ours_args=(--method "$method") llama_spec=()
case "$method" in
  mtp) llama_spec=(--spec-type draft-mtp) ;;
  draft_model)
    [ -n "${DRAFT:-}" ] && [ -n "${DRAFT_GGUF:-}" ] || { echo "spec_side_by_side: METHOD draft_model needs DRAFT=DIR and DRAFT_GGUF=FILE in the environment" >&2; exit 2; }
    ours_args+=(--draft "$DRAFT" --draft-quantization "$quant")
    llama_spec=(--spec-type draft-simple -md "$DRAFT_GGUF") ;;
  eagle3)
    [ -n "${DRAFT_GGUF:-}" ] || { echo "spec_side_by_side: METHOD eagle3 needs DRAFT_GGUF=FILE (bench/peers/eagle3_to_gguf.py) in the environment" >&2; exit 2; }
    [ -n "${DRAFT:-}" ] && ours_args+=(--draft "$DRAFT")
    llama_spec=(--spec-type draft-eagle3 -md "$DRAFT_GGUF") ;;
  *) echo "spec_side_by_side: METHOD must be mtp, draft_model or eagle3, not '$method'" >&2; exit 2 ;;
esac
for f in "$ours" "$server" "$gguf" "$model/config.json" ${DRAFT:+"$DRAFT/config.json"} ${DRAFT_GGUF:+"$DRAFT_GGUF"}; do
  [ -e "$f" ] || { echo "spec_side_by_side: $f not found" >&2; exit 2; }
done
work="$(mktemp -d)"
port=$((18000 + RANDOM % 2000))
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
log() { echo "[spec-side-by-side $(date +%H:%M:%S)] $*" >&2; }

# The same random prompt (token ids in the range ours draws from) for every llama.cpp run.
python3 -c "import random; r = random.Random($seed); print(','.join(str(r.randint(1000, 100000)) for _ in range($plen)))" > "$work/prompt"

start_server() {  # $1: k (0 = plain)
  local args=(-m "$gguf" -t "$threads" -tb "$threads" -c 1024 -np 1 --host 127.0.0.1 --port "$port" --no-webui)
  [ "$1" -gt 0 ] && args+=("${llama_spec[@]}" --spec-draft-n-max "$1" --spec-draft-n-min 0 --spec-draft-p-min 0 -td "$threads")
  "$server" "${args[@]}" > "$work/server-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" > /dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { echo "llama-server (k $1) exited:" >&2; tail -20 "$work/server-$1.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "llama-server (k $1) did not start" >&2; exit 1
}
stop_server() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }

# One greedy request; prints "tok_s drafted accepted tokens-csv".
request() {  # $1: n_predict
  local body
  body=$(printf '{"prompt": [%s], "n_predict": %d, "temperature": 0, "top_k": 1, "ignore_eos": true, "cache_prompt": false, "return_tokens": true}' "$(cat "$work/prompt")" "$1")
  curl -sf "http://127.0.0.1:$port/completion" -H 'Content-Type: application/json' -d "$body" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); t = d["timings"]
print(t["predicted_per_second"], t.get("draft_n", 0), t.get("draft_n_accepted", 0), ",".join(map(str, d["tokens"])))'
}

IFS=, read -r -a klist <<< "$ks"
: > "$work/results"  # lines: engine round k tok_s drafted accepted same
for r in $(seq "$rounds"); do
  log "round $r/$rounds: pypto-serving bench_spec_decode --method $method --k $ks"
  "$ours" "${ours_args[@]}" --model "$model" --quantization "$quant" --matmul-precision "$precision" \
    --threads "$threads" --k "$ks" --tokens "$tokens" --prompt-len "$plen" --repeats 1 \
    > "$work/ours-$r.txt" 2> "$work/ours-$r.err" || { echo "bench_spec_decode failed:" >&2; tail -20 "$work/ours-$r.err" "$work/ours-$r.txt" >&2; exit 1; }
  # Rows: k prompt plain | cost-model ratio drafted accept tok/st | forced ratio drafted accept tok/st | exec sched same
  awk -v r="$r" '$1 ~ /^[0-9]+$/ && $2 == "random" {
      acc = $14; sub(/%/, "", acc); cacc = $8; sub(/%/, "", cacc)
      print "ours", r, 0, $3, 0, 0, "yes", $1
      print "ours", r, $1, $11, $13, $13 * acc / 100, ($NF == "yes" ? "yes" : "NO"), $1
      print "ours-cm", r, $1, $5, $7, $7 * cacc / 100, ($NF == "yes" ? "yes" : "NO"), $1 }' "$work/ours-$r.txt" >> "$work/results"
  grep -E '^[0-9]+ +random' "$work/ours-$r.txt" | sed 's/^/    /' >&2
  for k in 0 "${klist[@]}"; do
    log "round $r/$rounds: llama.cpp llama-server $([ "$k" = 0 ] && echo plain || echo "${llama_spec[1]} k $k")"
    start_server "$k"
    request 8 > /dev/null  # warm-up
    read -r tps dn da toks <<< "$(request "$tokens")"
    stop_server
    [ -n "$tps" ] || { echo "llama-server (k $k): the request failed:" >&2; grep -E ' [WE] ' "$work/server-$k.log" | tail -5 >&2; exit 1; }
    if [ "$k" = 0 ]; then echo "$toks" > "$work/plain-$r"; same=yes
    else same=$([ "$toks" = "$(cat "$work/plain-$r")" ] && echo yes || echo NO); fi
    echo "llama $r $k $tps $dn $da $same $k" >> "$work/results"
    echo "    k $k: $tps tok/s, drafted $dn, accepted $da, same as plain: $same" >&2
  done
done

cpu="$(lscpu | sed -n 's/^Model name: *//p')"
echo "CPU: $cpu, $threads threads, $rounds rounds (engines alternating), $tokens tokens after a $plen-token random prompt, greedy, one request"
echo "ours: bench_spec_decode ${ours_args[*]} --quantization $quant --matmul-precision $precision; llama.cpp: llama-server $(basename "$gguf"), ${llama_spec[*]} --spec-draft-n-max k"
python3 - "$work/results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(v): return statistics.median(v) if v else float("nan")
def spread(v): return f"{min(v):.1f}-{max(v):.1f}" if v else "-"
print("| engine | k | tok/s (median, rounds' range) | × own plain (median of rounds, range) | drafted | accepted | output = plain |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for eng, name in (("ours", "pypto-serving (forced k)"), ("ours-cm", "pypto-serving (cost model)"), ("llama", "llama.cpp")):
    ks = sorted({int(r[2]) for r in rows if r[0] == eng})
    for k in ks:
        sel = [r for r in rows if r[0] == eng and int(r[2]) == k]
        tps = [float(r[3]) for r in sel]
        ratios = []
        for r in sel:
            if eng == "llama":
                base = [float(p[3]) for p in rows if p[0] == "llama" and p[1] == r[1] and p[2] == "0"]
            else:  # ours: the plain engine measured beside this k in the same round
                base = [float(p[3]) for p in rows if p[0] == "ours" and p[1] == r[1] and p[2] == "0" and p[7] == r[7]]
            if base and base[0] > 0: ratios.append(float(r[3]) / base[0])
        dr = sum(float(r[4]) for r in sel); ac = sum(float(r[5]) for r in sel)
        same = "yes" if all(r[6] == "yes" for r in sel) else "NO"
        rat = f"{med(ratios):.2f}× ({min(ratios):.2f}-{max(ratios):.2f})" if k else "1"
        acc = f"{ac:.0f} ({100 * ac / dr:.1f} %)" if dr else "-"
        print(f"| {name} | {k if k else 'plain'} | {med(tps):.1f} ({spread(tps)}) | {rat} | {dr:.0f} | {acc} | {same if k else '-'} |")
EOF
