#!/usr/bin/python3
"""Writes a pypto-serving Qwen3.5 / Qwen3.6 hybrid test checkpoint (Gated DeltaNet + gated
attention, dense or MoE; text-only or the vision-language wrapper layout) as a bf16 GGUF file of
llama.cpp's `qwen35` / `qwen35moe` architecture, so llama.cpp can run the same weights side by side
with pypto-serving (bench/peers/side_by_side.sh, bench/peers/mtp_side_by_side.sh).

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

With --mtp the checkpoint's MTP head (mtp.*, one layer) is written too, in llama.cpp's NextN
layout: block_count is the main layers + 1, `{arch}.nextn_predict_layers` = 1, and the head is block
L (L = num_hidden_layers) — mtp.layers.0.* named as a full-attention layer of the main stack (dense
FFN or routed + shared experts), mtp.fc [H, 2H] (over [embedding | hidden]) as
blk.L.nextn.eh_proj, pre_fc_norm_embedding / pre_fc_norm_hidden / norm as blk.L.nextn.enorm /
nextn.hnorm / nextn.shared_head_norm (all 1 + w); embed_tokens and lm_head shared with the target.

With --outtype q4_0 the tensors llama-quantize's Q4_0 file type quantizes to Q4_0 are written as
Q4_0 here (gguf-py's reference Q4_0: per 32 values d = the signed value of largest magnitude / -8,
q = trunc(x / d + 8.5) clipped to 0..15): every matrix whose name ends in `weight` except the norms,
the routers (ffn_gate_inp) and output.weight, which stays bf16. `llama-quantize IN OUT Q4_0` then
copies the Q4_0 tensors unchanged and makes output.weight Q6_K, the file llama-quantize would make
from the bf16 GGUF, without that file ever on disk (the 35B-A3B cut with its head is ~10 GB in bf16,
~3 GB here). Tensors are produced one at a time while the file is written, so memory holds one.

  python3 bench/peers/qwen35_to_gguf.py --model DIR --out model-bf16.gguf --gguf-py LLAMA/gguf-py
  python3 bench/peers/qwen35_to_gguf.py --model DIR --out pre.gguf --gguf-py LLAMA/gguf-py --mtp --outtype q4_0
  LLAMA/build/bin/llama-quantize pre.gguf model-mtp-q4_0.gguf Q4_0
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


def q4_0_eligible(name, shape):
    """Whether llama-quantize's Q4_0 file type makes this tensor Q4_0 (output.weight: Q6_K, left to it)."""
    return (len(shape) >= 2 and name.endswith("weight") and not name.endswith("_norm.weight")
            and "ffn_gate_inp.weight" not in name and name != "output.weight" and shape[-1] % 32 == 0)


class TensorPlan:
    """The GGUF's tensors, each with a function producing its bytes; `write` registers them all, then
    produces and writes them one at a time (a checkpoint of several GB is never in memory whole)."""

    def __init__(self, gguf, q4_0):
        self.gguf, self.q4_0, self.items = gguf, q4_0, []

    def bf16(self, name, arr_u16):
        """A uint16 array of bf16 bits (a view of the memory-mapped checkpoint where possible)."""
        shape = list(arr_u16.shape)
        if self.q4_0 and q4_0_eligible(name, shape):
            q = self.gguf.GGMLQuantizationType.Q4_0
            row = shape[-1] // 32 * 18  # 32 values -> fp16 scale + 16 bytes of nibbles
            self.items.append((name, shape[:-1] + [row], np.uint8, q, lambda: self._q4_0(arr_u16)))
        else:
            self.items.append((name, shape[:-1] + [shape[-1] * 2], np.uint8,
                               self.gguf.GGMLQuantizationType.BF16, lambda: arr_u16.view(np.uint8)))

    def f32(self, name, fn, shape):
        self.items.append((name, list(shape), np.float32, None,
                           lambda: np.ascontiguousarray(fn().astype(np.float32))))

    def _q4_0(self, arr_u16):
        n = arr_u16.shape[-1]
        rows = arr_u16.reshape(-1, n) if arr_u16.ndim == 2 else None
        out = []
        chunks = [arr_u16[e] for e in range(arr_u16.shape[0])] if rows is None else \
                 [rows[i:i + 4096] for i in range(0, rows.shape[0], 4096)]
        for c in chunks:
            f = (np.ascontiguousarray(c).astype(np.uint32) << 16).view(np.float32)
            out.append(self.gguf.quants.quantize(f.reshape(-1, n), self.gguf.GGMLQuantizationType.Q4_0))
        return np.concatenate(out).reshape(arr_u16.shape[:-1] + (n // 32 * 18,))

    def write(self, w):
        for name, shape, dtype, raw, _ in self.items:
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            w.add_tensor_info(name, shape, np.dtype(dtype), nbytes, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for k, (name, shape, _, _, produce) in enumerate(self.items):
            w.write_tensor_data(produce())
            if k % 16 == 0:
                print(f"  [{k + 1}/{len(self.items)}] {name}", file=sys.stderr)
        w.close()


def options(ap):
    ap.add_argument("--mtp", action="store_true", help="also write the MTP head (mtp.*) as llama.cpp's NextN block")
    ap.add_argument("--outtype", choices=["bf16", "q4_0"], default="bf16",
                    help="q4_0: the matrices llama-quantize Q4_0 quantizes written as Q4_0 (then run llama-quantize ... Q4_0)")


def main():
    a, gguf = parse_args(__doc__.splitlines()[0], options)
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
    if a.mtp:
        if "mtp.fc.weight" not in tensors:
            sys.exit(f"{a.model}: --mtp asks for the MTP head but the checkpoint has no mtp.fc.weight")
        n_mtp = cfg.get("mtp_num_hidden_layers", 0)
        if n_mtp != 1:
            sys.exit(f"{a.model}: mtp_num_hidden_layers is {n_mtp}; llama.cpp's qwen35 MTP runs exactly 1")
        if cfg.get("mtp_use_dedicated_embeddings", False):
            sys.exit(f"{a.model}: mtp_use_dedicated_embeddings is not written by this converter")

    w = gguf.GGUFWriter(a.out, "qwen35moe" if moe else "qwen35", use_temp_file=False)
    w.add_name("pypto-serving test model")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if a.outtype == "q4_0" else gguf.LlamaFileType.MOSTLY_BF16)
    w.add_context_length(cfg.get("max_position_embeddings", 262144))
    w.add_embedding_length(H)
    w.add_block_count(L + (1 if a.mtp else 0))
    if a.mtp:
        w.add_nextn_predict_layers(1)
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

    plan = TensorPlan(gguf, a.outtype == "q4_0")

    def get(name):
        return tensors[name]

    def matrix(hf, gg, fix=None):
        arr = bf16_array(*get(hf))
        plan.bf16(gg, fix(arr) if fix else arr)

    def norm(hf, gg, one_plus=True):
        dtype, shape, raw = get(hf)
        plan.f32(gg, lambda: as_f32(dtype, shape, raw) + (1.0 if one_plus else 0.0), shape)

    def attention(p, b):
        """Gated full attention (q_proj keeps its per-head [query | gate] rows)."""
        for hf, gg in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")):
            matrix(p + f"self_attn.{hf}.weight", b + f"{gg}.weight")
        norm(p + "self_attn.q_norm.weight", b + "attn_q_norm.weight")
        norm(p + "self_attn.k_norm.weight", b + "attn_k_norm.weight")

    def ffn(p, b):
        """Dense SwiGLU, or routed experts stacked [E, out, in] plus the gated shared expert."""
        if not moe:
            for proj in ("gate", "up", "down"):
                matrix(p + f"mlp.{proj}_proj.weight", b + f"ffn_{proj}.weight")
            return
        matrix(p + "mlp.gate.weight", b + "ffn_gate_inp.weight")
        E = cfg["num_experts"]
        if p + "mlp.experts.gate_up_proj" in tensors:  # [E, 2I, H], gate rows first; down [E, H, I]
            gu = bf16_array(*get(p + "mlp.experts.gate_up_proj"))
            inter = gu.shape[1] // 2
            plan.bf16(b + "ffn_gate_exps.weight", gu[:, :inter])
            plan.bf16(b + "ffn_up_exps.weight", gu[:, inter:])
            matrix(p + "mlp.experts.down_proj", b + "ffn_down_exps.weight")
        else:
            for proj in ("gate", "up", "down"):
                parts = [bf16_array(*get(p + f"mlp.experts.{e}.{proj}_proj.weight")) for e in range(E)]
                plan.bf16(b + f"ffn_{proj}_exps.weight", StackedExperts(parts))
        for proj in ("gate", "up", "down"):
            matrix(p + f"mlp.shared_expert.{proj}_proj.weight", b + f"ffn_{proj}_shexp.weight")
        sg = bf16_array(*get(p + "mlp.shared_expert_gate.weight"))
        plan.bf16(b + "ffn_gate_inp_shexp.weight", sg.reshape(-1))

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
            attention(p, b)
        else:
            g = p + "linear_attn."
            matrix(g + "in_proj_qkv.weight", b + "attn_qkv.weight",
                   lambda x: np.concatenate([x[:qk], tiled_heads(x[qk:], 0, n_k, r, dv)]))
            matrix(g + "in_proj_z.weight", b + "attn_gate.weight", lambda x: tiled_heads(x, 0, n_k, r, dv))
            matrix(g + "in_proj_b.weight", b + "ssm_beta.weight", lambda x: tiled_heads(x, 0, n_k, r, 1))
            matrix(g + "in_proj_a.weight", b + "ssm_alpha.weight", lambda x: tiled_heads(x, 0, n_k, r, 1))
            matrix(g + "out_proj.weight", b + "ssm_out.weight", lambda x: tiled_heads(x, 1, n_k, r, dv))
            cd, cs, craw = get(g + "conv1d.weight")

            def conv(cd=cd, cs=cs, craw=craw):
                c = as_f32(cd, cs, craw).reshape(cs[0], cs[-1])
                return np.concatenate([c[:qk], tiled_heads(c[qk:], 0, n_k, r, dv)])
            plan.f32(b + "ssm_conv1d.weight", conv, [cs[0], cs[-1]])
            dd, ds, draw = get(g + "dt_bias")
            plan.f32(b + "ssm_dt.bias", lambda dd=dd, ds=ds, draw=draw: tiled_heads(as_f32(dd, ds, draw), 0, n_k, r, 1), ds)
            ad, as_, araw = get(g + "A_log")
            plan.f32(b + "ssm_a", lambda ad=ad, as_=as_, araw=araw: tiled_heads(-np.exp(as_f32(ad, as_, araw)), 0, n_k, r, 1), as_)
            norm(g + "norm.weight", b + "ssm_norm.weight", one_plus=False)
        ffn(p, b)
    if a.mtp:
        b = f"blk.{L}."
        matrix("mtp.fc.weight", b + "nextn.eh_proj.weight")
        norm("mtp.pre_fc_norm_embedding.weight", b + "nextn.enorm.weight")
        norm("mtp.pre_fc_norm_hidden.weight", b + "nextn.hnorm.weight")
        norm("mtp.norm.weight", b + "nextn.shared_head_norm.weight")
        norm("mtp.layers.0.input_layernorm.weight", b + "attn_norm.weight")
        norm("mtp.layers.0.post_attention_layernorm.weight", b + "post_attention_norm.weight")
        attention("mtp.layers.0.", b)
        ffn("mtp.layers.0.", b)
    plan.write(w)
    print(f"wrote {a.out}", file=sys.stderr)


class StackedExperts:
    """Per-expert 2-D matrices [out, in] seen as one [E, out, in] array without stacking them in memory
    (indexing an expert, .shape, .ndim, and .view(np.uint8) / C-order bytes when written)."""

    def __init__(self, parts):
        self.parts = parts
        self.shape = (len(parts),) + parts[0].shape
        self.ndim = 3

    def __getitem__(self, e):
        return self.parts[e]

    def view(self, dtype):
        return StackedBytes([p.view(dtype) for p in self.parts])


class StackedBytes:
    """What write_tensor_data needs of an array: nbytes and tofile (C order, expert after expert)."""

    def __init__(self, parts):
        self.parts = parts
        self.nbytes = sum(p.nbytes for p in parts)

    def tofile(self, f):
        for p in self.parts:
            np.ascontiguousarray(p).tofile(f)


if __name__ == "__main__":
    main()
