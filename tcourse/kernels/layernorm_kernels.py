"""LayerNorm forward over the last dim of a 2-D tensor: (x - mean) / sqrt(var + eps) * weight + bias."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import Launcher, check_2d, next_power_of_2, on_gpu

MAX_BLOCK = 8192  # columns per loop step; rows up to this width stay in registers


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride_x, stride_o, eps,
                     BLOCK_N: tl.constexpr, ONE_BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    cols = tl.arange(0, BLOCK_N)
    if ONE_BLOCK:  # the whole row is held in registers: one read, one write
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
        tl.store(o_row + cols, (d * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)
    else:  # wide rows: mean, then variance around it (two-pass, stable), then normalise
        acc = tl.zeros((BLOCK_N,), tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
        acc = tl.zeros((BLOCK_N,), tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            mask = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            d = tl.where(mask, x - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK_N):
            mask = start + cols < n_cols
            x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=mask).to(tl.float32)
            b = tl.load(b_ptr + start + cols, mask=mask).to(tl.float32)
            tl.store(o_row + start + cols, ((x - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=mask)


layernorm_launch = Launcher(layernorm_kernel)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Like ``torch.nn.functional.layer_norm(x, (x.shape[1],), weight, bias, eps)``, statistics in fp32."""
    check_2d("layernorm", x)
    n_rows, n_cols = x.shape
    if weight.shape != (n_cols,) or bias.shape != (n_cols,):
        raise ValueError(f"weight and bias must have shape ({n_cols},)")
    x = x if x.stride(-1) == 1 else x.contiguous()
    w, b = weight.contiguous(), bias.contiguous()
    out = x.new_empty((n_rows, n_cols))
    if x.numel() == 0:
        return out
    block_n = min(next_power_of_2(n_cols), MAX_BLOCK)
    warps = 4 if block_n <= 1024 else 8 if block_n <= 4096 else 16
    layernorm_launch((n_rows,), (x, w, b, out, n_cols, x.stride(0), out.stride(0), float(eps)),
                     {"BLOCK_N": block_n, "ONE_BLOCK": block_n >= n_cols, "num_warps": warps if on_gpu(x) else 4})
    return out
