#!/usr/bin/env python3
"""The pre-quantized checkpoints make-test-model writes, checked three ways:

1. the engine's decoders (`pypto-serving inspect --dequantize`, src/model/quantized_source.cpp)
   give bit for bit the weights dequantize.py gets with the published formulas;
2. those weights are a faithful quantization of the bf16 checkpoint of the same seed: FP8 within
   half an E4M3 step, |dW| <= 2^-4 |W| + scale * 2^-10; AWQ and GPTQ within a step, |dW| <= scale
   (half a step, scale / 2, except where the 4-bit range clamps);
3. `pypto-serving logits` on them (staged in their own format) against the PyTorch reference
   that dequantizes them: with f32 activations (--matmul-precision highest) max|dlogit| <=
   1e-3 * max(1, max|logit|), and the same at high, the default (AWQ's int4 weights then take
   16-bit activations, two bf16); at medium (int8 activations for AWQ / GPTQ) the figure is printed (it
   must stay under 5e-2 of the range, loose enough for int8 activations, tight enough to catch a
   wrong scale);
   the reference's logits are also printed beside the bf16 checkpoint's (the quantization error).

For a Qwen3-MoE preset (tiny-moe) the projections of a sparse layer are its attention and its
experts (the first and the last expert's three in step 1; every expert is in the logits of step
3), and the router must stay an unquantized `.weight` in the checkpoint. At medium the router's
own product takes 8-bit (one bf16) activations, so a near-tie between the k-th and the next
expert can flip and move a logit by O(1): the medium figure is printed, not held, for MoE.

Usage: check_prequantized_cli.py --binary PATH/pypto-serving --work-dir DIR [--preset tiny] [--layers 2]
           [--formats fp8,awq,gptq]
           [--no-logits]   (skip 3: the 14B shape's embeddings alone are 3 GB in fp32)
"""
import json
import argparse
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_reader import read_checkpoint  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402

ATTENTION = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"]
DENSE_MLP = ["mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
QUANTIZED_SUFFIXES = {"fp8": (".weight", ".weight_scale_inv"), "awq": (".qweight", ".qzeros", ".scales"),
                      "gptq": (".qweight", ".qzeros", ".scales", ".g_idx")}


def sparse_layer(cfg, i):
    """transformers' Qwen3-MoE rule: layer i is sparse iff it is not in mlp_only_layers and
    (i + 1) % decoder_sparse_step == 0."""
    experts = cfg.get("num_experts", cfg.get("num_local_experts", 0))
    step = cfg.get("decoder_sparse_step", 1)
    return experts > 0 and i not in cfg.get("mlp_only_layers", []) and step > 0 and (i + 1) % step == 0


def layer_projections(cfg, i):
    if not sparse_layer(cfg, i):
        return ATTENTION + DENSE_MLP
    experts = cfg.get("num_experts", cfg.get("num_local_experts", 0))
    return ATTENTION + [f"mlp.experts.{e}.{p}" for e in sorted({0, experts - 1})
                        for p in ("gate_proj", "up_proj", "down_proj")]


def run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--layers", default="2")
    ap.add_argument("--formats", default="fp8,awq,gptq")
    ap.add_argument("--no-logits", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work_dir, exist_ok=True)
    base = os.path.join(a.work_dir, f"{a.preset}-bf16")
    common = ["--preset", a.preset, "--layers", a.layers, "--seed", "5"]
    run([a.binary, "make-test-model", *common, "--out", base])
    failures = []
    ids = [9707, 11, 1879, 0, 374, 264, 1273, 13]
    ref_logits = None if a.no_logits else Qwen3Reference(base).logits(ids)
    for fmt in a.formats.split(","):
        model = os.path.join(a.work_dir, f"{a.preset}-{fmt}")
        run([a.binary, "make-test-model", *common, "--quant-format", fmt, "--out", model])
        with open(os.path.join(model, "config.json")) as f:
            cfg = json.load(f)
        worst = 0.0
        checked = 0
        for layer in range(int(a.layers)):
            if sparse_layer(cfg, layer):
                router = f"model.layers.{layer}.mlp.gate.weight"
                _, rt = read_checkpoint(model, names={router, router + "_scale_inv"}, dequantize=False)
                if set(rt) != {router} or rt[router].dtype == torch.int32 or \
                        tuple(rt[router].shape) != (cfg["num_experts"], cfg["hidden_size"]):
                    failures.append(f"{fmt} {router}: the router must stay an unquantized [experts, hidden] .weight")
            for p in layer_projections(cfg, layer):
                proj = f"model.layers.{layer}.{p}"
                out = os.path.join(a.work_dir, f"{fmt}-{proj}.npy")
                run([a.binary, "inspect", "--model", model, "--dequantize", proj, "--out", out])
                engine = np.load(out)
                checked += 1
                quantized = [proj + s for s in QUANTIZED_SUFFIXES[fmt]]
                _, raw = read_checkpoint(model, names=set(quantized), dequantize=False)
                _, deq = read_checkpoint(model, names=set(quantized))
                ours = deq[proj + ".weight"].numpy()
                _, src = read_checkpoint(base, names={proj + ".weight"})
                w = src[proj + ".weight"].numpy()
                if engine.shape != ours.shape or not np.array_equal(engine, ours):
                    bad = np.argwhere(engine != ours)
                    failures.append(f"{fmt} {proj}: engine {engine.shape} differs from dequantize.py {ours.shape}"
                                    f" (first at {bad[0].tolist() if len(bad) else '-'})")
                    continue
                err = np.abs(ours - w)
                if fmt == "fp8":
                    bn = bk = 128
                    s = raw[proj + ".weight_scale_inv"].numpy()
                    s = np.repeat(np.repeat(s, bn, 0), bk, 1)[: w.shape[0], : w.shape[1]]
                    bound = 2.0 ** -4 * np.abs(w) + s * 2.0 ** -10
                else:
                    g = w.shape[1] // raw[proj + ".scales"].shape[0]
                    s = np.repeat(raw[proj + ".scales"].numpy(), g, 0).T
                    bound = s
                    half = float(np.mean(err <= 0.5 * s * (1 + 1e-3)))
                    if half < 0.99:
                        failures.append(f"{fmt} {proj}: only {half:.4f} of the weights within half a step")
                ratio = float(np.max(err / bound))
                worst = max(worst, ratio)
                if not ratio <= 1.0 + 1e-6:
                    failures.append(f"{fmt} {proj}: |dW| reaches {ratio:.3f} x its bound")
        print(f"{fmt}: engine decoders == dequantize.py on {checked} projections; "
              f"worst |dW| / bound vs bf16 = {worst:.3f}", flush=True)
        if ref_logits is None:
            continue
        logits = Qwen3Reference(model).logits(ids)
        bound = 1e-3 * max(1.0, float(np.abs(logits).max()))
        medium_limit = float("inf") if any(sparse_layer(cfg, i) for i in range(int(a.layers))) else 50 * bound
        for precision, limit in (("highest", bound), ("high", bound), ("medium", medium_limit)):
            out = os.path.join(a.work_dir, f"{fmt}-logits-{precision}.npy")
            run([a.binary, "logits", "--model", model, "--token-ids", ",".join(map(str, ids)), "--out", out,
                 "--kv-cache-dtype", "fp32", "--chunk", "3", "--threads", "2", "--matmul-precision", precision])
            got = np.load(out)
            diff = float(np.abs(got - logits).max()) if got.shape == logits.shape else float("inf")
            print(f"{fmt}: engine logits (--matmul-precision {precision}) vs the dequantizing reference: "
                  f"max|dlogit| = {diff:.3g} = {diff / (bound * 1e3):.2e} of the range (limit {limit / (bound * 1e3):.0e})")
            if not diff <= limit:
                failures.append(f"{fmt}: engine logits at {precision} differ from the reference by {diff:.3g}")
        rel = float(np.abs(logits - ref_logits).max() / np.abs(ref_logits).max())
        top1 = float(np.mean(logits.argmax(-1) == ref_logits.argmax(-1)))
        print(f"{fmt}: reference logits vs the bf16 checkpoint's: max|dlogit| / max|logit| = {rel:.4f}, "
              f"top-1 agreement {top1:.2f} over {len(ids)} positions")
        if not np.isfinite(logits).all():
            failures.append(f"{fmt}: reference logits not finite")
    if failures:
        sys.exit("\n".join(failures))
    print("ok")


if __name__ == "__main__":
    main()
