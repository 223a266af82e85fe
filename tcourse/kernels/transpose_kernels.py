"""Out-of-place transpose: a contiguous ``x.T``. Tiles are read along rows and written along the
output's rows; Triton moves each tile through shared memory so both sides stay coalesced."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import Launcher, cdiv, check_2d, on_gpu


@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None].to(tl.int64) * stride_xm + rn[None, :] * stride_xn, mask=mask)
    # out is N x M, contiguous: element (m, n) of x goes to out[n, m]
    tl.store(out_ptr + rn[None, :].to(tl.int64) * M + rm[:, None], tile, mask=mask)


transpose_launch = Launcher(transpose_kernel)


def transpose(x: torch.Tensor) -> torch.Tensor:
    """``x.T.contiguous()`` for a 2-D tensor."""
    check_2d("transpose", x)
    M, N = x.shape
    out = x.new_empty((N, M))
    if x.numel() == 0:
        return out
    bm, bn = (64, 64) if on_gpu(x) else (32, 32)
    transpose_launch((cdiv(M, bm), cdiv(N, bn)), (x, out, M, N, x.stride(0), x.stride(1)),
                     {"BM": bm, "BN": bn, "num_warps": 4})
    return out
