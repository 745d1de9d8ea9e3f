"""Dequantizes a pre-quantized checkpoint's projections with the formats' published formulas,
independently of the engine's decoders (src/model/quantized_source.cpp):

- fp8 (quantization_config.quant_method "fp8", as transformers' FineGrainedFP8 / DeepSeek's
  weight_dequant): `<proj>.weight` holds E4M3 codes [out, in] (decoded to fp32 by
  checkpoint_reader) and `<proj>.weight_scale_inv` one multiplicative scale per
  weight_block_size [bn, bk] tile, [ceil(out / bn), ceil(in / bk)]. Each scale is repeated over
  its tile and the grid cropped to [out, in]: W = codes * scale.
- awq (quant_method "awq", version "gemm", as AutoAWQ's dequantize_gemm): `<proj>.qweight` int32
  [in, out / 8] and `<proj>.qzeros` int32 [in / group, out / 8] hold 4-bit values, nibble i at
  bits 4i..4i+3; unpacked in nibble order, every run of 8 is put back in column order by
  AWQ_REVERSE_ORDER (nibble i holds column [0, 2, 4, 6, 1, 3, 5, 7][i]). With `<proj>.scales`
  [in / group, out]: W^T = (q - z) * s, each group row repeated over its `group` input rows;
  W = W^T transposed to [out, in].
- gptq (quant_method "gptq", as AutoGPTQ / GPTQModel pack it and llama.cpp's converter reads it):
  `<proj>.qweight` int32 [in / 8, out] is packed along the input dimension (nibble i of word
  [r][n] is input row 8r + i), `<proj>.qzeros` int32 [in / group, out / 8] along the output
  dimension (nibble i of word [g][j] is output column 8j + i). Stored zero points are zero - 1
  under checkpoint_format "gptq" (or absent), as is under "gptq_v2". With `<proj>.scales`
  [in / group, out] and `<proj>.g_idx` [in] (the group of each input row; k // group when absent):
  W^T[k] = (q[k] - z[g_idx[k]]) * s[g_idx[k]], W = W^T transposed to [out, in].

The quantized tensors are replaced in place by fp32 `<proj>.weight` [out, in].
"""
import torch

AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def dequantize_fp8(codes: torch.Tensor, scale_inv: torch.Tensor, block) -> torch.Tensor:
    out_f, in_f = codes.shape
    bn, bk = block
    gn, gk = -(-out_f // bn), -(-in_f // bk)
    if tuple(scale_inv.shape) != (gn, gk):
        raise ValueError(f"weight_scale_inv shape {tuple(scale_inv.shape)}, expected {(gn, gk)}")
    scale = scale_inv.float().repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)[:out_f, :in_f]
    return codes.float() * scale


def _unpack_awq(packed: torch.Tensor) -> torch.Tensor:
    """int32 [rows, cols / 8] -> int64 [rows, cols] in column order."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    nibbles = (words[:, :, None] >> shifts[None, None, :]) & 15  # [rows, cols / 8, 8] in nibble order
    return nibbles[:, :, AWQ_REVERSE_ORDER].reshape(packed.shape[0], -1)


def dequantize_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, group: int) -> torch.Tensor:
    in_f = qweight.shape[0]
    if in_f % group or tuple(qzeros.shape) != (in_f // group, qweight.shape[1]) or \
            tuple(scales.shape) != (in_f // group, qweight.shape[1] * 8):
        raise ValueError(f"AWQ shapes qweight {tuple(qweight.shape)} qzeros {tuple(qzeros.shape)} "
                         f"scales {tuple(scales.shape)} do not fit group {group}")
    q = _unpack_awq(qweight)  # [in, out]
    z = _unpack_awq(qzeros).repeat_interleave(group, dim=0)  # [in, out]
    s = scales.float().repeat_interleave(group, dim=0)
    return ((q - z).float() * s).t().contiguous()


def _unpack_sequential(packed: torch.Tensor) -> torch.Tensor:
    """int32 [rows, cols] -> int64 [rows, cols, 8]: nibble i of each word at [..., i]."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    return (words[:, :, None] >> shifts[None, None, :]) & 15


def dequantize_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, g_idx, group: int,
                    v1_zeros: bool) -> torch.Tensor:
    in_f, out_f = qweight.shape[0] * 8, qweight.shape[1]
    if in_f % group or tuple(qzeros.shape) != (in_f // group, out_f // 8) or \
            tuple(scales.shape) != (in_f // group, out_f):
        raise ValueError(f"GPTQ shapes qweight {tuple(qweight.shape)} qzeros {tuple(qzeros.shape)} "
                         f"scales {tuple(scales.shape)} do not fit group {group}")
    # [in / 8, out, 8] -> [in / 8, 8, out] -> [in, out]: input row 8r + i from nibble i of row r.
    q = _unpack_sequential(qweight).permute(0, 2, 1).reshape(in_f, out_f)
    z = _unpack_sequential(qzeros).reshape(in_f // group, out_f) + (1 if v1_zeros else 0)
    g = torch.arange(in_f) // group if g_idx is None else g_idx.to(torch.int64)
    return ((q - z[g]).float() * scales.float()[g]).t().contiguous()


def dequantize_checkpoint(config: dict, tensors: dict) -> None:
    q = config.get("quantization_config")
    if not q:
        return
    method = q.get("quant_method")
    if method == "fp8":
        block = q.get("weight_block_size")
        if not block or len(block) != 2:
            raise ValueError(f"fp8 quantization_config without a 2-D weight_block_size: {q}")
        for name in [n for n in tensors if n.endswith(".weight_scale_inv")]:
            weight = name[: -len("_scale_inv")]
            if weight in tensors:
                tensors[weight] = dequantize_fp8(tensors[weight], tensors.pop(name), block)
    elif method == "awq":
        if q.get("bits", 4) != 4 or str(q.get("version", "gemm")).lower() != "gemm" or not q.get("zero_point", True):
            raise ValueError(f"only 4-bit AWQ GEMM with zero points is supported: {q}")
        group = int(q.get("group_size", 128))
        for name in [n for n in tensors if n.endswith(".qweight")]:
            stem = name[: -len(".qweight")]
            if stem + ".qzeros" in tensors and stem + ".scales" in tensors:
                tensors[stem + ".weight"] = dequantize_awq(tensors.pop(name), tensors.pop(stem + ".qzeros"),
                                                           tensors.pop(stem + ".scales"), group)
    elif method == "gptq":
        if q.get("bits", 4) != 4:
            raise ValueError(f"only 4-bit GPTQ is supported: {q}")
        fmt = q.get("checkpoint_format", q.get("format", "gptq"))
        if fmt not in ("gptq", "gptq_v2"):
            raise ValueError(f"GPTQ checkpoint_format {fmt!r} is not supported (gptq, gptq_v2)")
        group = int(q.get("group_size", 128))
        for name in [n for n in tensors if n.endswith(".qweight")]:
            stem = name[: -len(".qweight")]
            if stem + ".qzeros" in tensors and stem + ".scales" in tensors:
                tensors[stem + ".weight"] = dequantize_gptq(tensors.pop(name), tensors.pop(stem + ".qzeros"),
                                                            tensors.pop(stem + ".scales"),
                                                            tensors.pop(stem + ".g_idx", None), group, fmt == "gptq")
    else:
        raise ValueError(f"quantization_config.quant_method {method!r} is not supported (supported: fp8, awq, gptq)")
