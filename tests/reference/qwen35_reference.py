#!/usr/bin/env python3
"""A plain PyTorch implementation of transformers' Qwen3.5 / Qwen3.6 text models
(Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM and the text model inside the published
Qwen3_5(Moe)ForConditionalGeneration wrappers), in fp32 throughout, used as the independent
reference for the engine's hybrid (Gated DeltaNet + gated attention) forward pass.

Written from the semantics of transformers' modeling_qwen3_5.py / modeling_qwen3_5_moe.py:
  - Layout: the wrapper keeps the text settings under config.json's text_config and the tensors
    under model.language_model.* (model.visual.* is the vision tower, not used here); the
    text-only classes use the top level and model.*. layer_types lists "linear_attention" /
    "full_attention" per layer (else layer i is full iff (i + 1) % full_attention_interval == 0).
  - Zero-centred RMSNorm for input_layernorm, post_attention_layernorm, the final norm and the
    attention's q_norm / k_norm: x * rsqrt(mean(x^2) + eps) * (1 + w). The GDN output norm is the
    plain gated one: w * norm(o) * silu(z), per value head over d_v.
  - Gated DeltaNet layer (linear_attn): qkv = in_proj_qkv(x) [T, 2 key_dim + value_dim];
    z = in_proj_z(x); b = in_proj_b(x); a = in_proj_a(x). A causal depthwise conv of width K
    (conv1d.weight [C, 1, K], no bias) over the qkv rows with zero history at the start:
    y_t[c] = sum_j W[c, j] * qkv_{t-K+1+j}[c], then SiLU. Split into q, k [n_k, d_k] and
    v [n_v, d_v]; beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias); q and k L2-normed
    (x * rsqrt(sum x^2 + 1e-6)), q scaled by 1/sqrt(d_k); value head h reads key head h // (n_v / n_k)
    (repeat_interleave). The gated delta rule in its plain recurrent form, per value head with
    state S [d_k, d_v] starting at 0:
        S = exp(g_t) S;  delta = beta_t (v_t - S^T k_t);  S = S + k_t delta^T;  o_t = S^T q_t.
    Then the gated norm and out_proj.
  - Gated attention layer (self_attn): q_proj's output viewed [T, n_heads, 2 head_dim] splits per
    head into the query (first head_dim) and the gate (next head_dim); q_norm / k_norm (1 + w) per
    head; RoPE (rotate-half) on the first int(head_dim * partial_rotary_factor) dims only, inv_freq
    = 1 / theta^(arange(0, rot, 2) / rot) (text positions: MRoPE reduces to this); GQA causal
    softmax attention scaled by 1/sqrt(head_dim); out * sigmoid(gate) before o_proj.
  - MLP: dense SwiGLU, or (MoE) softmax over all experts' router logits in fp32, top-k, always
    renormalised, experts from the fused mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and
    mlp.experts.down_proj [E, H, I] (or per-expert 2-D tensors), plus the shared expert's SwiGLU
    scaled by sigmoid(shared_expert_gate(x)).
  - lm_head is the embedding table when tie_word_embeddings is set.
  - Qwen3-Next (Qwen3NextForCausalLM, from the semantics of transformers' modeling_qwen3_next.py):
    the same model with the GDN's input projections fused and grouped per key head. The output of
    in_proj_qkvz [T, 2 key_dim + 2 value_dim] is viewed [T, n_k, 2 d_k + 2 r d_v] (r = n_v / n_k)
    and split along the last axis into q (d_k), k (d_k), v (r d_v), z (r d_v); in_proj_ba's
    [T, 2 n_v] is viewed [T, n_k, 2 r] and split into b (r), a (r); v, z, b, a then flatten to
    value heads g r + j, and the conv runs over cat(q, k, v) flattened head-major. The router's
    renormalisation follows the norm_topk_prob flag (default true); the config spells rope_theta
    and partial_rotary_factor at the top level. Its decoder layers are not all sparse
    (Qwen3NextDecoderLayer): layer i runs the sparse MoE block iff i is not in mlp_only_layers
    (default []), num_experts > 0 and (i + 1) % decoder_sparse_step == 0 (default 1); otherwise a
    dense SwiGLU MLP of intermediate_size (mlp.{gate,up,down}_proj). Qwen3.5-MoE has neither key
    (every layer sparse), dense Qwen3.5 no experts.
  - RoPE scaling: rope_parameters (Qwen3.5; transformers v5) or rope_scaling (Qwen3-Next's v4
    config) with rope_type "default" or "yarn". YaRN as transformers' _compute_yarn_parameters
    computes it with dim = int(head_dim * partial_rotary_factor), the rotary dims (the inverse
    frequencies, the correction range and the ramp all over those rot / 2 frequencies;
    rope_reference.rope_parameters with head_dim = rot), and cos / sin times the attention factor
    (Qwen3_5TextRotaryEmbedding / Qwen3NextRotaryEmbedding scale them by attention_scaling).
  - The MTP head (mtp.*, when the checkpoint has it), from the semantics of vLLM's Qwen3.5 MTP
    module: at position t it takes the target's final *normed* hidden state h_t and the next
    token x_{t+1}:  e = norm1p(embed(x_{t+1}); pre_fc_norm_embedding), h = norm1p(h_t;
    pre_fc_norm_hidden), m = fc(concat[e, h]) (embedding first), then one gated full-attention
    decoder layer (mtp.layers.0.*, its own causal KV over the MTP's rows, RoPE at position t + 1)
    with its FFN / MoE, and logits(x_{t+2}) = lm_head(norm1p(m; mtp.norm)); embed_tokens and
    lm_head are the target's. Qwen3-Next's MTP block (vLLM's Qwen3-Next MTP module) is the same:
    the layer's sparse MoE with per-expert tensors, renormalised per norm_topk_prob like the
    main stack, and every norm in the (1 + w) form. vLLM builds the MTP layer as a decoder layer
    whose index is the one in its name "mtp.layers.0", so its FFN follows the layer rule above at
    index 0 (dense when 0 is in mlp_only_layers or decoder_sparse_step > 1).

Usage: qwen35_reference.py --model DIR --token-ids 1,2,3 --out logits.npy [--greedy N]
                           [--mtp-out mtp_logits.npy]  (row t: the MTP's logits for token t + 2)
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_reader import read_checkpoint  # noqa: E402
from qwen3_reference import linear, parse_ids, prepare_linear, rms_norm, rotate_half  # noqa: E402
from rope_reference import rope_parameters  # noqa: E402


def norm1p(x, w, eps):
    """Qwen3.5's zero-centred RMSNorm: the stored weight is an offset from 1."""
    return rms_norm(x, 1.0 + w, eps)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def swiglu(gate_w, up_w, down_w, x):
    return linear(torch.nn.functional.silu(linear(x, gate_w)) * linear(x, up_w), down_w)


class Qwen35Reference:
    def __init__(self, model_dir: str, transform=None):
        """transform(name, tensor) -> tensor, applied to every tensor as loaded (the quantized
        checks use it to quantize and dequantize the projections)."""
        cfg, w = read_checkpoint(model_dir)
        if transform is not None:
            w = {name: transform(name, t) for name, t in w.items()}
        arch = cfg["architectures"][0]
        wrapper = arch.endswith("ForConditionalGeneration")
        t = cfg["text_config"] if wrapper else cfg
        prefix = "model.language_model." if wrapper else "model."
        self.next = arch == "Qwen3NextForCausalLM"
        self.moe = "Moe" in arch or self.next
        self.norm_topk = bool(t.get("norm_topk_prob", True)) if self.next else True
        self.hidden = t["hidden_size"]
        self.n_layers = t["num_hidden_layers"]
        self.n_heads = t["num_attention_heads"]
        self.n_kv = t["num_key_value_heads"]
        self.head_dim = t["head_dim"]
        self.eps = float(t["rms_norm_eps"])
        self.n_k = t["linear_num_key_heads"]
        self.n_v = t["linear_num_value_heads"]
        self.d_k = t["linear_key_head_dim"]
        self.d_v = t["linear_value_head_dim"]
        self.K = t["linear_conv_kernel_dim"]
        types = t.get("layer_types")
        if types is None:
            interval = t.get("full_attention_interval", 4)
            types = ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(self.n_layers)]
        self.full = [ty == "full_attention" for ty in types]
        rp = t.get("rope_parameters") or {}
        theta = float(rp.get("rope_theta", t.get("rope_theta", 10000.0)))
        factor = float(rp.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25)))
        self.rot = int(self.head_dim * factor)
        scaling = t.get("rope_parameters") or t.get("rope_scaling") or {}
        if scaling.get("rope_type", scaling.get("type", "default")) == "default":
            self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.rot, 2, dtype=torch.float64) / self.rot)).float()
            self.rope_scale = 1.0
        else:  # YaRN over the rotary dims (raises for any type the reference does not implement)
            self.inv_freq, self.rope_scale = rope_parameters({**t, "rope_theta": theta}, self.rot)
        self.top_k = t.get("num_experts_per_tok", 0)
        self.n_experts = t.get("num_experts", 0)
        # Which layers run the routed experts (Qwen3NextDecoderLayer's rule; Qwen3.5-MoE: all).
        if self.next:
            step, dense = t.get("decoder_sparse_step", 1), set(t.get("mlp_only_layers") or [])
            self.sparse = lambda i: i not in dense and self.n_experts > 0 and (i + 1) % step == 0
        else:
            self.sparse = lambda i: self.moe
        tie = cfg.get("tie_word_embeddings", t.get("tie_word_embeddings", False))

        self.embed = w[prefix + "embed_tokens.weight"]
        self.lm_head = prepare_linear(self.embed if tie else w.pop("lm_head.weight"))
        self.final_norm = w[prefix + "norm.weight"]
        self.layers = [self._load_layer(w, f"{prefix}layers.{i}.", self.full[i], self.sparse(i))
                       for i in range(self.n_layers)]
        self.mtp = None
        if "mtp.fc.weight" in w:
            self.mtp = {
                "norm_embed": w["mtp.pre_fc_norm_embedding.weight"],
                "norm_hidden": w["mtp.pre_fc_norm_hidden.weight"],
                "fc": prepare_linear(w.pop("mtp.fc.weight")),
                "layer": self._load_layer(w, "mtp.layers.0.", True, self.sparse(0)),  # vLLM: index 0
                "norm": w["mtp.norm.weight"],
            }

    def _load_layer(self, w, p, full, sparse):
        L = {"input_norm": w[p + "input_layernorm.weight"], "post_norm": w[p + "post_attention_layernorm.weight"]}
        if full:
            for key in ("q", "k", "v", "o"):
                L[key] = prepare_linear(w.pop(p + f"self_attn.{key}_proj.weight"))
            L["q_norm"] = w[p + "self_attn.q_norm.weight"]
            L["k_norm"] = w[p + "self_attn.k_norm.weight"]
        else:
            g = p + "linear_attn."
            for key in (("qkvz", "ba") if self.next else ("qkv", "z", "b", "a")):
                L[key] = prepare_linear(w.pop(g + f"in_proj_{key}.weight"))
            L["conv"] = w[g + "conv1d.weight"][:, 0, :]  # [C, K]
            L["dt_bias"] = w[g + "dt_bias"]
            L["A_log"] = w[g + "A_log"]
            L["gdn_norm"] = w[g + "norm.weight"]
            L["out"] = prepare_linear(w.pop(g + "out_proj.weight"))
        if not sparse:
            L["mlp"] = tuple(prepare_linear(w.pop(p + f"mlp.{n}_proj.weight")) for n in ("gate", "up", "down"))
            return L
        L["router"] = prepare_linear(w.pop(p + "mlp.gate.weight"))
        experts = []
        if p + "mlp.experts.gate_up_proj" in w:
            gu, dn = w.pop(p + "mlp.experts.gate_up_proj"), w.pop(p + "mlp.experts.down_proj")
            inter = gu.shape[1] // 2
            for e in range(self.n_experts):
                experts.append(tuple(prepare_linear(m.contiguous()) for m in (gu[e, :inter], gu[e, inter:], dn[e])))
        else:
            for e in range(self.n_experts):
                experts.append(tuple(prepare_linear(w.pop(p + f"mlp.experts.{e}.{n}_proj.weight"))
                                     for n in ("gate", "up", "down")))
        L["experts"] = experts
        L["shared"] = tuple(prepare_linear(w.pop(p + f"mlp.shared_expert.{n}_proj.weight")) for n in ("gate", "up", "down"))
        L["shared_gate"] = prepare_linear(w.pop(p + "mlp.shared_expert_gate.weight"))
        return L

    # --- mixers ----------------------------------------------------------------------------------
    def _rope(self, x, positions):
        """x [heads, T, hd]: rotate-half RoPE on dims [0, rot), the rest unchanged."""
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        xr, xp = x[..., : self.rot], x[..., self.rot:]
        cos, sin = emb.cos() * self.rope_scale, emb.sin() * self.rope_scale
        return torch.cat((xr * cos + rotate_half(xr) * sin, xp), dim=-1)

    def _attention(self, L, x, positions, cache):
        T, hd = x.shape[0], self.head_dim
        qg = linear(x, L["q"]).view(T, self.n_heads, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, self.n_heads * hd)
        q = norm1p(q, L["q_norm"], self.eps)
        k = norm1p(linear(x, L["k"]).view(T, self.n_kv, hd), L["k_norm"], self.eps)
        v = linear(x, L["v"]).view(T, self.n_kv, hd).transpose(0, 1)
        q = self._rope(q.transpose(0, 1), positions)
        k = self._rope(k.transpose(0, 1), positions)
        if "k" in cache:
            k = torch.cat((cache["k"], k), dim=1)
            v = torch.cat((cache["v"], v), dim=1)
        cache["k"], cache["v"] = k, v
        S = k.shape[1]
        rep = self.n_heads // self.n_kv
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        qpos = torch.arange(S - T, S)[:, None]
        scores = scores.masked_fill(torch.arange(S)[None, :] > qpos, float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(T, self.n_heads * hd)
        return linear(out * torch.sigmoid(gate), L["o"])

    def _gdn(self, L, x, cache):
        T = x.shape[0]
        key_dim = self.n_k * self.d_k
        if self.next:  # per key head g: [q_g | k_g | v_g (r d_v) | z_g (r d_v)] and [b_g (r) | a_g (r)]
            r = self.n_v // self.n_k
            mixed = linear(x, L["qkvz"]).view(T, self.n_k, 2 * self.d_k + 2 * r * self.d_v)
            q_, k_, v_, z = torch.split(mixed, [self.d_k, self.d_k, r * self.d_v, r * self.d_v], dim=2)
            b, a = torch.split(linear(x, L["ba"]).view(T, self.n_k, 2 * r), [r, r], dim=2)
            qkv = torch.cat((q_.reshape(T, -1), k_.reshape(T, -1), v_.reshape(T, -1)), dim=1)  # [T, C]
            z = z.reshape(T, self.n_v, self.d_v)
            b, a = b.reshape(T, self.n_v), a.reshape(T, self.n_v)
        else:
            qkv = linear(x, L["qkv"])  # [T, C]
            z = linear(x, L["z"]).view(T, self.n_v, self.d_v)
            b, a = linear(x, L["b"]), linear(x, L["a"])  # [T, n_v]
        hist = cache.get("conv", torch.zeros(self.K - 1, qkv.shape[1]))
        full = torch.cat((hist, qkv), dim=0)  # [K - 1 + T, C]
        cache["conv"] = full[full.shape[0] - (self.K - 1):].clone()
        conv = torch.zeros_like(qkv)
        for j in range(self.K):  # y_t = sum_j W[:, j] * x_{t - K + 1 + j}
            conv += L["conv"][:, j] * full[j:j + T]
        conv = torch.nn.functional.silu(conv)
        q = conv[:, :key_dim].view(T, self.n_k, self.d_k)
        k = conv[:, key_dim:2 * key_dim].view(T, self.n_k, self.d_k)
        v = conv[:, 2 * key_dim:].view(T, self.n_v, self.d_v)
        beta = torch.sigmoid(b)
        g = -torch.exp(L["A_log"].float()) * torch.nn.functional.softplus(a + L["dt_bias"])
        r = self.n_v // self.n_k
        q = (l2norm(q) / math.sqrt(self.d_k)).repeat_interleave(r, dim=1)  # [T, n_v, d_k]
        k = l2norm(k).repeat_interleave(r, dim=1)
        S = cache.get("state", torch.zeros(self.n_v, self.d_k, self.d_v))
        o = torch.empty(T, self.n_v, self.d_v)
        for t in range(T):
            S = S * torch.exp(g[t])[:, None, None]
            kv_mem = (S * k[t][:, :, None]).sum(dim=1)  # S^T k: [n_v, d_v]
            delta = (v[t] - kv_mem) * beta[t][:, None]
            S = S + k[t][:, :, None] * delta[:, None, :]
            o[t] = (S * q[t][:, :, None]).sum(dim=1)
        cache["state"] = S
        y = rms_norm(o, L["gdn_norm"], self.eps) * torch.nn.functional.silu(z)
        return linear(y.reshape(T, self.n_v * self.d_v), L["out"])

    def _mlp(self, L, x):
        if "mlp" in L:  # a dense layer
            return swiglu(*L["mlp"], x)
        probs = torch.softmax(linear(x, L["router"]), dim=1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk:  # always for Qwen3.5; Qwen3-Next's norm_topk_prob flag
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        mask = torch.nn.functional.one_hot(chosen, num_classes=self.n_experts).permute(2, 1, 0)
        for e in torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist():
            slot, tok = torch.where(mask[e])
            out.index_add_(0, tok, swiglu(*L["experts"][e], x[tok]) * weights[tok, slot, None])
        return out + torch.sigmoid(linear(x, L["shared_gate"])) * swiglu(*L["shared"], x)

    @torch.no_grad()
    def forward(self, ids, caches, start, hidden_out=None):
        """Logits [T, vocab] of tokens `ids` at positions start.. ; caches: per-layer dicts holding
        the KV of attention layers and the conv / recurrent state of GDN layers. hidden_out (a
        list): receives the final normed hidden states [T, hidden] (what the MTP head reads)."""
        ids = torch.tensor(ids, dtype=torch.int64)
        positions = torch.arange(start, start + ids.shape[0])
        x = self.embed[ids]
        for i, L in enumerate(self.layers):
            h = norm1p(x, L["input_norm"], self.eps)
            x = x + (self._attention(L, h, positions, caches[i]) if self.full[i] else self._gdn(L, h, caches[i]))
            x = x + self._mlp(L, norm1p(x, L["post_norm"], self.eps))
        normed = norm1p(x, self.final_norm, self.eps)
        if hidden_out is not None:
            hidden_out.append(normed)
        return linear(normed, self.lm_head)

    @torch.no_grad()
    def mtp_forward(self, hidden, next_ids, start, cache):
        """The MTP head over rows t = start.. : hidden [T, hidden] the target's normed hidden states at
        positions t, next_ids the tokens at t + 1; returns the logits [T, vocab] of the tokens at
        t + 2. cache: the MTP layer's own KV (a dict), its rows at positions t + 1."""
        M = self.mtp
        ids = torch.tensor(next_ids, dtype=torch.int64)
        e = norm1p(self.embed[ids], M["norm_embed"], self.eps)
        h = norm1p(hidden, M["norm_hidden"], self.eps)
        x = linear(torch.cat((e, h), dim=-1), M["fc"])
        L = M["layer"]
        positions = torch.arange(start + 1, start + 1 + ids.shape[0])
        x = x + self._attention(L, norm1p(x, L["input_norm"], self.eps), positions, cache)
        x = x + self._mlp(L, norm1p(x, L["post_norm"], self.eps))
        return linear(norm1p(x, M["norm"], self.eps), self.lm_head)

    def mtp_logits(self, ids) -> np.ndarray:
        """Row t (t < len(ids) - 1): the MTP's logits for token t + 2, from the target's hidden
        state at t and token ids[t + 1] (the whole prompt teacher-forced)."""
        if self.mtp is None:
            raise SystemExit("the checkpoint has no mtp.* tensors")
        hidden = []
        self.forward(list(ids), [dict() for _ in self.layers], 0, hidden)
        return self.mtp_forward(hidden[0][:-1], list(ids)[1:], 0, dict()).numpy().astype(np.float32)

    def logits(self, ids) -> np.ndarray:
        return self.forward(list(ids), [dict() for _ in self.layers], 0).numpy().astype(np.float32)

    def greedy(self, ids, n: int):
        """n greedy next tokens after prompt `ids` (argmax, ties to the lowest id)."""
        caches = [dict() for _ in self.layers]
        logits = self.forward(list(ids), caches, 0)
        out = []
        for pos in range(len(ids), len(ids) + n):
            tok = int(torch.argmax(logits[-1]).item())
            out.append(tok)
            logits = self.forward([tok], caches, pos)
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--token-ids", required=True)
    ap.add_argument("--out")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--mtp-out")
    args = ap.parse_args()
    model = Qwen35Reference(args.model)
    ids = parse_ids(args.token_ids)
    if args.out:
        np.save(args.out, model.logits(ids))
    if args.mtp_out:
        np.save(args.mtp_out, model.mtp_logits(ids))
    if args.greedy:
        print(",".join(map(str, model.greedy(ids, args.greedy))))


if __name__ == "__main__":
    main()
