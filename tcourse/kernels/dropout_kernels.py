"""Dropout whose mask is never stored: regenerated from (seed, element index) whenever it is needed.

``tl.rand(seed, offsets)`` is a counter-based generator (Philox): the number for element ``i`` depends
only on ``seed`` and ``i``, not on which program computed it, the block size or the launch order. So the
forward pass keeps nothing but the seed, and the backward pass, run with the same seed, rebuilds exactly
the same keep-mask: dropout's backward is the same kernel applied to the incoming gradient.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import cdiv


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p  # the same number for element i whatever BLOCK is
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def keep_mask_kernel(out_ptr, n, p, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, (tl.rand(seed, offs) > p).to(tl.int8), mask=offs < n)


def _check_p(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")


def dropout(x: torch.Tensor, p: float, seed: int, BLOCK: int = 1024) -> torch.Tensor:
    """Zero each element with probability ``p`` (decided by ``tl.rand(seed, i)``), scale the rest by 1/(1-p)."""
    _check_p(p)
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        dropout_kernel[(cdiv(n, BLOCK),)](x, out, n, float(p), seed, BLOCK=BLOCK)
    return out


def keep_mask(n: int, p: float, seed: int, device="cpu", BLOCK: int = 1024) -> torch.Tensor:
    """The keep-mask ``dropout(x, p, seed)`` uses for a tensor of ``n`` elements (bool, flat)."""
    _check_p(p)
    out = torch.empty(n, dtype=torch.int8, device=device)
    if n:
        keep_mask_kernel[(cdiv(n, BLOCK),)](out, n, float(p), seed, BLOCK=BLOCK)
    return out.bool()


class Dropout(torch.autograd.Function):
    """Saves only ``seed`` for backward (no mask tensor): ``dx = dropout(dy, p, seed)``."""

    @staticmethod
    def forward(ctx, x, p, seed):
        ctx.p, ctx.seed = p, seed
        return dropout(x, p, seed).view_as(x)

    @staticmethod
    def backward(ctx, dy):
        return dropout(dy, ctx.p, ctx.seed).view_as(dy), None, None
