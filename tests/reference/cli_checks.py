"""Shared steps of the scripts that run the binary and hold its logits against the reference:
their command line (--binary, --work-dir), running a command with its line echoed, `pypto-serving logits` on token ids, offline greedy runs, and the bound
max|dlogit| <= 1e-3 * max(1, max|logit|)."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np


def binary_and_work_dir():
    """--binary (the pypto-serving executable) and --work-dir (created when missing)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    return a


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def engine_logits(binary, model, ids, out, chunk=5, kv="fp32", extra=()):
    """`pypto-serving logits` on `ids` in chunks, 2 threads; the .npy it wrote."""
    run([binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)), "--out", out,
         "--kv-cache-dtype", kv, "--chunk", str(chunk), "--threads", "2", *extra])
    return np.load(out)


def check_close(got, ref, label):
    """Exits naming `label` unless got and ref have one shape, float32, and agree within the bound."""
    if got.shape != ref.shape or got.dtype != np.float32:
        sys.exit(f"{label}: shape/dtype {got.shape} {got.dtype}, reference {ref.shape} float32")
    diff = float(np.abs(got - ref).max())
    bound = 1e-3 * max(1.0, float(np.abs(ref).max()))
    print(f"{label}: max|dlogit| = {diff:.3g} (bound {bound:.3g}, max|logit| {float(np.abs(ref).max()):.3g})")
    if not diff <= bound:
        sys.exit(f"{label}: the engine disagrees with the reference")
    return diff, bound


def offline_greedy(binary, model, prompts, out, tokens, max_model_len, extra=()):
    """Offline greedy decoding of `prompts` (token id lists), `tokens` new tokens each, 2 threads,
    fp32 KV as the references keep it (random-weight logits have near-ties, a 0.01 margin, that
    bf16 K/V rounding alone can flip); the results of --output-json, one per prompt."""
    cmd = [binary, "--model", model, "--kv-cache-dtype", "fp32", "--kv-cache-memory", "64MiB",
           "--max-model-len", str(max_model_len), "--threads", "2", "--output-json", out, "--generate-config",
           json.dumps({"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True}), *extra]
    for p in prompts:
        cmd += ["--prompt-token-ids", ",".join(map(str, p))]
    run(cmd)
    with open(out) as f:
        return json.load(f)["results"]
