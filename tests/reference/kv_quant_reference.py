"""What a KV cache of each --kv-cache-dtype stores, as a function on the reference's keys and values
(float32 [kv_heads, T, head_dim], after RoPE): the values the attention reads back.

Written from the formats' definitions (the engine's are stated in src/kernels/kv_quant.h):
  - fp32: unchanged; bf16: rounded to bfloat16 (nearest even).
  - int8: per (KV head, token) row of head_dim elements, amax = max |x|, scale = amax / 127,
    code = clamp(round_half_even(x * (127 / amax)), -127, 127), read back as code * scale.
  - fp8 (OCP E4M3FN): per row, y = x * (448 / amax) rounded to the nearest E4M3 value (ties to
    even; 3 mantissa bits, exponent bias 7, normal for |y| >= 2^-6, subnormal step 2^-9, largest
    finite 448, saturating), read back as y_q * (amax / 448).
  A row of zeros reads back zeros.

torch.round rounds half to even, as both formats do; the products are computed in float32 as the
engine computes them, so a code can differ from the engine's only where the engine's own K/V row
(another matmul kernel's rounding) differs.
"""
import torch


def _row_amax(x: torch.Tensor) -> torch.Tensor:
    return x.abs().amax(dim=-1, keepdim=True)


def _int8(x: torch.Tensor) -> torch.Tensor:
    amax = _row_amax(x)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    inv = torch.tensor(127.0, dtype=torch.float32) / safe
    codes = torch.clamp(torch.round(x * inv), -127, 127)
    out = codes * (safe / 127.0)
    return torch.where(amax > 0, out, torch.zeros_like(out))


def e4m3_round(y: torch.Tensor) -> torch.Tensor:
    """y (float32, |y| <= ~448) rounded to the nearest E4M3FN value, ties to even, saturating at 448."""
    a = y.abs()
    # frexp: a = m * 2^e with m in [0.5, 1), so floor(log2 a) = e - 1 exactly.
    _, e = torch.frexp(a)
    exp = torch.clamp(e.to(torch.int32) - 1, min=-6)  # below 2^-6 the step stays 2^-9 (subnormals)
    step = torch.pow(torch.tensor(2.0), (exp - 3).to(torch.float32))  # 3 mantissa bits
    q = torch.round(a / step) * step
    q = torch.clamp(q, max=448.0)
    return torch.copysign(q, y)


def _fp8(x: torch.Tensor) -> torch.Tensor:
    amax = _row_amax(x)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    inv = torch.tensor(448.0, dtype=torch.float32) / safe
    out = e4m3_round(x * inv) * (safe / 448.0)
    return torch.where(amax > 0, out, torch.zeros_like(out))


def kv_store(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """x [..., head_dim] float32 -> what a `dtype` KV cache reads back (float32)."""
    if dtype in (None, "fp32"):
        return x
    if dtype == "bf16":
        return x.to(torch.bfloat16).float()
    if dtype == "int8":
        return _int8(x)
    if dtype in ("fp8", "fp8_e4m3"):
        return _fp8(x)
    raise ValueError(f"KV dtype {dtype!r} is not in the reference (fp32, bf16, int8, fp8, fp8_e4m3)")


def _self_check():
    # Every E4M3FN finite value is a fixed point, and midpoints round to the even neighbour.
    vals = []
    for b in range(256):
        exp, man, sign = (b >> 3) & 15, b & 7, -1.0 if b & 0x80 else 1.0
        if exp == 15 and man == 7:
            continue  # NaN
        vals.append(sign * (man * 2.0 ** -9 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7)))
    v = torch.tensor(vals, dtype=torch.float32)
    assert torch.equal(e4m3_round(v), v), "E4M3 values must round to themselves"
    pos = torch.sort(torch.unique(v[v >= 0])).values
    mids = (pos[1:] + pos[:-1]) / 2
    got = e4m3_round(mids)
    lo, hi = pos[:-1], pos[1:]
    # the even neighbour is the one whose lowest mantissa bit is 0: its value / its step is even
    _, e = torch.frexp(lo)
    lo_step = torch.pow(torch.tensor(2.0), (torch.clamp(e.to(torch.int32) - 1, min=-6) - 3).float())
    lo_even = torch.remainder(lo / lo_step, 2) == 0
    want = torch.where(lo_even, lo, hi)
    assert torch.equal(got, want), "E4M3 midpoints must round to the even neighbour"
    assert float(e4m3_round(torch.tensor([500.0]))[0]) == 448.0


if __name__ == "__main__":
    _self_check()
    print("kv_quant_reference: E4M3 rounding self-check ok")
