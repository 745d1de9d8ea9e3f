#!/usr/bin/env python3
"""End-to-end check of the Qwen3.5 / Qwen3.6 hybrids (Gated DeltaNet + gated attention) against
qwen35_reference.py: makes tiny-hybrid (dense, the published vision-language wrapper layout) and
tiny-hybrid-moe (MoE with the shared expert, the text-only Qwen3_5MoeForCausalLM layout) with the
binary's make-test-model, and for each:
  - `pypto-serving logits` (default `high` precision, fp32 KV) in 5-token chunks vs the reference:
    max|dlogit| <= 1e-3 * max(1, max|logit|);
  - the same prompt unchunked gives the same logits bit for bit (the recurrent state carried from
    chunk to chunk is the state one pass computes);
  - greedy continuations from offline mode: three prompts run together (one batch, several GDN
    state slots) equal each prompt run alone, and equal the reference's greedy tokens;
  - the batch with --tp 2 (rank threads) equals one rank's, with float and with int4 weights;
  - so does the batch through pipeline stages (--pp 2 in micro-batches, one stage per layer,
    --pp 2 x --tp 2, int4 --pp 2), and on the MoE model --tp 2 --enable-expert-parallel (whole
    experts per rank), float and int4.

Usage: check_hybrid_logits_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import binary_and_work_dir, check_close, engine_logits, offline_greedy, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402

PROMPTS = [
    [9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77, 1, 2, 3, 60000, 1234, 151643],
    [785, 6722, 315, 9625, 374, 12095, 13, 576, 6722, 315],
    [40, 1075, 311, 1349, 6467, 323, 3736, 16178, 12, 5, 99, 1000, 20000, 30000, 40000, 50000, 7],
]
GREEDY = 12


def greedy(binary, model, prompts, out, extra=()):
    return [r["token_ids"] for r in offline_greedy(binary, model, prompts, out, GREEDY, 256, ("--max-num-seqs", "4", *extra))]


def check_model(binary, work, preset, extra, arch):
    model = os.path.join(work, preset)
    run([binary, "make-test-model", "--preset", preset, "--seed", "7", "--out", model, *extra])
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    if cfg["architectures"] != [arch]:
        sys.exit(f"{preset}: architectures {cfg['architectures']}, expected [{arch}]")
    ref = Qwen35Reference(model)
    ids = PROMPTS[0]
    chunked = engine_logits(binary, model, ids, os.path.join(work, f"{preset}_chunked.npy"))
    check_close(chunked, ref.logits(ids), f"{preset} ({arch}), 5-token chunks")
    whole = engine_logits(binary, model, ids, os.path.join(work, f"{preset}_whole.npy"), chunk=0)
    if not np.array_equal(chunked, whole):
        sys.exit(f"{preset}: chunked prefill differs from one pass (max |d| {np.abs(chunked - whole).max():.3g})")
    print(f"{preset}: chunked prefill = one pass, bit for bit")

    together = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_batched.json"))
    for i, p in enumerate(PROMPTS):
        alone = greedy(binary, model, [p], os.path.join(work, f"{preset}_alone_{i}.json"))[0]
        want = ref.greedy(p, GREEDY)
        print(f"{preset} prompt {i}: batched {together[i]}, alone {alone}, reference {want}")
        if together[i] != alone:
            sys.exit(f"{preset} prompt {i}: greedy tokens batched differ from alone")
        if alone != want:
            sys.exit(f"{preset} prompt {i}: greedy tokens differ from the reference")
    # Tensor parallelism (threads): each rank holds half the attention heads, GDN key heads with
    # their value heads, MLP / expert columns and vocabulary, and the batch equals one rank's.
    tp2 = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_tp2.json"), ("--tp", "2", "--devices", "0,1"))
    print(f"{preset} --tp 2: {tp2}")
    if tp2 != together:
        sys.exit(f"{preset}: greedy tokens with --tp 2 differ from one rank's")
    # The same with int4 weights (groups of 8: a rank's down_proj columns are whole groups).
    q = ("--quantization", "int4", "--quantization-group", "8")
    one = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_int4.json"), q)
    two = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_int4_tp2.json"), q + ("--tp", "2", "--devices", "0,1"))
    print(f"{preset} int4: one rank {one}, --tp 2 {two}")
    if two != one:
        sys.exit(f"{preset}: int4 greedy tokens with --tp 2 differ from one rank's")
    # Pipeline stages (threads): each stage holds its layers and their GDN states; the three
    # prompts go through in two micro-batches, each carrying its sequences' state slots. A stage
    # computes its layers exactly as one rank does, so the tokens are one rank's; so with --tp 2
    # inside each stage, and with the last stage holding only the full-attention layer.
    layers = cfg.get("text_config", cfg)["num_hidden_layers"]
    for extra in (("--pp", "2", "--devices", "0,1", "--pp-micro-batches", "2"),
                  ("--pp", str(layers), "--devices", ",".join(map(str, range(layers))), "--cpu-oversubscribe"),
                  ("--pp", "2", "--tp", "2", "--devices", "0,1,2,3", "--cpu-oversubscribe")):
        got = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_pp.json"), extra)
        print(f"{preset} {' '.join(extra[:4])}: {got}")
        if got != together:
            sys.exit(f"{preset}: greedy tokens with {' '.join(extra)} differ from one rank's")
    got = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_int4_pp.json"), q + ("--pp", "2", "--devices", "0,1"))
    if got != one:
        sys.exit(f"{preset}: int4 greedy tokens with --pp 2 differ from one rank's")
    if "Moe" in arch:
        # Expert parallelism: each rank holds half the routed experts whole (attention, GDN and the
        # shared expert split as under --tp); float and int4.
        ep = ("--tp", "2", "--devices", "0,1", "--enable-expert-parallel")
        got = greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_ep.json"), ep)
        print(f"{preset} --tp 2 --enable-expert-parallel: {got}")
        if got != together:
            sys.exit(f"{preset}: greedy tokens with --tp 2 --enable-expert-parallel differ from one rank's")
        if greedy(binary, model, PROMPTS, os.path.join(work, f"{preset}_int4_ep.json"), q + ep) != one:
            sys.exit(f"{preset}: int4 greedy tokens with --enable-expert-parallel differ from one rank's")


def main():
    a = binary_and_work_dir()
    check_model(a.binary, a.work_dir, "tiny-hybrid", [], "Qwen3_5ForConditionalGeneration")
    check_model(a.binary, a.work_dir, "tiny-hybrid-moe", ["--text-only"], "Qwen3_5MoeForCausalLM")
    print("ok")


if __name__ == "__main__":
    main()
