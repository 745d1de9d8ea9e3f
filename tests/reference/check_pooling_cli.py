#!/usr/bin/env python3
"""End-to-end check of embeddings and reranker scores (issue 32) against the PyTorch reference,
through `pypto-serving embed`:

  - tiny-embedding (Qwen3-Embedding's layout: flat names, no lm_head, sentence-transformers
    files, <|endoftext|> post-processor) and tiny-embedding-untied (tie false, still no lm_head):
    each text gets exactly one 151643 appended (its other ids are `tokenize`'s), token-id inputs
    are used as given; every vector against the reference's final-normed hidden state of the last
    token, L2-normalised: cosine >= 0.99999 (f32 products, fp32 KV); --dimensions 32 against
    normalize(h[:32]) (slice first, then normalise);
  - batch invariance, bit for bit: every input alone, all together, and chunked (an 8-token
    budget), and again with a prefix-cache hit;
  - tiny-reranker with --runner rerank: the prompt's ids are tokenize's ids of the published
    prefix, middle and suffix (the middle cut at its end under --max-model-len, the suffix kept);
    the two logits against h . W[no], h . W[yes] of the reference (and its full-vocabulary logits),
    the score against softmax([no, yes])[yes]; the scores must spread (a swapped yes/no fails);
  - runner errors: a headless checkpoint with --runner generate, a reranker without --runner.

Usage: check_pooling_cli.py --binary PATH/pypto-serving --work-dir DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_checks import binary_and_work_dir, run  # noqa: E402
from qwen3_reference import Qwen3Reference  # noqa: E402

EOS = 151643
PRECISE = ["--matmul-precision", "highest", "--kv-cache-dtype", "fp32", "--threads", "2"]
PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
          "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def tokenize(binary, model, texts):
    """tokenize's ids of each text (no special tokens), one process for all."""
    out = subprocess.run([binary, "tokenize", "--model", model], input="".join(json.dumps({"text": t}) + "\n" for t in texts),
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line)["ids"] for line in out.splitlines()]


def embed(binary, model, lines, out, extra=()):
    path = out + ".in.jsonl"
    with open(path, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    run([binary, "embed", "--model", model, "--input", path, "--out", out, *PRECISE, *extra])
    if out.endswith(".npy"):
        return np.load(out)
    with open(out) as f:
        return [json.loads(line) for line in f]


def cosine(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def check_embedding_model(a, preset, seed):
    model = os.path.join(a.work_dir, preset)
    run([a.binary, "make-test-model", "--preset", preset, "--seed", str(seed), "--out", model])
    ref = Qwen3Reference(model)
    if not ref.headless:
        sys.exit(f"{preset}: the checkpoint is not in the flat, headless layout")
    texts = ["Hello, world!", "What is the capital of China?",
             "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:Gravity",
             "The quick brown fox jumps over the lazy dog. " * 4]
    token_input = [9707, 11, 1879, 0, 151642, 374, 264]  # used as given: no EOS appended
    lines = [{"text": t} for t in texts] + [{"token_ids": token_input}]
    got = embed(a.binary, model, lines, os.path.join(a.work_dir, preset + ".jsonl"), ["--with-token-ids"])
    plain = tokenize(a.binary, model, texts)
    for i, t in enumerate(texts):
        if got[i]["token_ids"] != plain[i] + [EOS]:
            sys.exit(f"{preset} text {i}: ids {got[i]['token_ids']} are not tokenize's {plain[i]} + [{EOS}]")
    if got[-1]["token_ids"] != token_input:
        sys.exit(f"{preset}: token-id input became {got[-1]['token_ids']}")
    worst = 1.0
    refs = []
    for i, g in enumerate(got):
        h = ref.hidden_states(g["token_ids"])[-1].double()
        refs.append(h)
        e = (h / h.norm()).numpy()
        c = cosine(g["embedding"], e)
        n = float(np.linalg.norm(np.asarray(g["embedding"], np.float64)))
        print(f"{preset} input {i}: {len(g['token_ids'])} tokens, cosine {c:.9f}, |v| {n:.7f}")
        if abs(n - 1) > 1e-5:
            sys.exit(f"{preset} input {i}: the vector is not unit length ({n})")
        worst = min(worst, c)
    if not worst >= 0.99999:
        sys.exit(f"{preset}: cosine {worst} < 0.99999 against the reference")
    # The vectors differ from each other (a constant output would pass the cosines above only if
    # the reference were constant too; this makes the check meaningful).
    if cosine(got[0]["embedding"], got[1]["embedding"]) > 0.999:
        sys.exit(f"{preset}: different inputs gave the same vector")
    # Matryoshka: first 32 values, then normalised (not the normalised vector cut).
    d32 = embed(a.binary, model, lines[:2], os.path.join(a.work_dir, preset + "_d32.jsonl"), ["--dimensions", "32"])
    for i, g in enumerate(d32):
        h = refs[i][:32]
        c = cosine(g["embedding"], (h / h.norm()).numpy())
        if len(g["embedding"]) != 32 or not c >= 0.99999 or abs(np.linalg.norm(g["embedding"]) - 1) > 1e-5:
            sys.exit(f"{preset} --dimensions 32 input {i}: {len(g['embedding'])} values, cosine {c}")
    print(f"{preset}: embeddings ok (worst cosine {worst:.9f}); --dimensions 32 ok")
    return model, lines


def check_batch_invariance(a, model, lines):
    together = embed(a.binary, model, lines, os.path.join(a.work_dir, "together.npy"))
    chunked = embed(a.binary, model, lines, os.path.join(a.work_dir, "chunked.npy"),
                    ["--max-num-batched-tokens", "8", "--long-prefill-token-threshold", "8", "--max-num-seqs", "8"])
    alone = np.concatenate([embed(a.binary, model, [line], os.path.join(a.work_dir, f"alone{i}.npy"))
                            for i, line in enumerate(lines)])
    # Prefix cache: the long input twice after a shorter one with its first blocks (a hit).
    long_line = lines[3]
    cached = embed(a.binary, model, [long_line, long_line], os.path.join(a.work_dir, "cached.npy"),
                   ["--max-num-seqs", "1"])
    for name, got in (("chunked", chunked), ("alone", alone)):
        if not np.array_equal(got, together):
            sys.exit(f"batch invariance: {name} differs from batched by {np.abs(got - together).max()}")
    if not (np.array_equal(cached[0], together[3]) and np.array_equal(cached[1], together[3])):
        sys.exit("batch invariance: a prefix-cache hit changed the vector")
    print("batch invariance: alone = batched = chunked = prefix-cached, bit for bit")


def check_reranker(a):
    model = os.path.join(a.work_dir, "tiny-reranker")
    run([a.binary, "make-test-model", "--preset", "tiny-reranker", "--seed", "7", "--out", model])
    ref = Qwen3Reference(model)
    yes, no = tokenize(a.binary, model, ["yes", "no"])
    if yes != [9693] or no != [2152]:
        sys.exit(f"'yes' / 'no' are {yes} / {no}, not one token each (9693 / 2152)")
    pairs = [("what is panda?", "The giant panda is a bear species endemic to China.", None),
             ("what is panda?", "Paris is the capital of France.", None),
             ("capital of France", "Paris is the capital of France.", "Find the city asked for"),
             ("gravity", "Gravity is a force that attracts two bodies towards each other. " * 3, None),
             ("quantum", "Le chat est sur la table.", None),
             ("1 + 1", "2", "Judge arithmetic")]
    lines = [{"query": q, "document": d, **({"instruction": i} if i else {})} for q, d, i in pairs]
    got = embed(a.binary, model, lines, os.path.join(a.work_dir, "rerank.jsonl"),
                ["--runner", "rerank", "--with-token-ids"])
    W = ref.embed  # tiny-reranker is tied (as Qwen3-Reranker-0.6B); the full logits below use lm_head
    diffs = []
    for k, (g, (q, d, instr)) in enumerate(zip(got, pairs)):
        middle = f"<Instruct>: {instr or DEFAULT_INSTRUCTION}\n<Query>: {q}\n<Document>: {d}"
        p, m, s = tokenize(a.binary, model, [PREFIX, middle, SUFFIX])
        if g["token_ids"] != p + m + s:
            sys.exit(f"rerank pair {k}: prompt ids differ from tokenize's prefix + middle + suffix")
        ids = g["token_ids"]
        h = ref.hidden_states(ids)[-1].double()
        l_no, l_yes = float(h @ W[2152].double()), float(h @ W[9693].double())
        full = ref.forward(ids)[-1]
        if abs(float(full[9693]) - l_yes) > 1e-3 or abs(float(full[2152]) - l_no) > 1e-3:
            sys.exit(f"rerank pair {k}: the reference's two rows disagree with its full logits")
        p_yes = float(torch.softmax(torch.tensor([l_no, l_yes], dtype=torch.float64), 0)[1])
        dl = max(abs(g["logits"][0] - l_no), abs(g["logits"][1] - l_yes))
        print(f"rerank pair {k}: logits no {g['logits'][0]:.5f} yes {g['logits'][1]:.5f} (reference {l_no:.5f} "
              f"{l_yes:.5f}), score {g['score']:.6f} (reference {p_yes:.6f})")
        if dl > 1e-3 * max(1.0, abs(l_no), abs(l_yes)) or abs(g["score"] - p_yes) > 1e-4:
            sys.exit(f"rerank pair {k}: the engine disagrees with the reference")
        diffs.append(l_yes - l_no)
    if max(diffs) - min(diffs) < 0.5:
        sys.exit(f"rerank: logit differences {diffs} hardly spread; the test could not see a swap")
    # Truncation: the middle is cut at its end, the suffix stays.
    short = embed(a.binary, model, [lines[3]], os.path.join(a.work_dir, "rerank_cut.jsonl"),
                  ["--runner", "rerank", "--with-token-ids", "--max-model-len", "96"])
    ids = short[0]["token_ids"]
    p, m, s = tokenize(a.binary, model, [PREFIX, f"<Instruct>: {DEFAULT_INSTRUCTION}\n<Query>: {pairs[3][0]}\n"
                                                 f"<Document>: {pairs[3][1]}", SUFFIX])
    if len(ids) != 96 or ids != p + m[:96 - len(p) - len(s)] + s:
        sys.exit(f"rerank truncation: {len(ids)} ids, not prefix + the middle's head + suffix in 96")
    print("reranker: prompt ids, logits, scores and truncation ok")
    return model


def expect_failure(cmd, must_mention):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0 or must_mention not in r.stderr:
        sys.exit(f"{' '.join(cmd)}: expected a failure mentioning {must_mention!r}, got rc {r.returncode}: {r.stderr[-400:]}")
    print(f"refused as expected: ...{must_mention}...")


def main():
    a = binary_and_work_dir()
    model, lines = check_embedding_model(a, "tiny-embedding", 5)
    check_embedding_model(a, "tiny-embedding-untied", 6)
    check_batch_invariance(a, model, lines)
    reranker = check_reranker(a)
    out = os.path.join(a.work_dir, "never.jsonl")
    expect_failure([a.binary, "embed", "--model", model, "--runner", "generate", "--text", "x", "--out", out],
                   "--runner pooling")
    expect_failure([a.binary, "embed", "--model", reranker, "--text", "x", "--out", out], "--runner rerank")
    print("ok")


if __name__ == "__main__":
    main()
