#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address + undefined sanitizers) into build-fuzz/.
# scripts/test.sh then registers a short run of each as a CTest test. Extra arguments go to CMake.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPYPTO_BUILD_FUZZERS=ON -DPYPTO_BUILD_BENCH=OFF "$@" >/dev/null
targets=$(cd tests/fuzz && ls *_fuzz.cpp | sed 's/\.cpp$//')
ninja -C build-fuzz $targets
