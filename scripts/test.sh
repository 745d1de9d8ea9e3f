#!/usr/bin/env bash
# Sets up a Debian 12 machine, builds everything (binary, tests, benchmarks, fuzzers) and runs
# the whole test suite: unit, kernel, model-vs-PyTorch, tokenizer/template parity, end-to-end and
# short libFuzzer runs. CTest prints the summary last.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
# In CI (CI=true) a compiler warning in the project's code fails the build.
werror="-DPYPTO_WERROR=${CI:+ON}"
bash scripts/setup.sh
bash scripts/fuzz.sh "$werror"
bash scripts/build.sh -DPYPTO_BUILD_BENCH=ON -DPYPTO_FUZZ_BIN_DIR="$here/build-fuzz/tests/fuzz" "$werror"
ctest --test-dir build --output-on-failure -j2 --timeout 900
