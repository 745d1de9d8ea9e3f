#!/usr/bin/env python3
"""--gdn-prefill chunked (the chunked WY form of the gated delta rule on prefill rows, whole
64-token chunks; model/gdn_prefill.h) against qwen35_reference.py (the recurrent rule), on
tiny-hybrid (d_k 16, d_v 32: the kernel's smallest head dims) with a 150-token prompt (2 whole
chunks and a 22-row tail):
  - `pypto-serving logits` in one pass with the flag: within the default path's bound,
    max|dlogit| <= 1e-3 * max(1, max|logit|), and not bit-equal to the default path (the flag
    takes effect);
  - in 64-token calls: bit-equal to one pass (a split at a multiple of 64 is one call's bits);
    in 100-token calls (chunked prefill across a chunk): within the bound;
  - offline greedy tokens of three prompts (150, 140, 90 tokens) with the flag, batched, with
    chunked prefill (--max-num-batched-tokens 96) and as a prefix-cached resume (a 250-token prompt
    extending the first one, --max-num-seqs 1: its resume prefills >= 64 new rows), equal to the
    default path's and the reference's;
  - at --matmul-precision medium on a CPU with AVX512_BF16 (the chunked kernel's products on bf16
    operands, VDPBF16PS): one pass moves the logits from medium's recurrent path by no more than
    medium's recurrent path is from the reference (the bf16 products cost no more than medium's
    own rounding);
  - bad values are refused naming --gdn-prefill: an unknown value (offline and logits), the
    flag on the scalar reference kernels (no chunked kernel there) and on a dense Qwen3 model.

Usage: check_hybrid_gdn_chunked_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import binary_and_work_dir, check_close, engine_logits, offline_greedy, run  # noqa: E402
from qwen35_reference import Qwen35Reference  # noqa: E402


def prompt(n, seed):
    return [(1000 + seed * 131 + i * 7919) % 150000 for i in range(n)]


PROMPTS = [prompt(150, 0), prompt(140, 1), prompt(90, 2)]
RESUMED = PROMPTS[0] + prompt(100, 3)  # extends PROMPTS[0]: a prefix-cache hit, then >= 64 new rows
GREEDY = 12
CHUNKED = ("--gdn-prefill", "chunked")
MEDIUM = ("--matmul-precision", "medium")


def has_avx512_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and "avx512_bf16" in line.split() for line in f)
    except OSError:
        return False


def offline(binary, model, prompts, out, extra=()):
    """Greedy tokens and cached prompt tokens per prompt."""
    res = offline_greedy(binary, model, prompts, out, GREEDY, 512, extra)
    return [r["token_ids"] for r in res], [r.get("num_cached_tokens", 0) for r in res]


def refused(cmd, needle):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 0 or needle not in p.stderr + p.stdout:
        sys.exit(f"expected a refusal naming '{needle}', got rc {p.returncode}: {p.stderr[-400:]}")
    print(f"refused (rc {p.returncode}): {(p.stderr + p.stdout).strip().splitlines()[-1]}")


def main():
    a = binary_and_work_dir()
    binary, work = a.binary, a.work_dir
    model = os.path.join(work, "tiny-hybrid")
    run([binary, "make-test-model", "--preset", "tiny-hybrid", "--seed", "7", "--out", model])
    ref = Qwen35Reference(model)

    ids = PROMPTS[0]
    want = ref.logits(ids)
    out = lambda name: os.path.join(work, name)  # noqa: E731
    recurrent = engine_logits(binary, model, ids, out("recurrent.npy"), chunk=0)
    check_close(recurrent, want, "tiny-hybrid --gdn-prefill recurrent, one pass")
    whole = engine_logits(binary, model, ids, out("chunked_whole.npy"), chunk=0, extra=CHUNKED)
    check_close(whole, want, "tiny-hybrid --gdn-prefill chunked, one pass")
    if np.array_equal(whole, recurrent):
        sys.exit("--gdn-prefill chunked gave the recurrent path's bits: the flag did not take effect")
    print(f"chunked vs recurrent: max |d| {float(np.abs(whole - recurrent).max()):.3g}")
    by64 = engine_logits(binary, model, ids, out("chunked_64.npy"), chunk=64, extra=CHUNKED)
    if not np.array_equal(by64, whole):
        sys.exit(f"--gdn-prefill chunked in 64-token calls differs from one pass (max |d| {np.abs(by64 - whole).max():.3g})")
    print("chunked, 64-token calls = one pass, bit for bit")
    by100 = engine_logits(binary, model, ids, out("chunked_100.npy"), chunk=100, extra=CHUNKED)
    check_close(by100, want, "tiny-hybrid --gdn-prefill chunked, 100-token calls")

    wanted = [ref.greedy(p, GREEDY) for p in PROMPTS]
    if has_avx512_bf16():
        # Medium itself (bf16 x in the linears, embedding and lm_head) moves this random tiny
        # model's logits far past the 1e-3 bound; the bf16 products of the chunked kernel must cost
        # no more than that on top of medium's recurrent path.
        med_rec = engine_logits(binary, model, ids, out("recurrent_medium.npy"), chunk=0, extra=MEDIUM)
        med_chk = engine_logits(binary, model, ids, out("chunked_medium.npy"), chunk=0, extra=CHUNKED + MEDIUM)
        d_medium, d_kernel = float(np.abs(med_rec - want).max()), float(np.abs(med_chk - med_rec).max())
        print(f"--matmul-precision medium: recurrent vs reference max|dlogit| {d_medium:.3g}; chunked (bf16 "
              f"products) vs recurrent {d_kernel:.3g}; f32 chunked vs recurrent at high "
              f"{float(np.abs(whole - recurrent).max()):.3g}")
        if not (np.isfinite(d_kernel) and d_kernel <= d_medium):
            sys.exit("--gdn-prefill chunked at medium precision moves the logits more than medium itself does")
    else:
        print("no AVX512_BF16: the medium-precision (bf16 products) check is skipped")
    default, _ = offline(binary, model, PROMPTS, out("default.json"), ("--max-num-seqs", "4"))
    runs = {
        "chunked, batched": CHUNKED + ("--max-num-seqs", "4"),
        "chunked, chunked prefill (96-token steps)": CHUNKED + ("--max-num-seqs", "4", "--max-num-batched-tokens", "96"),
    }
    for label, extra in runs.items():
        got, _ = offline(binary, model, PROMPTS, out("chunked.json"), extra)
        for i in range(len(PROMPTS)):
            print(f"prompt {i} ({len(PROMPTS[i])} tokens): {label} {got[i]}, recurrent {default[i]}, reference {wanted[i]}")
            if default[i] != wanted[i]:
                sys.exit(f"prompt {i}: the default path's greedy tokens differ from the reference")
            if got[i] != wanted[i]:
                sys.exit(f"prompt {i}: greedy tokens with --gdn-prefill {label} differ from the reference")

    # Prefix-cached resume: the second prompt resumes from the first one's state snapshot.
    got, cached = offline(binary, model, [PROMPTS[0], RESUMED], out("resume.json"), CHUNKED + ("--max-num-seqs", "1"))
    want_resumed = ref.greedy(RESUMED, GREEDY)
    print(f"resumed ({len(RESUMED)} tokens, {cached[1]} from the cache): {got[1]}, reference {want_resumed}")
    if cached[1] < 64 or len(RESUMED) - cached[1] < 64:
        sys.exit(f"the resume served {cached[1]} of {len(RESUMED)} tokens from the cache; expected a hit leaving >= 64 rows")
    if got[0] != wanted[0] or got[1] != want_resumed:
        sys.exit("greedy tokens of a prefix-cached resume with --gdn-prefill chunked differ from the reference")

    refused([binary, "--model", model, "--prompt-token-ids", "1,2,3", "--gdn-prefill", "fast"], "--gdn-prefill")
    refused([binary, "logits", "--model", model, "--token-ids", "1,2,3", "--out", out("x.npy"), "--gdn-prefill", "fast"],
            "--gdn-prefill")
    refused([binary, "logits", "--model", model, "--token-ids", "1,2,3", "--out", out("x.npy"), "--scalar-kernels",
             *CHUNKED], "--gdn-prefill chunked")
    dense = os.path.join(work, "tiny")
    run([binary, "make-test-model", "--preset", "tiny", "--seed", "7", "--out", dense])
    refused([binary, "--model", dense, "--prompt-token-ids", "1,2,3", *CHUNKED], "--gdn-prefill chunked")
    print("ok")


if __name__ == "__main__":
    main()
