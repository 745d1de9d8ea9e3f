"""Reads a Hugging Face checkpoint directory without the `safetensors` package.

A .safetensors file is: 8-byte little-endian header length N, N bytes of JSON mapping tensor names
to {dtype, shape, data_offsets: [begin, end)} (offsets relative to the end of the header), then the
raw little-endian tensor bytes. Sharded checkpoints list their files in
model.safetensors.index.json ("weight_map": name -> file).

Float tensors (BF16, F16, F32, and F8_E4M3 codes decoded exactly) come back as fp32, integer ones
(I32: AWQ's packed words) as int32. A pre-quantized checkpoint (config.json quantization_config
fp8 or awq) is dequantized by dequantize.py, so its projections come back as fp32 `.weight`s.
"""
import json
import os
import struct

import numpy as np
import torch

from dequantize import dequantize_checkpoint  # same directory, on sys.path like this module

_NP_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # reinterpreted below: bf16 is the top half of an f32
    "F8_E4M3": np.uint8,  # decoded below through E4M3_VALUES
    "I32": np.int32,
    "I64": np.int64,
}


def _e4m3_values() -> np.ndarray:
    """The value of each OCP FP8 E4M3FN code: sign, 4 exponent bits (bias 7), 3 mantissa bits;
    exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 is NaN; there are no infinities."""
    v = np.empty(256, dtype=np.float64)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            mag = np.nan
        elif e == 0:
            mag = (m / 8.0) * 2.0 ** -6
        else:
            mag = (1.0 + m / 8.0) * 2.0 ** (e - 7)
        v[code] = -mag if s else mag
    return v.astype(np.float32)


E4M3_VALUES = _e4m3_values()


def _to_tensor(raw: bytes, dtype: str, shape) -> torch.Tensor:
    if dtype not in _NP_DTYPES:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    arr = np.frombuffer(raw, dtype=_NP_DTYPES[dtype])
    if dtype in ("I32", "I64"):
        return torch.from_numpy(arr.copy().reshape(shape))
    if dtype == "F8_E4M3":
        arr = E4M3_VALUES[arr]
    if dtype == "BF16":
        wide = arr.astype(np.uint32)
        wide <<= 16  # in place: one f32-sized copy for the biggest tensors (embeddings)
        arr = wide.view(np.float32)
    return torch.from_numpy(arr.astype(np.float32, copy=False).reshape(shape))


def read_safetensors(path: str, names=None) -> dict:
    """Returns {name: torch.Tensor} for every tensor in one .safetensors file (only those in
    `names` when given)."""
    out = {}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        for name, info in header.items():
            if name == "__metadata__" or (names is not None and name not in names):
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            out[name] = _to_tensor(f.read(end - begin), info["dtype"], info["shape"])
    return out


def read_checkpoint(model_dir: str, names=None, dequantize=True):
    """Returns (config dict, {name: tensor}) for a checkpoint directory: every tensor, or those in
    `names`; with `dequantize`, a pre-quantized checkpoint's projections as fp32 `.weight`s."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(read_safetensors(os.path.join(model_dir, name), names))
    if dequantize:
        dequantize_checkpoint(config, tensors)
    return config, tensors
