#!/usr/bin/python3
"""Writes a pypto-serving Qwen3.5 / Qwen3.6 hybrid test checkpoint (Gated DeltaNet + gated
attention, dense or MoE; text-only or the vision-language wrapper layout) as a bf16 GGUF file of
llama.cpp's `qwen35` / `qwen35moe` architecture, so llama.cpp can run the same weights side by side
with pypto-serving (bench/peers/side_by_side.sh). The MTP head (mtp.*) is left out.

What the GGUF form asks of the tensors (llama.cpp's qwen35 loader and graph; facts, not code):
  - zero-centred RMSNorm weights w are stored as 1 + w (attention / FFN / q / k / final norms), the
    Gated DeltaNet output norm as stored;
  - A_log is stored as A = -exp(A_log) (`ssm_a`), dt_bias as `ssm_dt.bias`, conv1d [C, 1, K] as
    [C, K] in f32;
  - value heads go from grouped-by-key-head order (h = g * r + j, r value heads per key head) to
    tiled order (j * n_k + g) wherever a value-head axis appears: the v rows of in_proj_qkv, the
    rows of in_proj_z / in_proj_b / in_proj_a, A_log, dt_bias, the v channels of conv1d and the
    columns of out_proj — a permutation of the GDN's value heads, so the function is unchanged;
  - q_proj keeps its per-head [query | gate] rows; routed experts stacked [E, out, in]
    (ffn_{gate,up,down}_exps), the shared expert as ffn_*_shexp and its gate as ffn_gate_inp_shexp.

  python3 bench/peers/qwen35_to_gguf.py --model DIR --out model-bf16.gguf --gguf-py LLAMA/gguf-py
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_to_gguf import add_vocab, as_bf16_bytes, as_f32, parse_args, read_safetensors  # noqa: E402


def tiled_heads(x, axis, n_k, r, hd):
    """Value heads along `axis` (n_k * r heads of hd, grouped by key head) in tiled order."""
    shape = list(x.shape)
    x = x.reshape(shape[:axis] + [n_k, r, hd] + shape[axis + 1:])
    x = np.swapaxes(x, axis, axis + 1)
    return np.ascontiguousarray(x).reshape(shape)


def bf16_array(dtype, shape, raw):
    """The tensor as a uint16 array of bf16 bits with `shape` (converted when stored otherwise)."""
    return as_bf16_bytes(dtype, shape, raw).view(np.uint16).reshape(shape)


def main():
    a, gguf = parse_args(__doc__.splitlines()[0])
    top = json.load(open(os.path.join(a.model, "config.json")))
    cfg = top.get("text_config", top)
    if "vocab_size" not in cfg:
        cfg["vocab_size"] = top["vocab_size"]
    tok = json.load(open(os.path.join(a.model, "tokenizer.json")))
    tensors = read_safetensors(a.model)
    prefix = "model.language_model." if "model.language_model.embed_tokens.weight" in tensors else "model."
    moe = "num_experts" in cfg
    L = cfg["num_hidden_layers"]
    H = cfg["hidden_size"]
    hd = cfg["head_dim"]
    rope = cfg.get("rope_parameters", {})
    n_k, n_v = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    if dk != dv:
        sys.exit(f"{a.model}: llama.cpp's qwen35 needs linear_key_head_dim == linear_value_head_dim ({dk} vs {dv})")
    r = n_v // n_k
    if "layer_types" in cfg:
        full = [t == "full_attention" for t in cfg["layer_types"]]
    else:
        every = cfg.get("full_attention_interval", 4)
        full = [(i + 1) % every == 0 for i in range(L)]
    interval = cfg.get("full_attention_interval", 4)
    if full != [(i + 1) % interval == 0 for i in range(L)]:
        sys.exit(f"{a.model}: llama.cpp derives the layer kinds from full_attention_interval {interval}; "
                 f"layer_types disagrees")

    w = gguf.GGUFWriter(a.out, "qwen35moe" if moe else "qwen35", use_temp_file=False)
    w.add_name("pypto-serving test model")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(cfg.get("max_position_embeddings", 262144))
    w.add_embedding_length(H)
    w.add_block_count(L)
    w.add_feed_forward_length(cfg.get("intermediate_size", 0) if not moe else 0)
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta", 10000000.0)))
    w.add_rope_dimension_count(int(hd * rope.get("partial_rotary_factor", 0.25)))
    sections = list(rope.get("mrope_section", [11, 11, 10]))
    w.add_rope_dimension_sections(sections + [0] * (4 - len(sections)))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(dk)
    w.add_ssm_group_count(n_k)
    w.add_ssm_time_step_rank(n_v)
    w.add_ssm_inner_size(dv * n_v)
    w.add_full_attention_interval(interval)
    if moe:
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    add_vocab(w, gguf, cfg, tok)

    def get(name):
        return tensors[name]

    def put_bf16(gg, arr_u16):
        # A view of the memory-mapped checkpoint where possible (the expert halves are strided
        # views): written in C order when the file is written, so the checkpoint is never copied
        # into memory whole.
        w.add_tensor(gg, arr_u16.view(np.uint8), raw_dtype=gguf.GGMLQuantizationType.BF16)

    def put_f32(gg, arr):
        w.add_tensor(gg, np.ascontiguousarray(arr.astype(np.float32)))

    def matrix(hf, gg, fix=None):
        arr = bf16_array(*get(hf))
        put_bf16(gg, fix(arr) if fix else arr)

    def norm(hf, gg, one_plus=True):
        put_f32(gg, as_f32(*get(hf)) + (1.0 if one_plus else 0.0))

    matrix(prefix + "embed_tokens.weight", "token_embd.weight")
    norm(prefix + "norm.weight", "output_norm.weight")
    if "lm_head.weight" in tensors:
        matrix("lm_head.weight", "output.weight")
    qk = 2 * n_k * dk  # q and k channels of in_proj_qkv / conv1d, ahead of v
    for i in range(L):
        p, b = f"{prefix}layers.{i}.", f"blk.{i}."
        norm(p + "input_layernorm.weight", b + "attn_norm.weight")
        norm(p + "post_attention_layernorm.weight", b + "post_attention_norm.weight")
        if full[i]:
            for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
                matrix(p + f"self_attn.{hf}.weight", b + f"{gg}.weight")
            norm(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight")
            norm(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight")
        else:
            g = p + "linear_attn."
            matrix(g + "in_proj_qkv.weight", b + "attn_qkv.weight",
                   lambda x: np.concatenate([x[:qk], tiled_heads(x[qk:], 0, n_k, r, dv)]))
            matrix(g + "in_proj_z.weight", b + "attn_gate.weight", lambda x: tiled_heads(x, 0, n_k, r, dv))
            matrix(g + "in_proj_b.weight", b + "ssm_beta.weight", lambda x: tiled_heads(x, 0, n_k, r, 1))
            matrix(g + "in_proj_a.weight", b + "ssm_alpha.weight", lambda x: tiled_heads(x, 0, n_k, r, 1))
            matrix(g + "out_proj.weight", b + "ssm_out.weight", lambda x: tiled_heads(x, 1, n_k, r, dv))
            conv = as_f32(*get(g + "conv1d.weight"))
            conv = conv.reshape(conv.shape[0], conv.shape[-1])
            put_f32(b + "ssm_conv1d.weight", np.concatenate([conv[:qk], tiled_heads(conv[qk:], 0, n_k, r, dv)]))
            put_f32(b + "ssm_dt.bias", tiled_heads(as_f32(*get(g + "dt_bias")), 0, n_k, r, 1))
            put_f32(b + "ssm_a", tiled_heads(-np.exp(as_f32(*get(g + "A_log"))), 0, n_k, r, 1))
            norm(g + "norm.weight", b + "ssm_norm.weight", one_plus=False)
        if not moe:
            for proj in ("gate", "up", "down"):
                matrix(p + f"mlp.{proj}_proj.weight", b + f"ffn_{proj}.weight")
            continue
        matrix(p + "mlp.gate.weight", b + "ffn_gate_inp.weight")
        E = cfg["num_experts"]
        if p + "mlp.experts.gate_up_proj" in tensors:  # [E, 2I, H], gate rows first; down [E, H, I]
            gu = bf16_array(*get(p + "mlp.experts.gate_up_proj"))
            inter = gu.shape[1] // 2
            put_bf16(b + "ffn_gate_exps.weight", gu[:, :inter])
            put_bf16(b + "ffn_up_exps.weight", gu[:, inter:])
            matrix(p + "mlp.experts.down_proj", b + "ffn_down_exps.weight")
        else:
            for proj in ("gate", "up", "down"):
                put_bf16(b + f"ffn_{proj}_exps.weight",
                         np.stack([bf16_array(*get(p + f"mlp.experts.{e}.{proj}_proj.weight")) for e in range(E)]))
        for proj in ("gate", "up", "down"):
            matrix(p + f"mlp.shared_expert.{proj}_proj.weight", b + f"ffn_{proj}_shexp.weight")
        sg = bf16_array(*get(p + "mlp.shared_expert_gate.weight"))
        put_bf16(b + "ffn_gate_inp_shexp.weight", sg.reshape(-1))
        print(f"  layer {i} ({'attention' if full[i] else 'gated deltanet'})", file=sys.stderr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
