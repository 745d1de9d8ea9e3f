#!/usr/bin/env python3
"""`pypto-serving logits --quantization int8|int4` on the Qwen3.5 / Qwen3.6 hybrids against
qwen35_reference.py run on the same quantized weights. The reference quantizes and dequantizes
the checkpoint's tensors itself, from the formats' definitions (check_quantized_logits.py's
quantize_int8 / quantize_int4, per row, and per row and group for int4), independently of the
engine's code. What the engine quantizes, and so what the reference quantizes here:
  - embed_tokens and lm_head; attention q/k/v/o_proj; the GDN's in_proj_qkv, in_proj_z and
    out_proj; the MLP, each routed expert (per-expert 2-D or fused 3-D tensors, row by row) and
    the shared expert's gate/up/down_proj;
  - not: the GDN's in_proj_b / in_proj_a, the router (mlp.gate) and shared_expert_gate, nor any
    norm, conv, A_log or dt_bias.
Checks at `highest` (f32 activations) and `high`, the default (16-bit: bf16x2, or int16 blocks on
AVX2): max|dlogit| <= 1e-3 of
the logit range, on tiny-hybrid (dense, the published wrapper layout) and tiny-hybrid-moe (the
text-only MoE layout), 5-token chunks, fp32 KV. It also shows the check can fail: the engine's
int4 logits against the reference on the unquantized weights must exceed the bound.

Usage: check_hybrid_quantized_logits.py --binary PATH/pypto-serving --work-dir DIR
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_quantized_logits import quantize_int4, quantize_int8  # noqa: E402
from cli_checks import binary_and_work_dir, check_close, engine_logits, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402

IDS = [9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77]
GROUP = 16  # divides every k of the tiny presets (64, 128, 32, 48)
QUANTIZED = ("embed_tokens.weight", "lm_head.weight", "q_proj.weight", "k_proj.weight", "v_proj.weight",
             "o_proj.weight", "in_proj_qkv.weight", "in_proj_z.weight", "out_proj.weight", "gate_proj.weight",
             "up_proj.weight", "down_proj.weight", "experts.gate_up_proj", "experts.down_proj")


def transform_for(fmt):
    def transform(name, w):
        if name.startswith("model.visual.") or name.startswith("mtp.") or not name.endswith(QUANTIZED):
            return w
        flat = w.float().reshape(-1, w.shape[-1])  # 3-D experts [E, n, k]: each expert's rows
        q = quantize_int8(flat) if fmt == "int8" else quantize_int4(flat, GROUP)
        return q.reshape(w.shape)
    return transform


def main():
    a = binary_and_work_dir()
    for preset, extra in (("tiny-hybrid", []), ("tiny-hybrid-moe", ["--text-only"])):
        model = os.path.join(a.work_dir, preset + "-q")
        run([a.binary, "make-test-model", "--preset", preset, "--seed", "11", "--out", model, *extra])
        plain = Qwen35Reference(model).logits(IDS)
        for fmt in ("int8", "int4"):
            ref = Qwen35Reference(model, transform=transform_for(fmt)).logits(IDS)
            for precision in ("highest", "high"):
                got = engine_logits(a.binary, model, IDS, os.path.join(a.work_dir, f"{preset}_{fmt}_{precision}.npy"),
                                    extra=("--quantization", fmt, "--quantization-group", str(GROUP),
                                           "--matmul-precision", precision))
                check_close(got, ref, f"{preset} {fmt} weights, {precision}")
                if fmt == "int4" and precision == "high":
                    # The same logits against the unquantized reference: int4 must show (else the
                    # engine did not quantize and the check above proves nothing).
                    err = float(np.abs(got - plain).max())
                    bound = 1e-3 * max(1.0, float(np.abs(plain).max()))
                    print(f"{preset} int4 vs the unquantized reference: max|dlogit| = {err:.3g} (must exceed {bound:.3g})")
                    if not err > bound:
                        sys.exit(f"{preset}: int4 logits equal the unquantized ones; nothing was quantized")
    print("ok")


if __name__ == "__main__":
    main()
