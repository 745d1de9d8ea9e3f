#!/usr/bin/python3
"""Writes an EAGLE-3 draft head (the layout `make-test-model --eagle3` writes and Qwen3 heads are
published in: midlayer.*, fc, norm, lm_head, d2t) as a bf16 GGUF file of llama.cpp's `eagle3`
architecture, so llama.cpp's `--spec-type draft-eagle3` runs the same head beside ours
(bench/peers/spec_side_by_side.sh eagle3).

  python3 bench/peers/eagle3_to_gguf.py --model TARGET/eagle3 --target TARGET --out head-bf16.gguf \
      --gguf-py LLAMA/gguf-py

What the format asks (llama.cpp's eagle3 loader): one block `blk.0` whose q/k/v read the
[embedding | fused features] concatenation (in = 2H), `hidden_norm` as `attn_norm_2`, `fc` [3H → H],
the target's vocabulary (the head has no tokenizer of its own), `target_layers` (the three target
layers whose outputs are fused: the config's eagle_aux_hidden_state_layer_ids, else 2, L/2, L − 3)
and `target_hidden_size`. Its rope is the interleaved kind, so q_proj and k_proj rows are permuted
from the rotate-half order within each head, as for Llama checkpoints. `d2t` (draft id → target id
offsets) is written as absolute target ids, and left out where the draft vocabulary is the
target's and the mapping the identity.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_to_gguf import add_vocab, as_bf16_bytes, as_f32, parse_args, read_safetensors, write_out  # noqa: E402


def rope_rows_interleaved(bf16_bytes, shape, n_head):
    """[n_head · d, in] bf16 rows from rotate-half order (x_0..x_{d/2-1} | x_{d/2}..) to the
    interleaved pairs llama.cpp's normal rope rotates: row (h, i, half) → (h, 2i + half)."""
    rows = bf16_bytes.view(np.uint16).reshape(shape)
    d = shape[0] // n_head
    out = rows.reshape(n_head, 2, d // 2, shape[1]).swapaxes(1, 2).reshape(shape)
    return np.ascontiguousarray(out).view(np.uint8)


def main():
    a, gguf = parse_args(__doc__.splitlines()[0], lambda ap: ap.add_argument("--target", required=True))
    cfg = json.load(open(os.path.join(a.model, "config.json")))
    tcfg = json.load(open(os.path.join(a.target, "config.json")))
    tok = json.load(open(os.path.join(a.target, "tokenizer.json")))
    tensors = read_safetensors(a.model)
    if cfg.get("num_hidden_layers") != 1:
        sys.exit(f"{a.model}: num_hidden_layers {cfg.get('num_hidden_layers')}; an EAGLE-3 head has 1")

    H, L = cfg["hidden_size"], tcfg["num_hidden_layers"]
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim", H // n_head)
    aux = cfg.get("eagle_aux_hidden_state_layer_ids") or [2, L // 2, L - 3]

    w = gguf.GGUFWriter(a.out, "eagle3", use_temp_file=True)
    w.add_name("pypto-serving test EAGLE-3 head")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(tcfg["max_position_embeddings"])
    w.add_embedding_length(H)
    w.add_block_count(1)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", tcfg.get("rope_theta", 1000000.0)))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_target_layers(aux)
    w.add_target_hidden_size(cfg.get("target_hidden_size", tcfg["hidden_size"]))
    w.add_norm_before_residual(bool(cfg.get("norm_before_residual", False)))
    add_vocab(w, gguf, tcfg, tok)

    names = {
        "midlayer.self_attn.q_proj.weight": "blk.0.attn_q.weight",
        "midlayer.self_attn.k_proj.weight": "blk.0.attn_k.weight",
        "midlayer.self_attn.v_proj.weight": "blk.0.attn_v.weight",
        "midlayer.self_attn.o_proj.weight": "blk.0.attn_output.weight",
        "midlayer.mlp.gate_proj.weight": "blk.0.ffn_gate.weight",
        "midlayer.mlp.up_proj.weight": "blk.0.ffn_up.weight",
        "midlayer.mlp.down_proj.weight": "blk.0.ffn_down.weight",
        "midlayer.input_layernorm.weight": "blk.0.attn_norm.weight",
        "midlayer.hidden_norm.weight": "blk.0.attn_norm_2.weight",
        "midlayer.post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
        "fc.weight": "fc.weight",
        "norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
        "embed_tokens.weight": "token_embd.weight",
    }
    unknown = sorted(set(tensors) - set(names) - {"d2t", "t2d"})
    if unknown:
        sys.exit(f"{a.model}: tensors this writer does not place: {', '.join(unknown)}")
    for hf, gg in names.items():
        if hf not in tensors:
            if hf in ("embed_tokens.weight",):
                continue  # the head reads the target's embedding
            sys.exit(f"{a.model}: tensor '{hf}' is missing")
        dtype, shape, raw = tensors[hf]
        if gg.endswith("norm.weight") or gg.endswith("norm_2.weight"):
            w.add_tensor(gg, as_f32(dtype, shape, raw))
            continue
        data = as_bf16_bytes(dtype, shape, raw)
        if hf.endswith("q_proj.weight"):
            data = rope_rows_interleaved(data, shape, n_head)
        elif hf.endswith("k_proj.weight"):
            data = rope_rows_interleaved(data, shape, n_kv)
        w.add_tensor(gg, np.ascontiguousarray(data), raw_dtype=gguf.GGMLQuantizationType.BF16)
        print(f"  {hf} -> {gg} {shape}", file=sys.stderr)
    if "d2t" in tensors:
        dtype, shape, raw = tensors["d2t"]
        if dtype != "I64":
            sys.exit(f"{a.model}: d2t is {dtype}; expected I64 offsets")
        ids = raw.view(np.int64).reshape(-1) + np.arange(shape[0], dtype=np.int64)
        if np.any((ids < 0) | (ids >= tcfg["vocab_size"])) or np.unique(ids).size != ids.size:
            sys.exit(f"{a.model}: d2t maps outside the target's {tcfg['vocab_size']} ids or twice to one id")
        if not (shape[0] == tcfg["vocab_size"] and np.array_equal(ids, np.arange(shape[0]))):
            w.add_tensor("d2t", ids, raw_dtype=gguf.GGMLQuantizationType.I64)
    write_out(w, a.out)


if __name__ == "__main__":
    main()
