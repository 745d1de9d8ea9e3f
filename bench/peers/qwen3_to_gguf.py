#!/usr/bin/python3
"""Writes a pypto-serving test checkpoint (Hugging Face Qwen3 or Qwen3-MoE layout, bf16 safetensors)
as a bf16 GGUF file, so llama.cpp can run the same weights side by side with pypto-serving
(bench/peers/). A Qwen3-MoE checkpoint becomes llama.cpp's `qwen3moe` architecture: the router as
ffn_gate_inp, each layer's experts stacked into ffn_{gate,up,down}_exps [E, out, in].

Uses the `gguf` Python package that ships inside a llama.cpp checkout (give its gguf-py folder
with --gguf-py, or put it on PYTHONPATH); reads safetensors and tokenizer.json with the standard
library and numpy only, so no transformers install is needed.

  python3 bench/peers/qwen3_to_gguf.py --model DIR --out model-bf16.gguf --gguf-py LLAMA/gguf-py
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(model_dir):
    """name -> (dtype string, shape, numpy uint8 view of the bytes), over every shard."""
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        sys.exit(f"{model_dir}: no .safetensors files")
    out = {}
    for f in files:
        path = os.path.join(model_dir, f)
        with open(path, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], data[b:e])
    return out


def as_bf16_bytes(dtype, shape, raw):
    """The tensor as bf16 bytes (uint8, last dim × 2): converts F32/F16 by round-to-nearest-even."""
    if dtype == "BF16":
        return raw.reshape(*shape[:-1], shape[-1] * 2)
    f32 = raw.view(np.float32) if dtype == "F32" else raw.view(np.float16).astype(np.float32)
    u = f32.view(np.uint32).astype(np.uint64)
    bf = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bf.view(np.uint8).reshape(*shape[:-1], shape[-1] * 2)


def add_vocab(w, gguf, cfg, tok):
    """Byte-level BPE vocabulary: ids 0..vocab-1, added tokens marked control, the rest padded."""
    vocab_size = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [gguf.TokenType.UNUSED] * vocab_size
    for t, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = t, gguf.TokenType.NORMAL
    for at in tok.get("added_tokens", []):
        i = at["id"]
        if i < vocab_size:
            tokens[i] = at["content"]
            types[i] = gguf.TokenType.CONTROL if at.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = cfg.get("eos_token_id", 151645)
    w.add_eos_token_id(eos if isinstance(eos, int) else eos[0])
    w.add_pad_token_id(151643)
    w.add_bos_token_id(151643)
    w.add_add_bos_token(False)


def as_f32(dtype, shape, raw):
    """The tensor as a float32 numpy array of `shape`."""
    data = raw.view({"BF16": np.uint16, "F16": np.float16, "F32": np.float32}[dtype])
    if dtype == "BF16":
        data = (data.astype(np.uint32) << 16).view(np.float32)
    return np.ascontiguousarray(data.astype(np.float32)).reshape(shape)


def write_out(w, path):
    """Header, metadata and the tensors added so far to `path`; closes the writer."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {path}", file=sys.stderr)


def parse_args(description, extra=None):
    """--model, --out and --gguf-py (and the options `extra(parser)` adds); returns (args, the gguf
    module from --gguf-py or the path)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gguf-py", help="llama.cpp's gguf-py folder (else gguf must be importable)")
    if extra:
        extra(ap)
    a = ap.parse_args()
    if a.gguf_py:
        sys.path.insert(0, a.gguf_py)
    import gguf  # noqa: E402

    return a, gguf


def main():
    a, gguf = parse_args(__doc__.splitlines()[0])
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    tok = json.load(open(os.path.join(a.model, "tokenizer.json")))
    tensors = read_safetensors(a.model)

    moe = cfg.get("model_type") == "qwen3_moe"
    if moe and (cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1):
        sys.exit(f"{a.model}: dense layers inside a MoE model have no GGUF form here (mlp_only_layers, decoder_sparse_step)")
    # Tensors go to a temporary file as they are added, so a 10 GB checkpoint never sits in memory.
    w = gguf.GGUFWriter(a.out, "qwen3moe" if moe else "qwen3", use_temp_file=True)
    w.add_name("pypto-serving test model")
    if moe:
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg.get("intermediate_size", 0))
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", 1000000.0))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])

    add_vocab(w, gguf, cfg, tok)

    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp",
    }
    for l in range(cfg["num_hidden_layers"]):
        for hf, gg in per_layer.items():
            names[f"model.layers.{l}.{hf}.weight"] = f"blk.{l}.{gg}.weight"
    for hf, gg in names.items():
        if hf not in tensors:
            continue  # lm_head absent: tied to the embedding
        dtype, shape, raw = tensors[hf]
        if gg.endswith("norm.weight"):  # norms in f32, as llama.cpp's converter writes them
            w.add_tensor(gg, as_f32(dtype, shape, raw))
        else:
            w.add_tensor(gg, np.ascontiguousarray(as_bf16_bytes(dtype, shape, raw)), raw_dtype=gguf.GGMLQuantizationType.BF16)
        print(f"  {hf} -> {gg} {shape}", file=sys.stderr)
    for l in range(cfg["num_hidden_layers"]) if moe else []:
        for proj in ("gate", "up", "down"):
            stacked = []
            for e in range(cfg["num_experts"]):
                dtype, shape, raw = tensors[f"model.layers.{l}.mlp.experts.{e}.{proj}_proj.weight"]
                stacked.append(as_bf16_bytes(dtype, shape, raw))
            data = np.ascontiguousarray(np.stack(stacked))
            w.add_tensor(f"blk.{l}.ffn_{proj}_exps.weight", data, raw_dtype=gguf.GGMLQuantizationType.BF16)
            print(f"  model.layers.{l}.mlp.experts.*.{proj}_proj -> blk.{l}.ffn_{proj}_exps [{len(stacked)}, {shape}]",
                  file=sys.stderr)
            del stacked, data
    write_out(w, a.out)


if __name__ == "__main__":
    main()
