"""RoPE inverse frequencies and the cos/sin scale of a Qwen3 config, written from transformers'
modeling_rope_utils.py (_compute_default_rope_parameters, _compute_yarn_parameters), in float32
as transformers computes them:

  - default (rope_scaling null or rope_type "default"): inv_freq = 1 / theta^(arange(0, d, 2) / d),
    attention factor 1;
  - yarn: extrapolation 1 / pos_freqs and interpolation 1 / (factor * pos_freqs) with
    pos_freqs = theta^(arange(0, d, 2) / d), blended by a linear ramp between the correction dims
    of beta_fast (32) and beta_slow (1) over the original context (floor / ceil when truncate,
    clamped to [0, d - 1]); factor from the config, or max_position_embeddings / original when
    only the original length is given; attention factor explicit, else from mscale /
    mscale_all_dim, else 0.1 ln(factor) + 1.

rope_scaling (transformers v4) and rope_parameters (v5, which may also carry rope_theta) are both
read. Anything else raises: the reference implements only what it is written from.
"""
import math

import torch


def rope_parameters(cfg: dict, head_dim: int):
    """(inv_freq [head_dim / 2] float32, attention_factor float) for config.json `cfg`."""
    rs = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    theta = float(rs.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    d = head_dim
    pos_freqs = theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d)
    rope_type = rs.get("rope_type", rs.get("type", "default"))
    if rope_type == "default":
        return 1.0 / pos_freqs, 1.0
    if rope_type != "yarn":
        raise ValueError(f"rope type {rope_type!r} is not in the reference")
    max_pos = cfg["max_position_embeddings"]
    original = rs.get("original_max_position_embeddings") or max_pos
    factor = rs.get("factor")
    if factor is None:
        factor = max_pos / original

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention_factor = rs.get("attention_factor")
    if attention_factor is None:
        if rs.get("mscale") and rs.get("mscale_all_dim"):
            attention_factor = mscale(factor, rs["mscale"]) / mscale(factor, rs["mscale_all_dim"])
        else:
            attention_factor = mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1

    def correction_dim(rotations):
        return (d * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(d // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation_share = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_share) + (1.0 / pos_freqs) * extrapolation_share
    return inv_freq, float(attention_factor)
