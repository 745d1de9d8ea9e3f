#!/usr/bin/env bash
# MTP speculative decoding under rank processes through the offline binary: per layout (default
# `--tp 2` and `--pp 2`, --distributed-executor-backend mp), plain decode, MTP forced at k
# ("cost_model": false) and MTP with the cost model, one request, greedy, a fixed random prompt
# of token ids, max_tokens TOKENS. The runs alternate (each round: every layout, plain / forced /
# cost model), ROUNDS times, so load changes on a shared host weigh on all alike; medians.
#
#   bench/engine/mtp_ranks_speed.sh MODEL_DIR [ROUNDS=3] [K=2] [TOKENS=64] [PROMPT_LEN=32] [QUANT=int4]
#                                   [LAYOUTS="--tp 2|--pp 2"]
#
# Decode tok/s = (tokens - 1) / (total - time to first token), from --output-json; each run loads
# the model anew (not timed). Reported per layout and mode: the median tok/s (rounds' range), the
# median of the per-round ratios against the plain run of the same round and layout, drafted /
# accepted tokens, and whether the output equals the plain run's (it must).
set -euo pipefail
model=${1:?usage: $0 MODEL_DIR [ROUNDS] [K] [TOKENS] [PROMPT_LEN] [QUANT] [LAYOUTS]}
rounds=${2:-3} k=${3:-2} tokens=${4:-64} prompt_len=${5:-32} quant=${6:-int4} layouts=${7:-"--tp 2|--pp 2"}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$here/build/src/cli/pypto-serving"
[ -x "$bin" ] || { echo "build pypto-serving first: $bin" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A fixed random prompt (ids below the tokenizer's 151,669).
prompt=$(python3 -c "import random; r = random.Random(7); print(','.join(str(r.randrange(1000, 150000)) for _ in range($prompt_len)))")
gen="{\"max_tokens\": $tokens, \"temperature\": 0, \"ignore_eos\": true}"
declare -A spec=([plain]="" [forced]="{\"method\": \"mtp\", \"num_speculative_tokens\": $k, \"cost_model\": false}"
                 [cost]="{\"method\": \"mtp\", \"num_speculative_tokens\": $k}")
IFS='|' read -r -a layout_list <<< "$layouts"
for r in $(seq 1 "$rounds"); do
  for li in "${!layout_list[@]}"; do
    for mode in plain forced cost; do
      args=(--model "$model" --quantization "$quant" --kv-cache-memory 256MiB --max-model-len 1024
            --prompt-token-ids "$prompt" --generate-config "$gen" --output-json "$work/out.json"
            --distributed-executor-backend mp --devices 0,1)
      read -r -a lay <<< "${layout_list[$li]}"
      args+=("${lay[@]}")
      [ -n "${spec[$mode]}" ] && args+=(--speculative-config "${spec[$mode]}")
      "$bin" "${args[@]}" > "$work/run.txt" 2> "$work/run.err" ||
        { echo "failed: $bin ${args[*]}" >&2; tail -20 "$work/run.err" >&2; exit 1; }
      python3 - "$work/out.json" "$work/run.txt" "$r" "$li" "$mode" >> "$work/results" <<'EOF'
import json, re, sys
j = json.load(open(sys.argv[1]))["results"][0]
t = j["timings"]
tps = (len(j["token_ids"]) - 1) / (t["total_s"] - t["time_to_first_token_s"])
m = re.search(r"\[speculative\] \d+ drafts, (\d+) draft tokens, (\d+) accepted", open(sys.argv[2]).read())
d, a = (m.group(1), m.group(2)) if m else ("0", "0")
print(sys.argv[3], sys.argv[4], sys.argv[5], f"{tps:.2f}", d, a, ",".join(map(str, j["token_ids"])))
EOF
      tail -1 "$work/results" | awk -v l="${layout_list[$li]}" '{printf "round %s, %s, %s: %s tok/s, drafted %s, accepted %s\n", $1, l, $3, $4, $5, $6}' >&2
    done
  done
done
echo "model $model, $quant, k $k, $tokens tokens, prompt $prompt_len ids, $rounds rounds, mp"
python3 - "$work/results" "$layouts" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
layouts = sys.argv[2].split("|")
print("| layout | mode | tok/s (median, range) | × plain (median of rounds) | drafted | accepted | output = plain |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for li, lay in enumerate(layouts):
    plain = {r[0]: r for r in rows if r[1] == str(li) and r[2] == "plain"}
    for mode in ("plain", "forced", "cost"):
        rs = [r for r in rows if r[1] == str(li) and r[2] == mode]
        tps = [float(r[3]) for r in rs]
        ratio = statistics.median(float(r[3]) / float(plain[r[0]][3]) for r in rs)
        same = all(r[6] == plain[r[0]][6] for r in rs)
        print(f"| {lay} | {mode} | {statistics.median(tps):.1f} ({min(tps):.1f}-{max(tps):.1f}) | {ratio:.2f}x "
              f"| {'/'.join(r[4] for r in rs)} | {'/'.join(r[5] for r in rs)} | {'yes' if same else 'NO'} |")
EOF
