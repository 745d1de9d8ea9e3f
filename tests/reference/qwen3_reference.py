#!/usr/bin/env python3
"""A plain PyTorch implementation of Hugging Face's Qwen3ForCausalLM (and Qwen2ForCausalLM,
Qwen3MoeForCausalLM), in fp32 throughout, used as the independent reference for the engine's logits.

Written from the semantics of transformers' modeling_qwen3.py / modeling_qwen2.py:
  - RMSNorm in fp32: x * rsqrt(mean(x^2) + eps), then multiplied by the weight.
  - Qwen3: per-head RMSNorm on q and k (q_norm / k_norm over head_dim) before RoPE; a checkpoint
    without those tensors gets ones. Qwen2: no QK norm, q/k/v projections carry biases.
  - RoPE, rotate-half convention: inv_freq = 1 / theta^(arange(0, hd, 2) / hd) (YaRN's blend
    when rope_scaling says so: rope_reference.py), angles = position * inv_freq (fp32), cos/sin of
    cat(angles, angles) times YaRN's attention factor (1 without it); x*cos + rotate_half(x)*sin
    with rotate_half(x) = cat(-x[hd/2:], x[:hd/2]).
  - Grouped-query attention: query head h reads KV head h // (n_heads / n_kv_heads) (repeat_kv),
    scores scaled by 1/sqrt(head_dim), causal mask, softmax in fp32.
  - MLP: down(silu(gate(x)) * up(x)); residual connections around attention and MLP.
  - Qwen3-MoE (modeling_qwen3_moe.py, Qwen3MoeSparseMoeBlock): layer i is sparse iff
    num_experts > 0, (i + 1) % decoder_sparse_step == 0 and i not in mlp_only_layers (else the
    dense MLP above). Sparse: router logits = x @ gate.T [T, E]; softmax over all E in fp32;
    torch.topk(k); divided by their sum iff norm_topk_prob; for each expert hit, in ascending id,
    its tokens' rows go through down(silu(gate(x)) * up(x)), are scaled by their routing weight
    and index_add_-ed into a zero output. (transformers computes in the model dtype; here
    everything stays fp32, the weights' stored values upcast.)
  - lm_head is the embedding table when tie_word_embeddings is set.
  - Qwen3-Embedding's layout (flat names embed_tokens.*, layers.N.*, norm.*, no lm_head) is read
    as transformers' Qwen3Model reads it; hidden_states() is its last_hidden_state (after the final norm).

Usage:
  qwen3_reference.py --model DIR --token-ids 1,2,3 --out logits.npy [--greedy N --greedy-out F]
  qwen3_reference.py --model DIR --prompts FILE --out-dir DIR [--greedy N]
     FILE holds one prompt per line (comma-separated token ids); writes logits_<i>.npy [T, vocab]
     float32 and, with --greedy, greedy_<i>.txt (N comma-separated greedy next tokens).
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_reader import read_checkpoint  # noqa: E402
from kv_quant_reference import kv_store  # noqa: E402
from rope_reference import rope_parameters  # noqa: E402


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


# Debian's torch is built with a generic BLAS (a few GFLOP/s); its oneDNN (mkldnn) fp32 linear is
# ~40x faster and still accumulates in fp32, so the projections go through it when available.
# oneDNN reorders its "weight" operand on every call (about a second for a 151936-row lm_head), so
# the roles are swapped: the model weight W [n_out, k_in] is passed as the input and the
# activations x [T, k_in] as the weight, giving (x W^T)^T = W x^T [n_out, T].
_MKLDNN = torch.backends.mkldnn.is_available()


def prepare_linear(w: torch.Tensor):
    """Weight [n_out, k_in] in the layout linear() takes."""
    return w.to_mkldnn() if _MKLDNN else w


def linear(x: torch.Tensor, w) -> torch.Tensor:
    """x [T, k_in] @ w.T -> [T, n_out] in fp32 (nn.Linear without bias)."""
    if _MKLDNN:
        return torch._C._nn.mkldnn_linear(w, x.contiguous().to_mkldnn(), None).to_dense().T.contiguous()
    return x @ w.T


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Qwen3Reference:
    def __init__(self, model_dir: str, transform=None, kv_bf16=False, kv_dtype=None):
        """transform(name, tensor) -> tensor, applied to every weight as loaded (tests use it to
        quantize and dequantize weights the way an engine option does). kv_dtype ("bf16", "int8",
        "fp8"; kv_bf16 is "bf16"): keys (after RoPE) and values are stored as a KV cache of that
        dtype stores them (kv_quant_reference.py) before attention reads them."""
        self.kv_dtype = "bf16" if kv_bf16 and kv_dtype is None else kv_dtype
        cfg, w = read_checkpoint(model_dir)
        self.headless = "embed_tokens.weight" in w  # Qwen3-Embedding: flat names, no lm_head
        if self.headless:
            w = {"model." + name: t for name, t in w.items()}
        if transform is not None:
            w = {name: transform(name, t) for name, t in w.items()}
        arch = (cfg.get("architectures") or ["Qwen3ForCausalLM"])[0]
        self.qwen2 = arch.startswith("Qwen2")
        self.hidden = cfg["hidden_size"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads", self.n_heads)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.n_layers = cfg["num_hidden_layers"]
        self.vocab = cfg["vocab_size"]
        # Qwen2 always has q/k/v biases; Qwen3 has q/k/v/o biases only with attention_bias.
        self.qkv_bias = True if self.qwen2 else bool(cfg.get("attention_bias", False))
        self.o_bias = False if self.qwen2 else bool(cfg.get("attention_bias", False))
        self.moe = arch == "Qwen3MoeForCausalLM"
        self.n_experts = int(cfg.get("num_experts", cfg.get("num_local_experts", 0))) if self.moe else 0
        self.top_k = int(cfg.get("num_experts_per_tok", 0))
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", False))
        sparse_step = int(cfg.get("decoder_sparse_step", 1))
        mlp_only = set(cfg.get("mlp_only_layers") or [])

        self.embed = w["model.embed_tokens.weight"]  # [vocab, hidden]
        if cfg.get("tie_word_embeddings", False) or self.headless:
            self.lm_head = self.embed
        else:
            self.lm_head = w.pop("lm_head.weight")
        self.lm_head = prepare_linear(self.lm_head)
        self.final_norm = w["model.norm.weight"]
        ones = torch.ones(self.head_dim)
        self.layers = []
        for i in range(self.n_layers):
            p = f"model.layers.{i}."
            layer = {
                "input_norm": w[p + "input_layernorm.weight"],
                "post_norm": w[p + "post_attention_layernorm.weight"],
            }
            sparse = self.n_experts > 0 and (i + 1) % sparse_step == 0 and i not in mlp_only
            mlp = () if sparse else (("gate", "mlp.gate_proj"), ("up", "mlp.up_proj"), ("down", "mlp.down_proj"))
            for key, name in (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                              ("o", "self_attn.o_proj")) + mlp:
                layer[key] = prepare_linear(w.pop(p + name + ".weight"))  # pop: keep one copy only
            if sparse:
                layer["router"] = prepare_linear(w.pop(p + "mlp.gate.weight"))  # [E, hidden]
                layer["experts"] = [
                    {key: prepare_linear(w.pop(p + f"mlp.experts.{e}.{key}_proj.weight")) for key in ("gate", "up", "down")}
                    for e in range(self.n_experts)
                ]
            if self.qkv_bias:
                for n in ("q", "k", "v"):
                    layer[n + "_bias"] = w[p + f"self_attn.{n}_proj.bias"]
            if self.o_bias:
                layer["o_bias"] = w[p + "self_attn.o_proj.bias"]
            if not self.qwen2:
                layer["q_norm"] = w.get(p + "self_attn.q_norm.weight", ones)
                layer["k_norm"] = w.get(p + "self_attn.k_norm.weight", ones)
            self.layers.append(layer)
        # Plain RoPE or YaRN (rope_reference.py): inv_freq [hd/2], cos/sin scaled by attention_factor.
        self.inv_freq, self.rope_scale = rope_parameters(cfg, self.head_dim)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # x: [heads, T, hd]; positions: [T]
        angles = positions.float()[:, None] * self.inv_freq[None, :]  # [T, hd/2]
        emb = torch.cat((angles, angles), dim=-1)
        return x * (emb.cos() * self.rope_scale) + rotate_half(x) * (emb.sin() * self.rope_scale)

    def _attention(self, layer, x, positions, cache):
        T = x.shape[0]
        hd = self.head_dim
        q = linear(x, layer["q"])
        k = linear(x, layer["k"])
        v = linear(x, layer["v"])
        if self.qkv_bias:
            q, k, v = q + layer["q_bias"], k + layer["k_bias"], v + layer["v_bias"]
        q = q.view(T, self.n_heads, hd)
        k = k.view(T, self.n_kv, hd)
        v = v.view(T, self.n_kv, hd)
        if not self.qwen2:
            q = rms_norm(q, layer["q_norm"], self.eps)
            k = rms_norm(k, layer["k_norm"], self.eps)
        q = self._rope(q.transpose(0, 1), positions)  # [nq, T, hd]
        k = self._rope(k.transpose(0, 1), positions)  # [nkv, T, hd]
        v = v.transpose(0, 1)
        if self.kv_dtype is not None:
            k, v = kv_store(k, self.kv_dtype), kv_store(v, self.kv_dtype)
        if cache is not None:  # contiguous per-layer cache of earlier positions
            if "k" in cache:
                k = torch.cat((cache["k"], k), dim=1)
                v = torch.cat((cache["v"], v), dim=1)
            cache["k"], cache["v"] = k, v
        S = k.shape[1]
        rep = self.n_heads // self.n_kv
        k = k.repeat_interleave(rep, dim=0)  # head h -> kv head h // rep
        v = v.repeat_interleave(rep, dim=0)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)  # [nq, T, S]
        # Query i sits at absolute position S - T + i and sees keys 0 .. S - T + i.
        qpos = torch.arange(S - T, S)[:, None]
        kpos = torch.arange(S)[None, :]
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        out = (probs @ v).transpose(0, 1).reshape(T, self.n_heads * hd)
        out = linear(out, layer["o"])
        if self.o_bias:
            out = out + layer["o_bias"]
        return out

    @staticmethod
    def _swiglu(mlp, x):
        return linear(torch.nn.functional.silu(linear(x, mlp["gate"])) * linear(x, mlp["up"]), mlp["down"])

    def _sparse_moe(self, layer, x):
        """Qwen3MoeSparseMoeBlock.forward on x [T, hidden]."""
        router_logits = linear(x, layer["router"])  # [T, E]
        probs = torch.softmax(router_logits, dim=1, dtype=torch.float32)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)  # [T, k], sorted descending
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        # expert_mask [E, k, T] as transformers builds it; the experts hit, in ascending order.
        expert_mask = torch.nn.functional.one_hot(chosen, num_classes=self.n_experts).permute(2, 1, 0)
        for e in torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist():
            slot, tok = torch.where(expert_mask[e])
            y = self._swiglu(layer["experts"][e], x[tok]) * weights[tok, slot, None]
            out.index_add_(0, tok, y)
        return out

    @torch.no_grad()
    def forward(self, ids, caches=None, start=0) -> torch.Tensor:
        """Logits [T, vocab] for tokens `ids` at positions start.. (caches: per-layer dicts)."""
        return linear(self.hidden_states(ids, caches, start), self.lm_head)

    @torch.no_grad()
    def hidden_states(self, ids, caches=None, start=0) -> torch.Tensor:
        """The final-normed hidden states [T, hidden] (transformers' last_hidden_state)."""
        ids = torch.tensor(ids, dtype=torch.int64)
        positions = torch.arange(start, start + ids.shape[0])
        x = self.embed[ids]
        for i, layer in enumerate(self.layers):
            h = rms_norm(x, layer["input_norm"], self.eps)
            x = x + self._attention(layer, h, positions, None if caches is None else caches[i])
            h = rms_norm(x, layer["post_norm"], self.eps)
            x = x + (self._sparse_moe(layer, h) if "router" in layer else self._swiglu(layer, h))
        return rms_norm(x, self.final_norm, self.eps)

    def logits(self, ids) -> np.ndarray:
        return self.forward(list(ids)).numpy().astype(np.float32)

    def greedy(self, ids, n: int):
        """n greedy next tokens after prompt `ids` (argmax, ties to the lowest id)."""
        caches = [dict() for _ in self.layers]
        logits = self.forward(list(ids), caches, 0)
        pos = len(ids)
        out = []
        for _ in range(n):
            tok = int(torch.argmax(logits[-1]).item())
            out.append(tok)
            logits = self.forward([tok], caches, pos)
            pos += 1
        return out


def parse_ids(text: str):
    return [int(t) for t in text.replace(" ", "").split(",") if t]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--token-ids")
    ap.add_argument("--out")
    ap.add_argument("--prompts")
    ap.add_argument("--out-dir")
    ap.add_argument("--greedy", type=int, default=0)
    ap.add_argument("--greedy-out")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads if args.threads > 0 else (os.cpu_count() or 1))
    model = Qwen3Reference(args.model)
    if args.token_ids is not None:
        ids = parse_ids(args.token_ids)
        if args.out:
            np.save(args.out, model.logits(ids))
        if args.greedy:
            toks = ",".join(map(str, model.greedy(ids, args.greedy)))
            if args.greedy_out:
                with open(args.greedy_out, "w") as f:
                    f.write(toks + "\n")
            else:
                print(toks)
    elif args.prompts is not None:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(args.prompts) as f:
            prompts = [parse_ids(line) for line in f if line.strip()]
        for i, ids in enumerate(prompts):
            np.save(os.path.join(args.out_dir, f"logits_{i}.npy"), model.logits(ids))
            if args.greedy:
                with open(os.path.join(args.out_dir, f"greedy_{i}.txt"), "w") as f:
                    f.write(",".join(map(str, model.greedy(ids, args.greedy))) + "\n")
    else:
        ap.error("give --token-ids or --prompts")


if __name__ == "__main__":
    main()
