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
YaRN factor 4 over an original context of T / 4 (so the prompt fills the extended context), chunks
of 1024, the default `high` precision, for each KV cache dtype of --kv-dtypes (bf16, int8, fp8):
the last 8 positions' logits (`logits --last 8`) against the reference storing its keys and values
the same way (kv_quant_reference.py; run in chunks with its cache) and against the reference with
fp32 keys and values, within KV_BOUNDS (bf16 against bf16: the issue's 1e-3 of max|logit|); and,
for T up to 8192, 16 greedy tokens after the prompt with fp32 KV (offline mode) equal to the
reference's.

Usage: check_yarn_logits.py --binary PATH/pypto-serving --work-dir DIR [--long T] [--skip-short]
                            [--kv-dtypes bf16,int8,fp8]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import check_close, engine_logits, run  # noqa: E402
import kv_quant_reference  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}


def logits(binary, model, ids, out, extra=()):
    return engine_logits(binary, model, ids, out, chunk=64, extra=extra)


KV_BOUNDS = {
    # dtype: (bound on the engine against the reference storing K/V the same way, bound against the
    # reference's fp32 K/V), both as a share of max|logit|. bf16 against its own rounding is the
    # issue's bar (1e-3). An 8-bit code can land on the neighbouring code where the engine's K/V
    # row (other matmul kernels) differs from the reference's by a rounding, so the 8-bit matched
    # bounds leave room for that (measured at 3,072 tokens: 2.8e-4 int8, 5.2e-4 fp8); the fp32
    # column bounds the whole error each cache adds (measured: bf16 1.1e-3, int8 4.0e-3, fp8
    # 1.8e-2), about 4x above it.
    "bf16": (1e-3, 5e-3),
    "int8": (2e-3, 2e-2),
    "fp8": (5e-3, 8e-2),
}


def reference_run(model_dir, ids, last, kv_dtype, greedy=0, chunk=512):
    """The reference's logits [last, vocab] at the end of `ids` with K/V stored as `kv_dtype` (None:
    fp32), in chunks with its cache (the prefix's hidden states only: no lm_head over it), and
    `greedy` greedy next tokens after the whole prompt."""
    ref = Qwen3Reference(model_dir, kv_dtype=kv_dtype)
    caches = [dict() for _ in ref.layers]
    first = len(ids) - last
    start = 0
    while start < first:
        end = min(start + chunk, first)
        ref.hidden_states(ids[start:end], caches, start)
        start = end
    logits = ref.forward(ids[first:], caches, first)
    out = logits.numpy().astype(np.float32)
    toks, pos = [], len(ids)
    for _ in range(greedy):
        top2 = torch.topk(logits[-1], 2).values
        toks.append((int(torch.argmax(logits[-1]).item()), float(top2[0] - top2[1])))
        logits = ref.forward([toks[-1][0]], caches, pos)
        pos += 1
    return out, toks


def engine_greedy(a, model, ids, n, kv):
    """The binary's greedy continuation (offline mode, default precision) of `ids`, n tokens."""
    out = os.path.join(a.work_dir, f"greedy-{len(ids)}-{kv}.json")
    run([a.binary, "--model", model, "--prompt-token-ids", ",".join(map(str, ids)), "--kv-cache-dtype", kv,
         "--kv-cache-memory", "64MiB", "--max-model-len", str(len(ids) + n), "--threads", "2",
         "--output-json", out, "--generate-config",
         json.dumps({"max_new_tokens": n, "temperature": 0, "ignore_eos": True})], stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["results"][0]["token_ids"]


def check_long(a, T):
    """YaRN over a T-token prompt: the last 8 positions' logits with each KV dtype against the
    reference storing K/V the same way and against its fp32 K/V (KV_BOUNDS), and (T small enough
    for the command line) the greedy continuation with fp32 KV equal to the reference's."""
    kv_quant_reference._self_check()  # the reference's E4M3 rounding on every code and midpoint
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
    n_greedy = 16 if T <= 8192 else 0  # the ids go on the command line (128 KiB per argument)
    ref32, ref_greedy = reference_run(model, ids, 8, None, greedy=n_greedy)
    failed = []
    for kv in a.kv_dtypes.split(","):
        out = os.path.join(a.work_dir, f"long-{T}-{kv}.npy")
        run([a.binary, "logits", "--model", model, "--token-ids-file", ids_file, "--out", out, "--last", "8",
             "--kv-cache-dtype", kv, "--chunk", "1024", "--threads", "2"])
        got = np.load(out)
        ref, _ = reference_run(model, ids, 8, kv)
        if got.shape != ref.shape:
            sys.exit(f"--last 8 wrote {got.shape}, the reference has {ref.shape}")
        scale = max(1.0, float(np.abs(ref32).max()))
        same, full = float(np.abs(got - ref).max()), float(np.abs(got - ref32).max())
        b_same, b_full = KV_BOUNDS["fp8" if kv.startswith("fp8") else kv]
        top1 = int((got.argmax(1) == ref32.argmax(1)).sum())
        print(f"YaRN {T} tokens, {kv} KV, last 8 positions (max|logit| {scale:.3g}): against the reference "
              f"with {kv} K/V max|dlogit| {same:.3g} = {same / scale:.2g} of it (bound {b_same:g}); against its "
              f"fp32 K/V {full:.3g} = {full / scale:.2g} (bound {b_full:g}); top-1 as fp32 K/V {top1}/8", flush=True)
        if not (same <= b_same * scale and full <= b_full * scale):
            failed.append(kv)
    if failed:
        sys.exit(f"YaRN logits at {T} tokens disagree with the reference beyond the bound: {failed}")
    if n_greedy:
        got = engine_greedy(a, model, ids, n_greedy, "fp32")
        want = [t for t, _ in ref_greedy]
        print(f"greedy {n_greedy} after {T} tokens, fp32 KV: engine {got}, reference {want} "
              f"(smallest top-1 margin {min(m for _, m in ref_greedy):.3g})")
        if got != want:
            sys.exit(f"the greedy continuation after {T} tokens differs from the reference")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--long", type=int, default=0, help="also check a prompt of this many tokens (bf16 KV)")
    ap.add_argument("--skip-short", action="store_true", help="only the --long check")
    ap.add_argument("--kv-dtypes", default="bf16,int8,fp8", help="KV cache dtypes the --long check runs")
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
