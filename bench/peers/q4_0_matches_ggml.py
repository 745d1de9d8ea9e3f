#!/usr/bin/python3
"""Checks that the Q4_0 blocks qwen35_to_gguf.py --outtype q4_0 writes (gguf-py's reference Q4_0)
are byte for byte what llama.cpp's own quantizer (ggml_quantize_chunk in libggml-base, which
llama-quantize calls) makes of the same rows: a few tensors of a checkpoint (their first rows) and
random normal rows. Exit status 1 on any difference.

  python3 bench/peers/q4_0_matches_ggml.py --model DIR --llama LLAMA_DIR [--rows 1024]
"""
import argparse
import ctypes
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qwen3_to_gguf import as_f32, read_safetensors  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a safetensors checkpoint directory")
    ap.add_argument("--llama", required=True, help="llama.cpp checkout with build/bin/libggml-base.so")
    ap.add_argument("--rows", type=int, default=1024, help="rows taken from each tensor")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.llama, "gguf-py"))
    import gguf  # noqa: E402

    lib = ctypes.CDLL(os.path.join(a.llama, "build", "bin", "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    q4_0 = gguf.GGMLQuantizationType.Q4_0
    tensors = read_safetensors(a.model)
    cases = []
    for name, (dtype, shape, raw) in sorted(tensors.items()):
        if len(shape) == 2 and shape[-1] % 32 == 0 and (name.endswith("fc.weight") or "embed_tokens" in name
                                                       or "in_proj_qkv" in name or "o_proj" in name):
            rows = min(shape[0], a.rows)
            cases.append((name, as_f32(dtype, [rows, shape[1]], raw[: rows * shape[1] * (2 if dtype != "F32" else 4)])))
    cases.append(("normal(0, 1)", np.random.default_rng(0).standard_normal((a.rows, 2048)).astype(np.float32)))
    bad = 0
    for name, x in cases:
        x = np.ascontiguousarray(x, dtype=np.float32)
        ours = gguf.quants.quantize(x, q4_0).reshape(-1)
        ref = np.zeros(x.size // 32 * 18, np.uint8)
        lib.ggml_quantize_chunk(int(q4_0), x.ctypes.data, ref.ctypes.data, 0, x.shape[0], x.shape[1], None)
        same = np.array_equal(ours, ref)
        bad += not same
        print(f"{name} {list(x.shape)}: {'identical' if same else f'{int(np.sum(ours != ref))} bytes differ'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
