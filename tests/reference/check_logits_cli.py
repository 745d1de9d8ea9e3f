#!/usr/bin/env python3
"""End-to-end check of `pypto-serving logits` against the PyTorch reference: makes a tiny test
model with the binary's make-test-model, asks the binary for the logits of a prompt (in chunks,
fp32 KV cache), and compares the .npy it writes with qwen3_reference.py's logits:
max|dlogit| <= 1e-3 * max(1, max|logit|). Also checks that --prompt TEXT writes [T, vocab].

Usage: check_logits_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import binary_and_work_dir, check_close, engine_logits, run  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402


def main():
    a = binary_and_work_dir()
    model = os.path.join(a.work_dir, "tiny-cli")
    run([a.binary, "make-test-model", "--preset", "tiny", "--seed", "3", "--out", model])

    ids = [9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5]
    out = os.path.join(a.work_dir, "cli_logits.npy")
    ref = Qwen3Reference(model).logits(ids)
    check_close(engine_logits(a.binary, model, ids, out), ref, "logits CLI")

    out2 = os.path.join(a.work_dir, "cli_prompt_logits.npy")
    run([a.binary, "logits", "--model", model, "--prompt", "Hello, world!", "--out", out2])
    got2 = np.load(out2)
    if got2.ndim != 2 or got2.shape[0] < 2 or got2.shape[1] != ref.shape[1]:
        sys.exit(f"--prompt logits have shape {got2.shape}")
    print("ok")


if __name__ == "__main__":
    main()
