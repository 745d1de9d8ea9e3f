#!/usr/bin/env python3
"""End-to-end check of Qwen3-MoE (Qwen3MoeForCausalLM) against the PyTorch reference: makes the
tiny-moe test model with the binary's make-test-model (sparse layers 0 and 2, dense layer 1), asks
`pypto-serving logits` for a prompt's logits (in chunks, fp32 KV cache) and compares them with
qwen3_reference.py's: max|dlogit| <= 1e-3 * max(1, max|logit|). Runs twice: as written
(norm_topk_prob true, as every published Qwen3-MoE config) and with norm_topk_prob false (the
transformers class default), so both weightings are held to the reference; and a 16-token greedy
continuation from offline mode equal to the reference's.

Usage: check_moe_logits_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import binary_and_work_dir, check_close, engine_logits, run  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402


def compare(binary, model, ids, out, label):
    check_close(engine_logits(binary, model, ids, out), Qwen3Reference(model).logits(ids), label)


def main():
    a = binary_and_work_dir()
    model = os.path.join(a.work_dir, "tiny-moe")
    run([a.binary, "make-test-model", "--preset", "tiny-moe", "--seed", "5", "--out", model])
    cfg_path = os.path.join(model, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    if cfg["architectures"] != ["Qwen3MoeForCausalLM"] or cfg["mlp_only_layers"] != [1]:
        sys.exit(f"tiny-moe config is not the expected shape: {cfg}")

    # 23 tokens: more than one 5-token chunk, and with top-2 of 8 most experts see several rows.
    ids = [9707, 11, 1879, 0, 151642, 374, 264, 1273, 13, 42, 7, 100000, 5, 311, 8, 4194, 77, 1, 2, 3, 60000,
           1234, 151643]
    compare(a.binary, model, ids, os.path.join(a.work_dir, "moe_logits.npy"), "tiny-moe, norm_topk_prob true")
    # Greedy continuation of the prompt (offline mode, default precision) equals the reference's.
    out = os.path.join(a.work_dir, "moe_greedy.json")
    run([a.binary, "--model", model, "--prompt-token-ids", ",".join(map(str, ids)), "--kv-cache-memory", "64MiB",
         "--max-model-len", "256", "--output-json", out, "--generate-config",
         json.dumps({"max_new_tokens": 16, "temperature": 0, "ignore_eos": True})])
    with open(out) as f:
        got = json.load(f)["results"][0]["token_ids"]
    want = Qwen3Reference(model).greedy(ids, 16)
    print(f"tiny-moe greedy: engine {got}, reference {want}")
    if got != want:
        sys.exit("tiny-moe greedy continuation differs from the reference")

    cfg["norm_topk_prob"] = False
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    compare(a.binary, model, ids, os.path.join(a.work_dir, "moe_logits_nonorm.npy"), "tiny-moe, norm_topk_prob false")
    print("ok")


if __name__ == "__main__":
    main()
