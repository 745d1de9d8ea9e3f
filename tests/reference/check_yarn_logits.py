#!/usr/bin/env python3
"""YaRN end to end: a tiny test model whose config.json asks for YaRN (factor 4 over an original
context of 64 tokens, so 300 positions run far past it and every head's ramp between extrapolated
and interpolated frequencies is in use), `pypto-serving logits` on 300 token ids in chunks of 64
(fp32 KV) against qwen3_reference.py, which reads the same rope_scaling through
rope_reference.py: max|dlogit| <= 1e-3 * max(1, max|logit|). The same ids on the model without
rope_scaling must differ from the YaRN logits by far more than that bound (the setting is used),
the same rope_scaling given as --hf-overrides must give the same logits bit for bit, and
--max-model-len past the model's positions must be refused with the limit named.

Usage: check_yarn_logits.py --binary PATH/pypto-serving --work-dir DIR
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_reference import Qwen3Reference  # noqa: E402

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def logits(binary, model, ids, out, extra=()):
    run([binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)), "--out", out,
         "--kv-cache-dtype", "fp32", "--chunk", "64", "--threads", "2", *extra])
    return np.load(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    plain = os.path.join(a.work_dir, "tiny-plain")
    yarn = os.path.join(a.work_dir, "tiny-yarn")
    for d in (plain, yarn):
        run([a.binary, "make-test-model", "--preset", "tiny", "--seed", "5", "--out", d])
    cfg_path = os.path.join(yarn, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["rope_scaling"] = YARN
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)

    ids = [(i * 7919 + 13) % 150000 for i in range(300)]
    got = logits(a.binary, yarn, ids, os.path.join(a.work_dir, "yarn.npy"))
    ref = Qwen3Reference(yarn).logits(ids)
    diff = float(np.abs(got - ref).max())
    bound = 1e-3 * max(1.0, float(np.abs(ref).max()))
    print(f"YaRN logits: max|dlogit| = {diff:.3g} (bound {bound:.3g}), max|logit| {float(np.abs(ref).max()):.3g}")
    if not diff <= bound:
        sys.exit("YaRN logits disagree with the reference")
    # The same rope_scaling given on the command line (vLLM's --hf-overrides) over the plain model:
    # the same logits, bit for bit.
    overrides = json.dumps({"rope_scaling": YARN})
    got_cli = logits(a.binary, plain, ids, os.path.join(a.work_dir, "yarn_cli.npy"), ("--hf-overrides", overrides))
    if not np.array_equal(got_cli, got):
        sys.exit("--hf-overrides rope_scaling gives other logits than the same rope_scaling in config.json")
    got_plain = logits(a.binary, plain, ids, os.path.join(a.work_dir, "plain.npy"))
    moved = float(np.abs(got_plain - got).max())
    print(f"plain RoPE vs YaRN on the same weights: max|dlogit| = {moved:.3g}")
    if not moved > 10 * bound:
        sys.exit("the YaRN model's logits barely differ from plain RoPE's: rope_scaling looks ignored")

    # The positions limit: YaRN's factor x original (256) is below max_position_embeddings here, so
    # the limit stays max_position_embeddings; one past it is refused, naming it.
    limit = max(cfg["max_position_embeddings"], int(YARN["factor"] * YARN["original_max_position_embeddings"]))
    p = subprocess.run([a.binary, "--model", plain, "--hf-overrides", overrides, "--prompt", "hi",
                        "--max-model-len", str(limit + 1)], capture_output=True, text=True)
    print(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "(no stderr)")
    if p.returncode == 0 or f"exceeds the model's {limit} positions" not in p.stderr:
        sys.exit(f"--max-model-len {limit + 1} was not refused with the limit named (exit {p.returncode})")


if __name__ == "__main__":
    main()
