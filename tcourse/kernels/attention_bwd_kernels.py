"""FlashAttention-2 forward (keeping each row's log-sum-exp) and backward, q/k/v of shape (B, H, S, D).

Forward: per block of queries, online softmax over key blocks; besides ``O`` it stores
``lse = m + log(l)`` per query row, so the backward can rebuild any block of ``P = softmax(S)`` as
``exp(S - lse)`` without the S x S matrix and without running the max/sum recurrences again.

Backward, with ``delta_i = sum_d dO_id * O_id`` (one number per query row, a small pre-pass):

    P = exp(Q K^T * scale - lse)     dV = P^T dO      dP = dO V^T
    dS = P * (dP - delta)            dQ = dS K * scale      dK = dS^T Q * scale

Two kernels, so that no output is written by two programs (no atomics):

- ``attention_bwd_dkdv_kernel``: one program per block of keys; it holds K_j, V_j, dK_j, dV_j and loops
  over the query blocks that see them (causal: from the block of the diagonal on);
- ``attention_bwd_dq_kernel``: one program per block of queries; it holds Q_i, dO_i, dQ_i and loops over
  key blocks (causal: up to the diagonal).

P and dS are recomputed in both: the price of writing each gradient once, from one program.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import cdiv


@triton.jit
def _rows(ptr, base, r, S, D: tl.constexpr):
    """Rows ``r`` (zeros past S) of one head's contiguous (S, D) matrix starting at ``ptr + base``."""
    rd = tl.arange(0, D)
    return tl.load(ptr + base + r[:, None] * D + rd[None, :], mask=r[:, None] < S, other=0.0)


@triton.jit
def _put_rows(ptr, base, r, S, D: tl.constexpr, x):
    rd = tl.arange(0, D)
    tl.store(ptr + base + r[:, None] * D + rd[None, :], x.to(ptr.dtype.element_ty), mask=r[:, None] < S)


@triton.jit
def _row_stats(ptr, bh, S, r):
    """One number per query row (lse or delta) of head ``bh``."""
    return tl.load(ptr + bh * S + r, mask=r < S, other=0.0)


@triton.jit
def attention_fwd_lse_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, sm_scale, CAUSAL: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _rows(q_ptr, base, rm, S, D)
    m_i = tl.full((BLOCK_M,), float("-inf"), ACC)
    l_i = tl.zeros((BLOCK_M,), ACC)
    acc = tl.zeros((BLOCK_M, D), ACC)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S) if CAUSAL else S
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = _rows(k_ptr, base, rn, S, D)
        v = _rows(v_ptr, base, rn, S, D)
        s = tl.dot(q, tl.trans(k)).to(ACC) * sm_scale
        valid = rn[None, :] < S
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(ACC)
        m_i = m_new
    _put_rows(o_ptr, base, rm, S, D, acc / l_i[:, None])
    tl.store(lse_ptr + bh * S + rm, m_i + tl.log(l_i), mask=rm < S)


@triton.jit
def attention_bwd_delta_kernel(o_ptr, do_ptr, delta_ptr, rows, D: tl.constexpr, BLOCK_M: tl.constexpr,
                               ACC: tl.constexpr):
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    m = r[:, None] < rows
    o = tl.load(o_ptr + r[:, None].to(tl.int64) * D + rd[None, :], mask=m, other=0.0).to(ACC)
    do = tl.load(do_ptr + r[:, None].to(tl.int64) * D + rd[None, :], mask=m, other=0.0).to(ACC)
    tl.store(delta_ptr + r, tl.sum(o * do, axis=1), mask=r < rows)


@triton.jit
def _p_block(q, k, lse, rm, rn, S, sm_scale, CAUSAL: tl.constexpr, ACC: tl.constexpr):
    """P for a (query block, key block) pair, rebuilt from the saved log-sum-exp; 0 where masked."""
    s = tl.dot(q, tl.trans(k)).to(ACC) * sm_scale
    valid = (rm[:, None] < S) & (rn[None, :] < S)
    if CAUSAL:
        valid = valid & (rn[None, :] <= rm[:, None])
    return tl.where(valid, tl.exp(s - lse[:, None]), 0.0)


@triton.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, S, sm_scale,
                              CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                            ACC: tl.constexpr):
    pid_n = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k = _rows(k_ptr, base, rn, S, D)
    v = _rows(v_ptr, base, rn, S, D)
    dk = tl.zeros((BLOCK_N, D), ACC)
    dv = tl.zeros((BLOCK_N, D), ACC)
    lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M if CAUSAL else 0  # earlier queries never see these keys
    for m0 in range(lo, S, BLOCK_M):
        rm = m0 + tl.arange(0, BLOCK_M)
        q = _rows(q_ptr, base, rm, S, D)
        do = _rows(do_ptr, base, rm, S, D)
        lse = _row_stats(lse_ptr, bh, S, rm)
        delta = _row_stats(delta_ptr, bh, S, rm)
        p = _p_block(q, k, lse, rm, rn, S, sm_scale, CAUSAL, ACC)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do).to(ACC)
        dp = tl.dot(do, tl.trans(v)).to(ACC)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q).to(ACC)
    _put_rows(dk_ptr, base, rn, S, D, dk * sm_scale)
    _put_rows(dv_ptr, base, rn, S, D, dv)


@triton.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, S, sm_scale,
                            CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                            ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _rows(q_ptr, base, rm, S, D)
    do = _rows(do_ptr, base, rm, S, D)
    lse = _row_stats(lse_ptr, bh, S, rm)
    delta = _row_stats(delta_ptr, bh, S, rm)
    dq = tl.zeros((BLOCK_M, D), ACC)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S) if CAUSAL else S  # later keys are masked for every query here
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = _rows(k_ptr, base, rn, S, D)
        v = _rows(v_ptr, base, rn, S, D)
        p = _p_block(q, k, lse, rm, rn, S, sm_scale, CAUSAL, ACC)
        dp = tl.dot(do, tl.trans(v)).to(ACC)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k).to(ACC)
    _put_rows(dq_ptr, base, rm, S, D, dq * sm_scale)


def _blocks(q: torch.Tensor) -> dict:
    # The best of 7 configs per head dim on the H200 (B4 H32 S4096, fp16; results/h200/issue18/bwd.json):
    # D=64: 64x64 blocks, 4 warps, 3 stages (0.65x / 0.55x SDPA's backward, plain / causal; 64x64 with
    # 2 stages gave 0.61x / 0.50x). D=128: 128x64, 8 warps (0.48x both; 64x64 with 8 warps gave 0.27x).
    if q.is_cuda:
        if q.shape[-1] >= 128:
            return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}
        return {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 16, "BLOCK_N": 16}


def acc_dtype(t: torch.Tensor):
    """fp32 accumulators and statistics, fp64 for fp64 inputs (so gradcheck sees float64 arithmetic)."""
    return tl.float64 if t.dtype == torch.float64 else tl.float32


def _stat_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _scale(q, sm_scale):
    return q.shape[-1] ** -0.5 if sm_scale is None else sm_scale


def attention_fwd(q, k, v, causal=False, sm_scale=None, **blocks):
    """``(o, lse)``: lse of shape (B, H, S), fp32 (fp64 for fp64 inputs)."""
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, S, D = q.shape
    cfg = {**_blocks(q), **blocks}
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S), dtype=_stat_dtype(q), device=q.device)
    grid = (cdiv(S, cfg["BLOCK_M"]), B * H)
    attention_fwd_lse_kernel[grid](q, k, v, o, lse, S, _scale(q, sm_scale), CAUSAL=causal, D=D, ACC=acc_dtype(q), **cfg)
    return o, lse


def attention_bwd(do, q, k, v, o, lse, causal=False, sm_scale=None, **blocks):
    """``(dq, dk, dv)`` for ``o = softmax(q k^T * sm_scale) v`` from the forward's ``o`` and ``lse``."""
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    B, H, S, D = q.shape
    cfg = {**_blocks(q), **blocks}
    scale = _scale(q, sm_scale)
    delta = torch.empty((B, H, S), dtype=_stat_dtype(q), device=q.device)
    attention_bwd_delta_kernel[(cdiv(B * H * S, 64),)](o, do, delta, B * H * S, D=D, BLOCK_M=64, ACC=acc_dtype(q))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    attention_bwd_dkdv_kernel[(cdiv(S, cfg["BLOCK_N"]), B * H)](q, k, v, do, lse, delta, dk, dv, S, scale,
                                                               CAUSAL=causal, D=D, ACC=acc_dtype(q), **cfg)
    attention_bwd_dq_kernel[(cdiv(S, cfg["BLOCK_M"]), B * H)](q, k, v, do, lse, delta, dq, S, scale,
                                                             CAUSAL=causal, D=D, ACC=acc_dtype(q), **cfg)
    return dq, dk, dv


class FlashAttention(torch.autograd.Function):
    """``softmax(q k^T * sm_scale) v`` with the Triton forward (saving lse) and FlashAttention-2 backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, sm_scale=None):
        o, lse = attention_fwd(q, k, v, causal, sm_scale)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_bwd(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None
