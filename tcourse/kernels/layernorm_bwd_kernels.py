"""LayerNorm for training: a forward pass that keeps each row's mean and 1/std, and the backward pass.

For one row, with ``xhat = (x - mean) * rstd`` and ``g = dy * w``:

    dx = rstd * (g - mean(g) - xhat * mean(g * xhat))        (N columns, means over the row)
    dw = sum over rows of dy * xhat,   db = sum over rows of dy

``dx`` is row-local; ``dw``/``db`` reduce across all rows. Two ways to do that reduction:

- ``"partial"``: ``G`` programs each walk rows ``g, g + G, ...``, summing their rows' ``dy * xhat`` and
  ``dy`` in registers, write one partial row each into a ``(G, N)`` buffer; a second kernel adds the G
  partial rows. Deterministic (a fixed summation order), one extra small launch.
- ``"atomic"``: one program per row adds its row straight into fp32 ``dw``/``db`` with ``tl.atomic_add``.
  One launch, but programs contend for the same addresses and the order of additions (hence the
  last bits of the result) changes from run to run.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import cdiv, check_2d, next_power_of_2


@triton.jit
def layernorm_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_cols, stride, eps,
                         BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(ACC)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask).to(ACC)
    b = tl.load(b_ptr + cols, mask=mask).to(ACC)
    tl.store(y_ptr + row * stride + cols, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def _row_grads(x_ptr, dy_ptr, w, mean_ptr, rstd_ptr, dx_ptr, row, cols, mask, n_cols, stride, ACC: tl.constexpr):
    """dx of one row (stored), and the row's dy * xhat and dy (returned, for dw and db)."""
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(ACC)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(ACC)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    g = dy * w
    c1 = tl.sum(g * xhat, axis=0) / n_cols
    c2 = tl.sum(g, axis=0) / n_cols
    dx = (g - c2 - xhat * c1) * rstd
    tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    return dy * xhat, dy


@triton.jit
def layernorm_bwd_partial_kernel(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr, db_part_ptr,
                                 n_rows, n_cols, stride, BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    g = tl.program_id(0)
    groups = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
    dw = tl.zeros((BLOCK_N,), ACC)
    db = tl.zeros((BLOCK_N,), ACC)
    for row in range(g.to(tl.int64), n_rows, groups):
        dwr, dbr = _row_grads(x_ptr, dy_ptr, w, mean_ptr, rstd_ptr, dx_ptr, row, cols, mask,
                              n_cols, stride, ACC)
        dw += dwr
        db += dbr
    tl.store(dw_part_ptr + g * n_cols + cols, dw, mask=mask)
    tl.store(db_part_ptr + g * n_cols + cols, db, mask=mask)


@triton.jit
def sum_rows_kernel(part_ptr, out_ptr, n_parts, n_cols, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                    ACC: tl.constexpr):
    """out[c] = sum over p of part[p, c]: one program per BLOCK_C columns."""
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_P, BLOCK_C), ACC)
    for p0 in range(0, n_parts, BLOCK_P):
        rows = p0 + tl.arange(0, BLOCK_P)
        m = (rows[:, None] < n_parts) & (cols[None, :] < n_cols)
        acc += tl.load(part_ptr + rows[:, None] * n_cols + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


@triton.jit
def layernorm_bwd_atomic_kernel(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, n_cols, stride,
                                BLOCK_N: tl.constexpr, ACC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(ACC)
    dwr, dbr = _row_grads(x_ptr, dy_ptr, w, mean_ptr, rstd_ptr, dx_ptr, row, cols, mask, n_cols, stride, ACC)
    tl.atomic_add(dw_ptr + cols, dwr, mask=mask)
    tl.atomic_add(db_ptr + cols, dbr, mask=mask)


def _acc(t: torch.Tensor):
    """(kernel accumulator dtype, torch dtype of statistics and dw/db sums): fp32, or fp64 for fp64 inputs."""
    return (tl.float64, torch.float64) if t.dtype == torch.float64 else (tl.float32, torch.float32)


def _warps(block_n: int) -> int:
    return 4 if block_n <= 1024 else 8 if block_n <= 4096 else 16


def layernorm_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    """``(y, mean, rstd)`` for a 2-D ``x``; mean and rstd (one per row) are fp32, fp64 for fp64 ``x``."""
    check_2d("layernorm_fwd", x)
    x = x.contiguous()
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    acc, stat = _acc(x)
    mean = torch.empty(n_rows, dtype=stat, device=x.device)
    rstd = torch.empty_like(mean)
    block = next_power_of_2(n_cols)
    layernorm_fwd_kernel[(n_rows,)](x, weight, bias, y, mean, rstd, n_cols, x.stride(0), float(eps),
                                    BLOCK_N=block, ACC=acc, num_warps=_warps(block))
    return y, mean, rstd


def default_groups(n_rows: int, device) -> int:
    """Programs of the partial-sum kernel: a few per SM on a GPU (enough rows each to amortise the
    partial row it writes), 4 under the interpreter."""
    if torch.device(device).type != "cuda":
        return min(4, max(n_rows, 1))
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(n_rows, 4 * sms))


def layernorm_bwd(dy, x, weight, mean, rstd, strategy: str = "partial", groups: int | None = None):
    """``(dx, dw, db)`` of LayerNorm over the last dim, from the forward's saved ``mean`` and ``rstd``."""
    if strategy not in ("partial", "atomic"):
        raise ValueError(f"strategy must be 'partial' or 'atomic', not {strategy!r}")
    x, dy = x.contiguous(), dy.contiguous()
    n_rows, n_cols = x.shape
    dx = torch.empty_like(x)
    block = next_power_of_2(n_cols)
    acc, stat = _acc(x)
    if strategy == "atomic":
        dw = torch.zeros(n_cols, dtype=stat, device=x.device)
        db = torch.zeros_like(dw)
        layernorm_bwd_atomic_kernel[(n_rows,)](x, dy, weight, mean, rstd, dx, dw, db, n_cols, x.stride(0),
                                               BLOCK_N=block, ACC=acc, num_warps=_warps(block))
    else:
        G = groups or default_groups(n_rows, x.device)
        dw_part = torch.empty((G, n_cols), dtype=stat, device=x.device)
        db_part = torch.empty_like(dw_part)
        layernorm_bwd_partial_kernel[(G,)](x, dy, weight, mean, rstd, dx, dw_part, db_part, n_rows, n_cols,
                                           x.stride(0), BLOCK_N=block, ACC=acc, num_warps=_warps(block))
        dw = torch.empty(n_cols, dtype=stat, device=x.device)
        db = torch.empty_like(dw)
        BLOCK_C = 64
        for part, out in ((dw_part, dw), (db_part, db)):
            sum_rows_kernel[(cdiv(n_cols, BLOCK_C),)](part, out, G, n_cols, BLOCK_P=32, BLOCK_C=BLOCK_C, ACC=acc)
    return dx, dw.to(weight.dtype), db.to(weight.dtype)


class LayerNorm(torch.autograd.Function):
    """``F.layer_norm(x, (N,), weight, bias, eps)`` for 2-D ``x`` with Triton forward and backward."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5, strategy="partial"):
        y, mean, rstd = layernorm_fwd(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.strategy = strategy
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = layernorm_bwd(dy, x, weight, mean, rstd, ctx.strategy)
        return dx, dw, db, None, None
