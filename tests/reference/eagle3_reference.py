"""A plain PyTorch EAGLE-3 draft head over a dense Qwen3 target, fp32 throughout: the independent
reference for the engine's head (src/model/eagle3_head.h).

Written from the semantics of vLLM's Eagle3LlamaForCausalLM (llama_eagle3.py) as the fact sheet
../shared/reference/speculative.md §4.3 records them:
  - The target (qwen3_reference.py) runs the prompt; aux state i of row t is its residual stream
    entering layer L_i (the embedding for layer 0), L = eagle_aux_hidden_state_layer_ids (top
    level or in eagle_config) or (2, N // 2, N - 3). h_t = fc(cat(aux_0, aux_1, aux_2)).
  - Head row t (position t) pairs h_t with token ids[t + 1]: e = RMSNorm(embed(x); input_layernorm)
    (the head's embed_tokens, else the target's), g = RMSNorm(h; hidden_norm), the residual starts
    at h (g with norm_before_residual); q, k, v = Linear(cat(e, g)); plain RoPE (the head's
    rope_theta, rotate-half); causal grouped-query attention scaled 1/sqrt(head_dim) over the
    head's own rows; residual += o_proj(attn); residual += down(silu(gate(n)) * up(n)) with
    n = RMSNorm(residual; post_attention_layernorm); prenorm = residual.
  - logits over the draft vocabulary = lm_head(RMSNorm(prenorm; norm)); target id of draft id i =
    i + d2t[i]; every other target id -inf.
  - A draft step feeds the prenorm output back as h, unchanged (no fc), with the next token.
Checkpoint names: midlayer.* (or layers.0.*), an optional model. prefix.

Usage:
  eagle3_reference.py --model TARGET --head HEAD --token-ids 1,2,3 --extra-token X --out logits.npy
    rows 0 .. T-2: head rows over the target's states (row t: h_t, token ids[t + 1]); row T-1: one
    draft step fed back: the prenorm of row T-2 with token X at position T-1. logits [T, vocab].
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_reader import read_safetensors  # noqa: E402
from qwen3_reference import Qwen3Reference, rms_norm, rotate_half  # noqa: E402


def canonical(name):
    if name.startswith("model."):
        name = name[len("model."):]
    if name.startswith("midlayer."):
        name = "layers.0." + name[len("midlayer."):]
    return name


@torch.no_grad()
def aux_states(ref, ids, layers):
    """The residual stream entering each layer in `layers` [T, 3H] (ids teacher-forced)."""
    ids_t = torch.tensor(ids, dtype=torch.int64)
    positions = torch.arange(0, len(ids))
    x = ref.embed[ids_t].float()
    caught = {}
    for i, layer in enumerate(ref.layers):
        caught[i] = x.clone()
        h = rms_norm(x, layer["input_norm"], ref.eps)
        x = x + ref._attention(layer, h, positions, None)
        h = rms_norm(x, layer["post_norm"], ref.eps)
        x = x + ref._swiglu(layer, h)
    return torch.cat([caught[i] for i in layers], dim=-1)


class Eagle3Head:
    def __init__(self, head_dir, target):
        cfg = json.load(open(os.path.join(head_dir, "config.json")))
        w = {}
        for f in sorted(os.listdir(head_dir)):
            if f.endswith(".safetensors"):
                for k, v in read_safetensors(os.path.join(head_dir, f)).items():
                    w[canonical(k)] = v
        self.w = {k: (v.float() if v.is_floating_point() else v) for k, v in w.items()}
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads", self.nh)
        self.hd = cfg.get("head_dim", self.H // self.nh)
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.V = cfg["vocab_size"]
        self.Vd = cfg.get("draft_vocab_size", self.V)
        self.nbr = cfg.get("norm_before_residual", False)
        theta = cfg.get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        self.inv_freq = self.inv_freq.float()
        ids = cfg.get("eagle_aux_hidden_state_layer_ids") or cfg.get("eagle_config", {}).get(
            "eagle_aux_hidden_state_layer_ids")
        n = len(target.layers)
        self.aux_layers = list(ids) if ids else [2, n // 2, n - 3]
        self.embed = self.w["embed_tokens.weight"] if "embed_tokens.weight" in self.w else target.embed.float()
        d2t = self.w.get("d2t", torch.zeros(self.Vd, dtype=torch.int64)).to(torch.int64)
        self.targets = torch.arange(self.Vd, dtype=torch.int64) + d2t
        self.k_cache = None
        self.v_cache = None

    def _rope(self, x, positions):  # x [heads, T, hd]
        angles = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return x * emb.cos() + rotate_half(x) * emb.sin()

    @torch.no_grad()
    def forward(self, hidden, tokens, positions):
        """logits [n, V] and prenorm [n, H] of rows (hidden [n, H], tokens, positions), continuing the cache."""
        w, L = self.w, "layers.0."
        T = hidden.shape[0]
        e = rms_norm(self.embed[torch.tensor(tokens, dtype=torch.int64)], w[L + "input_layernorm.weight"], self.eps)
        g = rms_norm(hidden, w[L + "hidden_norm.weight"], self.eps)
        r = g if self.nbr else hidden
        x = torch.cat((e, g), dim=-1)
        q = (x @ w[L + "self_attn.q_proj.weight"].T).view(T, self.nh, self.hd).transpose(0, 1)
        k = (x @ w[L + "self_attn.k_proj.weight"].T).view(T, self.nkv, self.hd).transpose(0, 1)
        v = (x @ w[L + "self_attn.v_proj.weight"].T).view(T, self.nkv, self.hd).transpose(0, 1)
        pos = torch.tensor(positions, dtype=torch.int64)
        q, k = self._rope(q, pos), self._rope(k, pos)
        if self.k_cache is not None:
            k = torch.cat((self.k_cache, k), dim=1)
            v = torch.cat((self.v_cache, v), dim=1)
        self.k_cache, self.v_cache = k, v
        S = k.shape[1]
        rep = self.nh // self.nkv
        kk, vv = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        scores = (q @ kk.transpose(1, 2)) / math.sqrt(self.hd)
        qpos = torch.arange(S - T, S)[:, None]
        kpos = torch.arange(S)[None, :]
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        attn = (torch.softmax(scores, dim=-1) @ vv).transpose(0, 1).reshape(T, self.nh * self.hd)
        r = r + attn @ w[L + "self_attn.o_proj.weight"].T
        n = rms_norm(r, w[L + "post_attention_layernorm.weight"], self.eps)
        act = torch.nn.functional.silu(n @ w[L + "mlp.gate_proj.weight"].T) * (n @ w[L + "mlp.up_proj.weight"].T)
        r = r + act @ w[L + "mlp.down_proj.weight"].T
        draft = rms_norm(r, w["norm.weight"], self.eps) @ w["lm_head.weight"].T  # [T, Vd]
        logits = torch.full((T, self.V), float("-inf"))
        logits[:, self.targets] = draft
        return logits, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--token-ids", required=True)
    ap.add_argument("--extra-token", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    ids = [int(x) for x in a.token_ids.split(",")]
    target = Qwen3Reference(a.model)
    head = Eagle3Head(a.head, target)
    aux = aux_states(target, ids, head.aux_layers)
    fused = aux @ head.w["fc.weight"].T  # [T, H]
    T = len(ids)
    logits, prenorm = head.forward(fused[:-1], ids[1:], list(range(T - 1)))
    last, _ = head.forward(prenorm[-1:], [a.extra_token], [T - 1])
    np.save(a.out, torch.cat((logits, last), dim=0).numpy().astype(np.float32))


if __name__ == "__main__":
    main()
