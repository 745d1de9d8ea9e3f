#!/usr/bin/env python3
"""Holds the chunked (WY) gated delta rule of gdn_chunked_reference.py to the recurrent form, in
float64 (where both are exact to ~1e-12, so a wrong formula cannot hide in rounding) and in float32
(the precision a kernel runs at): lengths below, at and across the chunk size, with a carried-in
state, decays from mild to strong. Bounds: float64 1e-9, float32 2e-4 of max |out|.
"""
import sys

import torch

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from gdn_chunked_reference import chunked_gated_delta_rule, recurrent_gated_delta_rule  # noqa: E402


def case(T, d_k, d_v, chunk, dtype, seed, g_lo):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(T, d_k, generator=gen, dtype=dtype), dim=-1) / d_k ** 0.5
    k = torch.nn.functional.normalize(torch.randn(T, d_k, generator=gen, dtype=dtype), dim=-1)
    v = torch.randn(T, d_v, generator=gen, dtype=dtype)
    g = torch.rand(T, generator=gen, dtype=dtype) * g_lo
    beta = torch.rand(T, generator=gen, dtype=dtype)
    s0 = torch.randn(d_k, d_v, generator=gen, dtype=dtype) * 0.3
    o_r, s_r = recurrent_gated_delta_rule(q, k, v, g, beta, s0)
    o_c, s_c = chunked_gated_delta_rule(q, k, v, g, beta, s0, chunk)
    scale = max(1.0, float(o_r.abs().max()))
    return float((o_c - o_r).abs().max()) / scale, float((s_c - s_r).abs().max()) / max(1.0, float(s_r.abs().max()))


def main():
    worst = {}
    for dtype, bound in ((torch.float64, 1e-9), (torch.float32, 2e-4)):
        for T, chunk in ((5, 8), (8, 8), (29, 8), (130, 64)):
            for g_lo in (-0.05, -3.0):
                eo, es = case(T, 16, 24, chunk, dtype, T * 7 + chunk, g_lo)
                worst[dtype] = max(worst.get(dtype, 0.0), eo, es)
                if not (eo <= bound and es <= bound):
                    sys.exit(f"chunked != recurrent: {dtype} T={T} C={chunk} g_lo={g_lo}: out {eo:.3g}, state {es:.3g} "
                             f"(bound {bound})")
    print(f"chunked = recurrent: worst relative error float64 {worst[torch.float64]:.3g}, "
          f"float32 {worst[torch.float32]:.3g}")
    print("ok")


if __name__ == "__main__":
    main()
