"""Reads a Hugging Face checkpoint directory without the `safetensors` package.

A .safetensors file is: 8-byte little-endian header length N, N bytes of JSON mapping tensor names
to {dtype, shape, data_offsets: [begin, end)} (offsets relative to the end of the header), then the
raw little-endian tensor bytes. Sharded checkpoints list their files in
model.safetensors.index.json ("weight_map": name -> file).
"""
import json
import os
import struct

import numpy as np
import torch

_NP_DTYPES = {
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # reinterpreted below: bf16 is the top half of an f32
    "I32": np.int32,
    "I64": np.int64,
}


def _to_f32_tensor(raw: bytes, dtype: str, shape) -> torch.Tensor:
    if dtype not in _NP_DTYPES:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    arr = np.frombuffer(raw, dtype=_NP_DTYPES[dtype])
    if dtype == "BF16":
        wide = arr.astype(np.uint32)
        wide <<= 16  # in place: one f32-sized copy for the biggest tensors (embeddings)
        arr = wide.view(np.float32)
    return torch.from_numpy(arr.astype(np.float32, copy=False).reshape(shape))


def read_safetensors(path: str) -> dict:
    """Returns {name: fp32 torch.Tensor} for every tensor in one .safetensors file."""
    out = {}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        base = 8 + header_len
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            out[name] = _to_f32_tensor(f.read(end - begin), info["dtype"], info["shape"])
    return out


def read_checkpoint(model_dir: str):
    """Returns (config dict, {name: fp32 tensor}) for a checkpoint directory."""
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
        tensors.update(read_safetensors(os.path.join(model_dir, name)))
    return config, tensors
