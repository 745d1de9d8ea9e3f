#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds pypto-serving and runs the main job: offline generation on
# the built-in default model (random weights, made on first use in ~/.cache/pypto-serving).
# Extra arguments go to pypto-serving.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build pypto-serving
if [ "$#" -eq 0 ]; then
  set -- --prompt 'Hello, my name is' --max-model-len 512 --generate-config '{"max_new_tokens": 32}'
fi
exec ./build/src/cli/pypto-serving "$@"
