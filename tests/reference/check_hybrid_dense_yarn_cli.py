#!/usr/bin/env python3
"""End-to-end check of two hybrid settings against qwen35_reference.py (which implements them from
transformers' semantics itself):

1. Dense Qwen3-Next layers (Qwen3NextDecoderLayer: layer i runs the sparse MoE iff i is not in
   mlp_only_layers, num_experts > 0 and (i + 1) % decoder_sparse_step == 0, else the dense MLP of
   intermediate_size). make-test-model's tiny-next-dense (decoder_sparse_step 2,
   mlp_only_layers [3]: layer 1 sparse, 0 / 2 / 3 dense):
     - `pypto-serving logits` in 5-token chunks (default `high`, fp32 KV) vs the reference:
       max|dlogit| <= 1e-3 * max(1, max|logit|); at --matmul-precision highest <= 1e-4 of it;
     - greedy tokens: one rank = the reference's; --tp 2 = one rank, float and int4 g8; --pp 2
       and --tp 2 --enable-expert-parallel = one rank;
       --speculative-config mtp (its dense MTP layer drafting) = the plain run's.
2. YaRN on the partial RoPE (rotary 8 of head_dim 32): on tiny-next-dense via Qwen3-Next's
   rope_scaling in config.json, and on tiny-hybrid (the Qwen3.5 wrapper) via
   text_config.rope_parameters {rope_type yarn, ...}:
     - logits vs the reference (within both bounds) and far from the same weights without YaRN;
     - the same setting through --hf-overrides gives the logits bit for bit (for the wrapper the
       nested {"text_config": {"rope_parameters": {...}}} form, merged key by key as vLLM does);
     - --max-model-len past factor x original_max_position_embeddings is refused naming the limit.
3. Bad values refused by name: mlp_only_layers out of range, a pattern that disagrees with the
   tensors (the missing dense tensor named), an unknown rope_type, a top-level rope override on
   the wrapper.

Usage: check_hybrid_dense_yarn_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_hybrid_logits_cli import PROMPTS, greedy  # noqa: E402
from cli_checks import binary_and_work_dir, check_close, engine_logits, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402

GREEDY = 12
# YaRN over an original context of 16 positions, factor 4: the 23-token prompt runs past the
# original context, and the limit becomes 64 positions (max_position_embeddings set to 16 too).
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
LIMIT = 64


def check_highest(binary, work, model, ids, ref, label):
    """At --matmul-precision highest (f32 activations) the engine computes what the reference does
    up to f32 rounding: held to 1e-4 of the logit range, ten times tighter than at `high`."""
    got = engine_logits(binary, model, ids, os.path.join(work, "highest.npy"), extra=("--matmul-precision", "highest"))
    diff, peak = float(np.abs(got - ref).max()), max(1.0, float(np.abs(ref).max()))
    print(f"{label}, highest: max|dlogit| = {diff:.3g} (bound {1e-4 * peak:.3g})")
    if not diff <= 1e-4 * peak:
        sys.exit(f"{label}: at --matmul-precision highest the engine disagrees with the reference")


def copy_with(src, dst, edit):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    path = os.path.join(dst, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    edit(cfg)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    return dst


def refused(cmd, *needles):
    """Runs cmd, which must fail with every needle in its stderr."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "(no stderr)"
    print(f"refused: {last[:300]}")
    if p.returncode == 0 or not all(n in p.stderr for n in needles):
        sys.exit(f"expected a refusal naming {needles} (exit {p.returncode}): {p.stderr[-2000:]}")


def check_yarn(binary, work, name, plain, edit, overrides, ids):
    """YaRN written into config.json by `edit` vs the reference; `overrides` (--hf-overrides on
    the plain checkpoint) must give the same logits; the positions limit follows."""
    yarn = copy_with(plain, os.path.join(work, f"{name}-yarn"), edit)
    got = engine_logits(binary, yarn, ids, os.path.join(work, f"{name}_yarn.npy"))
    ref = Qwen35Reference(yarn).logits(ids)
    _, bound = check_close(got, ref, f"{name} with YaRN, 5-token chunks")
    check_highest(binary, work, yarn, ids, ref, f"{name} with YaRN")
    plain_logits = engine_logits(binary, plain, ids, os.path.join(work, f"{name}_plain.npy"))
    moved = float(np.abs(plain_logits - got).max())
    print(f"{name}: plain RoPE vs YaRN on the same weights: max|dlogit| = {moved:.3g}")
    if not moved > 10 * bound:
        sys.exit(f"{name}: the YaRN logits barely differ from plain RoPE's: the scaling looks ignored")
    got_cli = engine_logits(binary, plain, ids, os.path.join(work, f"{name}_yarn_cli.npy"),
                            extra=("--hf-overrides", json.dumps(overrides)))
    if not np.array_equal(got_cli, got):
        sys.exit(f"{name}: --hf-overrides {overrides} gives other logits than the same setting in config.json")
    print(f"{name}: --hf-overrides = config.json, bit for bit")
    refused([binary, "--model", yarn, "--prompt", "hi", "--max-model-len", str(LIMIT + 1)],
            f"exceeds the model's {LIMIT} positions", "YaRN")


def main():
    a = binary_and_work_dir()
    binary, work = a.binary, a.work_dir
    ids = PROMPTS[0]

    # 1. Dense Qwen3-Next layers.
    model = os.path.join(work, "tiny-next-dense")
    run([binary, "make-test-model", "--preset", "tiny-next-dense", "--seed", "13", "--out", model])
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    if cfg["decoder_sparse_step"] != 2 or cfg["mlp_only_layers"] != [3]:
        sys.exit(f"tiny-next-dense: decoder_sparse_step {cfg['decoder_sparse_step']}, mlp_only_layers {cfg['mlp_only_layers']}")
    ref = Qwen35Reference(model)
    if [i for i in range(ref.n_layers) if ref.sparse(i)] != [1] or ref.sparse(0):
        sys.exit("tiny-next-dense: the reference's sparse layers are not [1]")
    got = engine_logits(binary, model, ids, os.path.join(work, "next_dense.npy"))
    want = ref.logits(ids)
    check_close(got, want, "tiny-next-dense (Qwen3-Next, dense layers 0, 2, 3), 5-token chunks")
    check_highest(binary, work, model, ids, want, "tiny-next-dense")

    prompts = PROMPTS[1:]
    one = greedy(binary, model, prompts, os.path.join(work, "dense_greedy.json"))
    for i, p in enumerate(prompts):
        want = ref.greedy(p, GREEDY)
        print(f"tiny-next-dense prompt {i}: engine {one[i]}, reference {want}")
        if one[i] != want:
            sys.exit(f"tiny-next-dense prompt {i}: greedy tokens differ from the reference")
    tp = ("--tp", "2", "--devices", "0,1")
    if greedy(binary, model, prompts, os.path.join(work, "dense_tp2.json"), tp) != one:
        sys.exit("tiny-next-dense: greedy tokens with --tp 2 differ from one rank's")
    for layout in (("--pp", "2", "--devices", "0,1"), tp + ("--enable-expert-parallel",)):
        if greedy(binary, model, prompts, os.path.join(work, "dense_layout.json"), layout) != one:
            sys.exit(f"tiny-next-dense: greedy tokens with {' '.join(layout)} differ from one rank's")
    q = ("--quantization", "int4", "--quantization-group", "8")
    one_q = greedy(binary, model, prompts, os.path.join(work, "dense_int4.json"), q)
    if greedy(binary, model, prompts, os.path.join(work, "dense_int4_tp2.json"), q + tp) != one_q:
        sys.exit("tiny-next-dense: int4 greedy tokens with --tp 2 differ from one rank's")
    spec = ("--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 2}))
    if greedy(binary, model, prompts, os.path.join(work, "dense_mtp.json"), spec) != one:
        sys.exit("tiny-next-dense: greedy tokens with the MTP head drafting differ from the plain run's")
    print(f"tiny-next-dense: --tp 2 = one rank (float {one}, int4 {one_q}); --pp 2, expert parallel and MTP "
          "drafting = plain")

    # 2. YaRN on the partial RoPE.
    def next_yarn(c):
        c["rope_scaling"] = YARN
        c["max_position_embeddings"] = 16

    check_yarn(binary, work, "tiny-next-dense", model, next_yarn,
               {"rope_scaling": YARN, "max_position_embeddings": 16}, ids)
    hybrid = os.path.join(work, "tiny-hybrid")
    run([binary, "make-test-model", "--preset", "tiny-hybrid", "--seed", "7", "--out", hybrid])

    def qwen35_yarn(c):
        c["text_config"]["rope_parameters"].update(YARN)
        c["text_config"]["max_position_embeddings"] = 16

    check_yarn(binary, work, "tiny-hybrid", hybrid, qwen35_yarn,
               {"text_config": {"rope_parameters": YARN, "max_position_embeddings": 16}}, ids)

    # 3. Bad values, refused by name.
    short = ids[:3]
    logits_cmd = [binary, "logits", "--model", model, "--token-ids", ",".join(map(str, short)),
                  "--out", os.path.join(work, "refused.npy"), "--threads", "2"]
    refused(logits_cmd + ["--hf-overrides", json.dumps({"mlp_only_layers": [3, 4]})],
            "'mlp_only_layers' lists layer 4, outside [0, num_hidden_layers = 4)")
    refused(logits_cmd + ["--hf-overrides", json.dumps({"mlp_only_layers": [1, 3]})],
            "model.layers.1.mlp.gate_proj.weight: missing")
    refused(logits_cmd + ["--hf-overrides", json.dumps({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})],
            "'rope_scaling.rope_type' is 'dynamic'")
    hybrid_cmd = [binary, "logits", "--model", hybrid, "--token-ids", ",".join(map(str, short)),
                  "--out", os.path.join(work, "refused.npy"), "--threads", "2"]
    refused(hybrid_cmd + ["--hf-overrides", json.dumps({"text_config": {"rope_parameters": {"rope_type": "llama3"}}})],
            "'rope_parameters.rope_type' is 'llama3'")
    refused(hybrid_cmd + ["--hf-overrides", json.dumps({"rope_scaling": YARN})],
            "'rope_scaling' at the top level is not read", "text_config")
    print("ok")


if __name__ == "__main__":
    main()
