#!/usr/bin/env python3
"""YaRN end to end: a tiny test model whose config.json asks for YaRN (factor 4 over an original
context of 64 tokens, so 300 positions run far past it and every head's ramp between extrapolated
and interpolated frequencies is in use), `pypto-serving logits` on 300 token ids in chunks of 64
(fp32 KV) against qwen3_reference.py, which reads the same rope_scaling through
rope_reference.py: max|dlogit| <= 1e-3 * max(1, max|logit|). The same ids on the model without
rope_scaling must differ from the YaRN logits by far more than that bound (the setting is used),
the same rope_scaling given as --hf-overrides must give the same logits bit for bit, and
--max-model-len past the model's positions must be refused with the limit named.

With --long T (CI: 3072; 32768 by hand) it also checks a T-token prompt through a model with
YaRN factor 4 over an original context of T / 4 (so the prompt fills the extended context), bf16
KV cache, chunks of 1024, the default `high` precision: the last 8 positions' logits
(`logits --last 8`) against the reference with bf16-rounded keys and values (run in chunks with its
cache), max|dlogit| <= 1e-3 * max(1, max|logit|).

Usage: check_yarn_logits.py --binary PATH/pypto-serving --work-dir DIR [--long T] [--skip-short]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import check_close, engine_logits, run  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


def logits(binary, model, ids, out, extra=()):
    return engine_logits(binary, model, ids, out, chunk=64, extra=extra)


def reference_last(model_dir, ids, last, chunk=512):
    """The reference's logits [last, vocab] at the end of `ids`, bf16 KV, in chunks with its cache."""
    ref = Qwen3Reference(model_dir, kv_bf16=True)
    caches = [dict() for _ in ref.layers]
    first = len(ids) - last
    start = 0
    while start < first:
        end = min(start + chunk, first)
        ref.forward(ids[start:end], caches, start)
        start = end
    return ref.forward(ids[first:], caches, first).numpy().astype(np.float32)


def check_long(a, T):
    model = os.path.join(a.work_dir, f"tiny-yarn-{T}")
    run([a.binary, "make-test-model", "--preset", "tiny", "--seed", "7", "--out", model])
    cfg_path = os.path.join(model, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": T // 4}
    cfg["max_position_embeddings"] = max(cfg["max_position_embeddings"], T)
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    ids = [(i * 104729 + 7) % 151000 for i in range(T)]
    ids_file = os.path.join(a.work_dir, f"ids-{T}.txt")
    with open(ids_file, "w") as f:
        f.write(",".join(map(str, ids)) + "\n")
    out = os.path.join(a.work_dir, f"long-{T}.npy")
    run([a.binary, "logits", "--model", model, "--token-ids-file", ids_file, "--out", out, "--last", "8",
         "--kv-cache-dtype", "bf16", "--chunk", "1024", "--threads", "2"])
    got = np.load(out)
    ref = reference_last(model, ids, 8)
    if got.shape != ref.shape:
        sys.exit(f"--last 8 wrote {got.shape}, the reference has {ref.shape}")
    diff = float(np.abs(got - ref).max())
    bound = 1e-3 * max(1.0, float(np.abs(ref).max()))
    print(f"YaRN {T} tokens, bf16 KV, last 8 positions: max|dlogit| = {diff:.3g} (bound {bound:.3g}), "
          f"max|logit| {float(np.abs(ref).max()):.3g}, top-1 equal {int((got.argmax(1) == ref.argmax(1)).sum())}/8")
    if not diff <= bound:
        sys.exit(f"YaRN logits at {T} tokens disagree with the reference")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--long", type=int, default=0, help="also check a prompt of this many tokens (bf16 KV)")
    ap.add_argument("--skip-short", action="store_true", help="only the --long check")
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    if a.long:
        check_long(a, a.long)
    if a.skip_short:
        return
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
    _, bound = check_close(got, ref, "YaRN logits, 300 positions, fp32 KV")
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
