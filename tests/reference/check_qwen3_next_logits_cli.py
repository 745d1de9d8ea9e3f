#!/usr/bin/env python3
"""End-to-end check of Qwen3-Next checkpoints (Qwen3NextForCausalLM: the GDN input projections
fused per key head in in_proj_qkvz / in_proj_ba, per-expert tensors, Qwen3-Next's config keys)
against qwen35_reference.py, which splits the fused projections itself from transformers'
semantics (not through the engine's regrouping). On make-test-model's tiny-next:
  - `pypto-serving logits` (default `high`, fp32 KV) in 5-token chunks vs the reference:
    max|dlogit| <= 1e-3 * max(1, max|logit|);
  - greedy continuations: two prompts batched = each alone = the reference's; the batch with
    --tp 2 (each rank regroups its own key heads' rows) equals one rank's, float and int4;
  - the same checkpoint with norm_topk_prob false in config.json (Qwen3-Next keeps it as a flag):
    logits vs the reference, and they differ from the renormalised ones (the flag is read).

Usage: check_qwen3_next_logits_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_hybrid_logits_cli import PROMPTS, greedy  # noqa: E402
from cli_checks import binary_and_work_dir, check_close, engine_logits, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402

GREEDY = 12


def main():
    a = binary_and_work_dir()
    binary, work = a.binary, a.work_dir
    model = os.path.join(work, "tiny-next")
    run([binary, "make-test-model", "--preset", "tiny-next", "--seed", "11", "--out", model])
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    if cfg["architectures"] != ["Qwen3NextForCausalLM"] or cfg["model_type"] != "qwen3_next":
        sys.exit(f"tiny-next: architectures {cfg['architectures']}, model_type {cfg.get('model_type')}")
    ref = Qwen35Reference(model)
    ids = PROMPTS[0]
    got = engine_logits(binary, model, ids, os.path.join(work, "next_chunked.npy"))
    check_close(got, ref.logits(ids), "tiny-next (Qwen3NextForCausalLM), 5-token chunks")

    prompts = PROMPTS[1:]
    together = greedy(binary, model, prompts, os.path.join(work, "next_batched.json"))
    for i, p in enumerate(prompts):
        alone = greedy(binary, model, [p], os.path.join(work, f"next_alone_{i}.json"))[0]
        want = ref.greedy(p, GREEDY)
        print(f"tiny-next prompt {i}: batched {together[i]}, alone {alone}, reference {want}")
        if together[i] != alone:
            sys.exit(f"tiny-next prompt {i}: greedy tokens batched differ from alone")
        if alone != want:
            sys.exit(f"tiny-next prompt {i}: greedy tokens differ from the reference")
    tp = ("--tp", "2", "--devices", "0,1")
    if greedy(binary, model, prompts, os.path.join(work, "next_tp2.json"), tp) != together:
        sys.exit("tiny-next: greedy tokens with --tp 2 differ from one rank's")
    q = ("--quantization", "int4", "--quantization-group", "8")
    one = greedy(binary, model, prompts, os.path.join(work, "next_int4.json"), q)
    if greedy(binary, model, prompts, os.path.join(work, "next_int4_tp2.json"), q + tp) != one:
        sys.exit("tiny-next: int4 greedy tokens with --tp 2 differ from one rank's")
    print(f"tiny-next --tp 2 = one rank (float {together}, int4 {one})")

    # norm_topk_prob false: the top-k probabilities are used as the softmax gave them.
    flat = os.path.join(work, "tiny-next-no-renorm")
    shutil.rmtree(flat, ignore_errors=True)
    shutil.copytree(model, flat)
    cfg["norm_topk_prob"] = False
    with open(os.path.join(flat, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    got_flat = engine_logits(binary, flat, ids, os.path.join(work, "next_no_renorm.npy"))
    check_close(got_flat, Qwen35Reference(flat).logits(ids), "tiny-next, norm_topk_prob false")
    if np.abs(got_flat - got).max() < 1e-2:
        sys.exit("tiny-next: norm_topk_prob false gives the renormalised logits (the flag is not read)")
    print("ok")


if __name__ == "__main__":
    main()
