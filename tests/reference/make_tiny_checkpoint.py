#!/usr/bin/env python3
"""Development helper: writes a tiny random-weight Qwen3 (or Qwen2 with --qwen2) checkpoint in
Hugging Face layout (config.json + model.safetensors). The CI tests use the project's
`pypto-serving make-test-model`; this exists so the reference can be exercised on its own.
"""
import argparse
import json
import os
import struct

import numpy as np


def to_bytes(arr: np.ndarray, dtype: str) -> bytes:
    a = arr.astype(np.float32)
    if dtype == "BF16":
        u = a.view(np.uint32)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
        return u.astype(np.uint16).tobytes()
    if dtype == "F16":
        return a.astype(np.float16).tobytes()
    return a.tobytes()


def write_safetensors(path: str, tensors: dict, dtype: str):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        b = to_bytes(arr, dtype)
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--inter", type=int, default=96)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dtype", default="BF16", choices=["BF16", "F16", "F32"])
    ap.add_argument("--qwen2", action="store_true")
    ap.add_argument("--tie", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    H, hd, nq, nkv = a.hidden, a.head_dim, a.heads, a.kv_heads

    def lin(n, k):
        return rng.standard_normal((n, k)).astype(np.float32) / np.sqrt(k)

    def norm(d):
        return (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)

    t = {"model.embed_tokens.weight": rng.standard_normal((a.vocab, H)).astype(np.float32)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        t[p + "self_attn.q_proj.weight"] = lin(nq * hd, H)
        t[p + "self_attn.k_proj.weight"] = lin(nkv * hd, H)
        t[p + "self_attn.v_proj.weight"] = lin(nkv * hd, H)
        t[p + "self_attn.o_proj.weight"] = lin(H, nq * hd)
        if a.qwen2:
            for n, d in (("q", nq * hd), ("k", nkv * hd), ("v", nkv * hd)):
                t[p + f"self_attn.{n}_proj.bias"] = 0.1 * rng.standard_normal(d).astype(np.float32)
        else:
            t[p + "self_attn.q_norm.weight"] = norm(hd)
            t[p + "self_attn.k_norm.weight"] = norm(hd)
        t[p + "mlp.gate_proj.weight"] = lin(a.inter, H)
        t[p + "mlp.up_proj.weight"] = lin(a.inter, H)
        t[p + "mlp.down_proj.weight"] = lin(H, a.inter)
    t["model.norm.weight"] = norm(H)
    if not a.tie:
        t["lm_head.weight"] = lin(a.vocab, H)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), t, a.dtype)
    cfg = {
        "architectures": ["Qwen2ForCausalLM" if a.qwen2 else "Qwen3ForCausalLM"],
        "model_type": "qwen2" if a.qwen2 else "qwen3",
        "vocab_size": a.vocab, "hidden_size": H, "intermediate_size": a.inter,
        "num_hidden_layers": a.layers, "num_attention_heads": nq, "num_key_value_heads": nkv,
        "head_dim": hd, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "max_position_embeddings": 4096, "tie_word_embeddings": a.tie, "attention_bias": False,
        "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[a.dtype],
        "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
    }
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


if __name__ == "__main__":
    main()
