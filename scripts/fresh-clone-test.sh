#!/usr/bin/env bash
# Runs the README's test command the way a new user meets it: `git clone` of this repository's
# committed HEAD into an empty temporary directory with nothing beside it (no ../shared, no
# build, no npm packages), then `bash scripts/test.sh` there. Usage:
#   bash scripts/fresh-clone-test.sh [ROUNDS]     # default 1; stops at the first failing round
# Each round's log is kept in the printed directory; the clone is removed when a round passes.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds="${1:-1}"
case "$rounds" in '' | *[!0-9]* | 0) echo "ROUNDS must be a positive whole number, got '$rounds'" >&2; exit 2 ;; esac
logs="$(mktemp -d /tmp/pypto-fresh-clone-logs.XXXXXX)"
for ((r = 1; r <= rounds; ++r)); do
  top="$(mktemp -d /tmp/pypto-fresh-clone.XXXXXX)"
  git clone -q "$here" "$top/pypto-serving"
  [ ! -e "$top/shared" ] || { echo "unexpected $top/shared" >&2; exit 1; }
  echo "[fresh-clone] round $r/$rounds in $top/pypto-serving (log: $logs/round$r.log)"
  start=$(date +%s)
  if (cd "$top/pypto-serving" && CI=true bash scripts/test.sh) > "$logs/round$r.log" 2>&1; then
    echo "[fresh-clone] round $r passed in $(( $(date +%s) - start )) s: $(grep -E 'tests passed|tests failed' "$logs/round$r.log" | tail -n 1)"
    rm -rf "$top"
  else
    echo "[fresh-clone] round $r FAILED after $(( $(date +%s) - start )) s; clone kept in $top" >&2
    grep -E 'tests passed|tests failed|\(Failed\)|\*\*\*' "$logs/round$r.log" | tail -n 20 >&2 || true
    exit 1
  fi
done
