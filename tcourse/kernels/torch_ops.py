"""The LayerNorm kernels of ``layernorm_bwd_kernels`` as a PyTorch operator that ``torch.compile`` can trace.

``torch.library.triton_op`` declares ``tcourse::layernorm``; inside it ``wrap_triton(kernel)[grid](...)``
launches the Triton kernels, so the compiler sees them (it can place them in its graph, and it derives
the fake-tensor implementation from the launches). ``register_autograd`` gives it a backward made of the
same Triton backward kernels: forward and backward are both one op, and a compiled training step does
not break its graph at it. Under the CPU interpreter the op runs eagerly; ``torch.compile`` of it needs
a GPU (tracing with fake tensors cannot run interpreted kernels).
"""
from __future__ import annotations

import torch
import triton
from torch.library import triton_op, wrap_triton

from ._launch import cdiv, next_power_of_2
from .layernorm_bwd_kernels import _acc, _warps, layernorm_bwd_partial_kernel, layernorm_fwd_kernel, \
    default_groups, sum_rows_kernel


@triton_op("tcourse::layernorm", mutates_args={})
def layernorm_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(y, mean, rstd)`` of LayerNorm over the last dim of a contiguous 2-D ``x``."""
    n_rows, n_cols = x.shape
    acc, stat = _acc(x)
    y = torch.empty_like(x)
    mean = torch.empty(n_rows, dtype=stat, device=x.device)
    rstd = torch.empty(n_rows, dtype=stat, device=x.device)
    block = next_power_of_2(n_cols)
    wrap_triton(layernorm_fwd_kernel)[(n_rows,)](x, weight, bias, y, mean, rstd, n_cols, x.stride(0), eps,
                                                 BLOCK_N=block, ACC=acc, num_warps=_warps(block))
    return y, mean, rstd


@triton_op("tcourse::layernorm_backward", mutates_args={})
def layernorm_backward_op(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                          rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dx, dw, db)``: the partial-sum backward (deterministic)."""
    n_rows, n_cols = x.shape
    acc, stat = _acc(x)
    G = default_groups(n_rows, x.device)
    dx = torch.empty_like(x)
    dw_part = torch.empty((G, n_cols), dtype=stat, device=x.device)
    db_part = torch.empty((G, n_cols), dtype=stat, device=x.device)
    block = next_power_of_2(n_cols)
    wrap_triton(layernorm_bwd_partial_kernel)[(G,)](x, dy, weight, mean, rstd, dx, dw_part, db_part, n_rows, n_cols,
                                                     x.stride(0), BLOCK_N=block, ACC=acc, num_warps=_warps(block))
    dw = torch.empty(n_cols, dtype=stat, device=x.device)
    db = torch.empty(n_cols, dtype=stat, device=x.device)
    for part, out in ((dw_part, dw), (db_part, db)):
        wrap_triton(sum_rows_kernel)[(cdiv(n_cols, 64),)](part, out, G, n_cols, BLOCK_P=32, BLOCK_C=64, ACC=acc)
    return dx, dw.to(weight.dtype), db.to(weight.dtype)


def _setup_context(ctx, inputs, output):
    x, weight, _, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(x, weight, mean, rstd)


def _backward(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dw, db = layernorm_backward_op(dy.contiguous(), x, weight, mean, rstd)
    return dx, dw, db, None


layernorm_op.register_autograd(_backward, setup_context=_setup_context)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm(x, (N,), weight, bias, eps)`` through the ``tcourse::layernorm`` op (differentiable)."""
    return layernorm_op(x.contiguous(), weight, bias, eps)[0]
