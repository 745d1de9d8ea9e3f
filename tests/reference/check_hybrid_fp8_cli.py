#!/usr/bin/env python3
"""Block-FP8 checkpoints of the hybrids (Qwen's Qwen3.6-27B-FP8 / Qwen3.6-35B-A3B-FP8 form:
quantization_config quant_method fp8, 128 x 128 e4m3 tiles with `<proj>.weight_scale_inv`), as
make-test-model --quant-format fp8 writes them: the projections in FP8, the GDN's b / a rows, the
router, the shared expert's gate, the embedding and lm_head in bf16. For tiny-hybrid (wrapper,
dense), tiny-hybrid-moe (text-only, per-expert FP8 experts, shared expert) and tiny-next
(Qwen3-Next's fused per-key-head projections in FP8):
  1. `pypto-serving inspect --dequantize` of a GDN input projection and an attention projection
     equals, bit for bit, what dequantize.py computes with the published formula (codes x tile scale);
  2. `pypto-serving logits` (FP8 weights staged as stored, f32 activations) in 5-token chunks
     against qwen35_reference.py on the dequantized weights (checkpoint_reader dequantizes them
     itself): max|dlogit| <= 1e-3 * max(1, max|logit|) (the unquantized bound, tighter than the
     issue's 1e-2 for quantized checkpoints: the codes are staged exactly and multiplied with f32
     activations), and beside it the distance to the bf16 checkpoint of the same seed (what the
     quantization moves, so the check sees it);
  3. greedy continuations of two prompts batched equal the reference's.

Usage: check_hybrid_fp8_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_hybrid_logits_cli import PROMPTS, greedy  # noqa: E402
from checkpoint_reader import read_checkpoint  # noqa: E402
from cli_checks import binary_and_work_dir, engine_logits, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402

GREEDY = 12


def check_model(binary, work, preset, extra, gdn_proj):
    model = os.path.join(work, preset + "-fp8")
    run([binary, "make-test-model", "--preset", preset, "--seed", "5", "--quant-format", "fp8", "--out", model, *extra])
    plain = os.path.join(work, preset + "-bf16")
    run([binary, "make-test-model", "--preset", preset, "--seed", "5", "--out", plain, *extra])
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("quantization_config", {}).get("quant_method") != "fp8":
        sys.exit(f"{preset}: no fp8 quantization_config in config.json")
    prefix = "model.language_model." if "text_config" in cfg else "model."
    _, raw = read_checkpoint(model, dequantize=False)
    _, deq = read_checkpoint(model)
    # 1. the engine's decoder = the published formula, bit for bit
    for proj in (f"{prefix}layers.0.linear_attn.{gdn_proj}", f"{prefix}layers.1.self_attn.q_proj"):
        if proj + ".weight_scale_inv" not in raw:
            sys.exit(f"{preset}: {proj} is not stored as block FP8")
        out = os.path.join(work, f"{preset}_deq.npy")
        run([binary, "inspect", "--model", model, "--dequantize", proj, "--out", out])
        got, want = np.load(out), deq[proj + ".weight"].numpy()
        if got.shape != want.shape or not np.array_equal(got, want):
            sys.exit(f"{preset}: inspect --dequantize {proj} differs from dequantize.py")
    for kept in ("mlp.gate.weight", "mlp.shared_expert_gate.weight", "linear_attn.in_proj_ba.weight",
                 "linear_attn.in_proj_b.weight"):
        name = f"{prefix}layers.0.{kept}"
        if name in raw and name + "_scale_inv" in raw:
            sys.exit(f"{preset}: {name} should stay bf16")
    print(f"{preset}: inspect --dequantize = dequantize.py bit for bit")

    # 2. logits against the reference on the dequantized weights
    ids = PROMPTS[0]
    ref = Qwen35Reference(model)
    want = ref.logits(ids)
    got = engine_logits(binary, model, ids, os.path.join(work, f"{preset}_fp8.npy"))
    scale = max(1.0, float(np.abs(want).max()))
    diff = float(np.abs(got - want).max())
    quant_move = float(np.abs(Qwen35Reference(plain).logits(ids) - want).max())
    print(f"{preset} fp8: max|dlogit| = {diff:.3g} = {diff / scale:.2g} of max|logit| {scale:.3g} "
          f"(bound 1e-3); the bf16 checkpoint's logits are {quant_move:.3g} away")
    if got.shape != want.shape or not diff <= 1e-3 * scale:
        sys.exit(f"{preset}: FP8 logits disagree with the reference")

    # 3. greedy
    prompts = PROMPTS[1:]
    together = greedy(binary, model, prompts, os.path.join(work, f"{preset}_fp8_greedy.json"))
    for i, p in enumerate(prompts):
        ref_ids = ref.greedy(p, GREEDY)
        print(f"{preset} fp8 prompt {i}: engine {together[i]}, reference {ref_ids}")
        if together[i] != ref_ids:
            sys.exit(f"{preset} fp8 prompt {i}: greedy tokens differ from the reference")


def main():
    a = binary_and_work_dir()
    check_model(a.binary, a.work_dir, "tiny-hybrid", [], "in_proj_qkv")
    check_model(a.binary, a.work_dir, "tiny-hybrid-moe", ["--text-only"], "in_proj_qkv")
    check_model(a.binary, a.work_dir, "tiny-next", [], "in_proj_qkvz")
    print("ok")


if __name__ == "__main__":
    main()
