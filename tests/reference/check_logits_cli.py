#!/usr/bin/env python3
"""End-to-end check of `pypto-serving logits` against the PyTorch reference: makes a tiny test
model with the binary's make-test-model, asks the binary for the logits of a prompt (in chunks,
fp32 KV cache), and compares the .npy it writes with qwen3_reference.py's logits:
max|dlogit| <= 1e-3 * max(1, max|logit|). Also checks that --prompt TEXT writes [T, vocab].

Usage: check_logits_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_reference import Qwen3Reference  # noqa: E402


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    model = os.path.join(a.work_dir, "tiny-cli")
    run([a.binary, "make-test-model", "--preset", "tiny", "--seed", "3", "--out", model])

    ids = [9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5]
    out = os.path.join(a.work_dir, "cli_logits.npy")
    run([a.binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)), "--out", out,
         "--kv-cache-dtype", "fp32", "--chunk", "5", "--threads", "2"])
    got = np.load(out)
    ref = Qwen3Reference(model).logits(ids)
    if got.shape != ref.shape or got.dtype != np.float32:
        sys.exit(f"shape/dtype {got.shape} {got.dtype}, reference {ref.shape} float32")
    diff = float(np.abs(got - ref).max())
    bound = 1e-3 * max(1.0, float(np.abs(ref).max()))
    print(f"logits CLI: max|dlogit| = {diff:.3g} (bound {bound:.3g})")
    if not diff <= bound:
        sys.exit("logits CLI disagrees with the reference")

    out2 = os.path.join(a.work_dir, "cli_prompt_logits.npy")
    run([a.binary, "logits", "--model", model, "--prompt", "Hello, world!", "--out", out2])
    got2 = np.load(out2)
    if got2.ndim != 2 or got2.shape[0] < 2 or got2.shape[1] != ref.shape[1]:
        sys.exit(f"--prompt logits have shape {got2.shape}")
    print("ok")


if __name__ == "__main__":
    main()
