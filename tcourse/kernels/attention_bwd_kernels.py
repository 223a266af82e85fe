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

P and dS are recomputed in both: the price of writing each gradient once, from one program. What made
them fast on the H200 (results/h200/issue18/README.md has the measurements):

- the dK/dV step works in the transposed orientation, ``P^T = exp2(K Q^T * scale * log2(e) - lse * log2(e))``,
  so ``P^T`` and ``dS^T`` leave one MMA as the left operand of the next with no transpose in registers;
- masks only where they change something: the causal mask on the blocks that cross the diagonal (their
  own loop), the bounds mask only when S is not a multiple of the blocks (``BOUNDS``);
- a launch config per kernel (tall key blocks for dK/dV, tall query blocks for dQ) and, on Hopper,
  loads through tensor descriptors (``TMA``).

``dq_atomic=True`` is FlashAttention-2's other way: the dK/dV kernel also adds each block's dQ into an
fp32 buffer and the dQ kernel is not launched; with tensor descriptors one TMA reduce-add per block, else
an atomic per element. Both were slower on the H200 (kept to measure): fewer matmuls, but every key block
adds a whole (BLOCK_M, D) fp32 tile into dQ for every query block.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import cdiv, gluon_module, is_hopper, on_gpu
from .attention_kernels import TensorDescriptor


LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x * log2(e)): one multiply folded into the scale


@triton.jit
def _rows(ptr, base, r, S, D: tl.constexpr, BOUNDS: tl.constexpr):
    """Rows ``r`` of one head's contiguous (S, D) matrix at ``ptr + base``; zeros past S when BOUNDS."""
    offs = base + r[:, None] * D + tl.arange(0, D)[None, :]
    if BOUNDS:
        return tl.load(ptr + offs, mask=r[:, None] < S, other=0.0)
    return tl.load(ptr + offs)


@triton.jit
def _tile(src, bh, S, r0, BLOCK: tl.constexpr, D: tl.constexpr, BOUNDS: tl.constexpr, TMA: tl.constexpr):
    """Rows ``r0 .. r0 + BLOCK`` of head ``bh``: through a tensor descriptor over all heads' (B*H*S, D)
    rows when TMA (then S is a multiple of BLOCK), else with pointers."""
    if TMA:
        x = src.load([(bh * S + r0).to(tl.int32), 0])
    else:
        x = _rows(src, bh * S * D, r0 + tl.arange(0, BLOCK), S, D, BOUNDS)
    return x


@triton.jit
def _put_rows(ptr, base, r, S, D: tl.constexpr, x):
    rd = tl.arange(0, D)
    tl.store(ptr + base + r[:, None] * D + rd[None, :], x.to(ptr.dtype.element_ty), mask=r[:, None] < S)


@triton.jit
def _row_stats(ptr, bh, S, r, BOUNDS: tl.constexpr):
    """One number per query row (lse or delta) of head ``bh``."""
    if BOUNDS:
        return tl.load(ptr + bh * S + r, mask=r < S, other=0.0)
    return tl.load(ptr + bh * S + r)


@triton.jit
def attention_fwd_lse_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, sm_scale, CAUSAL: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, ACC: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = _rows(q_ptr, base, rm, S, D, True)
    m_i = tl.full((BLOCK_M,), float("-inf"), ACC)
    l_i = tl.zeros((BLOCK_M,), ACC)
    acc = tl.zeros((BLOCK_M, D), ACC)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S) if CAUSAL else S
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = _rows(k_ptr, base, rn, S, D, True)
        v = _rows(v_ptr, base, rn, S, D, True)
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
def attention_bwd_delta_kernel(o_ptr, do_ptr, delta_ptr, zero_ptr, rows, D: tl.constexpr, BLOCK_M: tl.constexpr,
                               ACC: tl.constexpr, ZERO: tl.constexpr):
    """delta for BLOCK_M rows; with ``ZERO`` also zeros the same rows of ``zero_ptr`` (the Gluon backward's fp32
    dQ buffer: one pass instead of a separate fill)."""
    r = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    m = r[:, None] < rows
    offs = r[:, None].to(tl.int64) * D + rd[None, :]
    o = tl.load(o_ptr + offs, mask=m, other=0.0).to(ACC)
    do = tl.load(do_ptr + offs, mask=m, other=0.0).to(ACC)
    tl.store(delta_ptr + r, tl.sum(o * do, axis=1), mask=r < rows)
    if ZERO:
        tl.store(zero_ptr + offs, tl.zeros((BLOCK_M, D), zero_ptr.dtype.element_ty), mask=m)


@triton.jit
def _visible(rq, rk, S, CAUSAL: tl.constexpr, BOUNDS: tl.constexpr):
    """Which (query, key) pairs count; ``rq`` and ``rk`` come already broadcast to the block's orientation."""
    if BOUNDS:
        keep = (rq < S) & (rk < S)
        if CAUSAL:
            keep = keep & (rk <= rq)
    else:
        keep = rk <= rq
    return keep


@triton.jit
def _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, base, bh, rn, m0, S, qk_scale, sm_scale,
               CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, DQ_ATOMIC: tl.constexpr, TMA: tl.constexpr,
               BLOCK_M: tl.constexpr, D: tl.constexpr):
    """One block of queries against this program's keys, in the transposed orientation (keys x queries),
    so that P^T and dS^T come out of the MMA ready to be the next MMA's left operand (no transposes)."""
    rm = m0 + tl.arange(0, BLOCK_M)
    q = _tile(q_ptr, bh, S, m0, BLOCK_M, D, BOUNDS, TMA)
    do = _tile(do_ptr, bh, S, m0, BLOCK_M, D, BOUNDS, TMA)
    lse2 = _row_stats(lse_ptr, bh, S, rm, BOUNDS) * LOG2E
    delta = _row_stats(delta_ptr, bh, S, rm, BOUNDS)
    pT = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse2[None, :])
    if CAUSAL or BOUNDS:
        pT = tl.where(_visible(rm[None, :], rn[:, None], S, CAUSAL, BOUNDS), pT, 0.0)
    dv = tl.dot(pT.to(do.dtype), do, dv, out_dtype=dv.dtype)
    dsT = pT * (tl.dot(v, tl.trans(do)) - delta[None, :])
    if DQ_ATOMIC:  # this block's share of dQ, added into an fp32 buffer (FlashAttention-2's way: no dQ kernel)
        dq = tl.dot(tl.trans(dsT.to(k.dtype)), k) * sm_scale
        if TMA:  # one bulk reduce-add of the whole block by the TMA unit (S is a multiple of the blocks)
            dq_ptr.atomic_add([(bh * S + m0).to(tl.int32), 0], dq)
        else:
            offs = base + rm[:, None] * D + tl.arange(0, D)[None, :]
            if BOUNDS:
                tl.atomic_add(dq_ptr + offs, dq, mask=rm[:, None] < S, sem="relaxed")
            else:
                tl.atomic_add(dq_ptr + offs, dq, sem="relaxed")
    return tl.dot(dsT.to(q.dtype), q, dk, out_dtype=dk.dtype), dv


@triton.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, dq_ptr, S, sm_scale,
                              CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, DQ_ATOMIC: tl.constexpr, TMA: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, ACC: tl.constexpr):
    n0 = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rn = n0 + tl.arange(0, BLOCK_N)
    k = _tile(k_ptr, bh, S, n0, BLOCK_N, D, BOUNDS, TMA)
    v = _tile(v_ptr, bh, S, n0, BLOCK_N, D, BOUNDS, TMA)
    dk = tl.zeros((BLOCK_N, D), ACC)
    dv = tl.zeros((BLOCK_N, D), ACC)
    qk_scale = tl.cast(sm_scale, ACC) * LOG2E
    start = 0
    if CAUSAL:  # queries before n0 never see these keys; those up to n0 + BLOCK_N see some: the only masked ones
        for m0 in range(n0, tl.minimum(n0 + BLOCK_N, S), BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, base, bh, rn, m0, S, qk_scale,
                                sm_scale, True, BOUNDS, DQ_ATOMIC, TMA, BLOCK_M, D)
        start = n0 + BLOCK_N
    for m0 in range(start, S, BLOCK_M):
        dk, dv = _dkdv_step(dk, dv, k, v, q_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, base, bh, rn, m0, S, qk_scale,
                            sm_scale, False, BOUNDS, DQ_ATOMIC, TMA, BLOCK_M, D)
    _put_rows(dk_ptr, base, rn, S, D, dk * sm_scale)
    _put_rows(dv_ptr, base, rn, S, D, dv)


@triton.jit
def _dq_step(dq, q, do, lse2, delta, k_ptr, v_ptr, bh, rm, n0, S, qk_scale,
             CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, TMA: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    rn = n0 + tl.arange(0, BLOCK_N)
    k = _tile(k_ptr, bh, S, n0, BLOCK_N, D, BOUNDS, TMA)
    v = _tile(v_ptr, bh, S, n0, BLOCK_N, D, BOUNDS, TMA)
    p = tl.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse2[:, None])
    if CAUSAL or BOUNDS:
        p = tl.where(_visible(rm[:, None], rn[None, :], S, CAUSAL, BOUNDS), p, 0.0)
    ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
    return tl.dot(ds.to(k.dtype), k, dq, out_dtype=dq.dtype)


@triton.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, S, sm_scale,
                            CAUSAL: tl.constexpr, BOUNDS: tl.constexpr, TMA: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, D: tl.constexpr, ACC: tl.constexpr):
    m0 = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * D
    rm = m0 + tl.arange(0, BLOCK_M)
    q = _tile(q_ptr, bh, S, m0, BLOCK_M, D, BOUNDS, TMA)
    do = _tile(do_ptr, bh, S, m0, BLOCK_M, D, BOUNDS, TMA)
    lse2 = _row_stats(lse_ptr, bh, S, rm, BOUNDS) * LOG2E
    delta = _row_stats(delta_ptr, bh, S, rm, BOUNDS)
    dq = tl.zeros((BLOCK_M, D), ACC)
    qk_scale = tl.cast(sm_scale, ACC) * LOG2E
    end = S
    if CAUSAL:  # keys after the block's last query are masked for all of it; the diagonal keys for some
        for n0 in range(m0, tl.minimum(m0 + BLOCK_M, S), BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_ptr, v_ptr, bh, rm, n0, S, qk_scale, True, BOUNDS, TMA, BLOCK_N, D)
        end = m0
    for n0 in range(0, end, BLOCK_N):
        dq = _dq_step(dq, q, do, lse2, delta, k_ptr, v_ptr, bh, rm, n0, S, qk_scale, False, BOUNDS, TMA, BLOCK_N, D)
    _put_rows(dq_ptr, base, rm, S, D, dq * sm_scale)


def _fwd_blocks(q: torch.Tensor) -> dict:
    if q.is_cuda:
        return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2} if q.shape[-1] >= 128 else \
            {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 16, "BLOCK_N": 16}


# Backward launch configs on the H200 per (head dim, causal): (dK/dV kernel, dQ kernel). The dK/dV kernel
# keeps a block of keys and streams blocks of queries; the dQ kernel the other way round. The best pair of a
# two-step sweep at B4 H32 S4096 fp16 with tensor descriptors (results/h200/issue18/bwd2_run2.json).
def _cfg(BM, BN, w, st):
    return {"BLOCK_M": BM, "BLOCK_N": BN, "num_warps": w, "num_stages": st}


BWD_CONFIGS = {
    (64, False): (_cfg(32, 64, 4, 4), _cfg(128, 64, 4, 3)),
    (64, True): (_cfg(64, 64, 4, 3), _cfg(128, 64, 4, 3)),
    (128, False): (_cfg(32, 64, 4, 3), _cfg(128, 64, 8, 3)),
    (128, True): (_cfg(32, 64, 4, 4), _cfg(128, 64, 8, 3)),
}
CPU_BWD_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16}


def bwd_configs(q: torch.Tensor, causal: bool, dkdv: dict | None = None, dq: dict | None = None) -> tuple[dict, dict]:
    """The (dK/dV, dQ) launch configs for ``q``, with overrides; each block must tile the other."""
    base = BWD_CONFIGS[(128 if q.shape[-1] >= 128 else 64, bool(causal))] if q.is_cuda else \
        (CPU_BWD_BLOCKS, CPU_BWD_BLOCKS)
    cfg_kv, cfg_q = {**base[0], **(dkdv or {})}, {**base[1], **(dq or {})}
    if cfg_kv["BLOCK_N"] % cfg_kv["BLOCK_M"] or cfg_q["BLOCK_M"] % cfg_q["BLOCK_N"]:
        raise ValueError(f"the dK/dV kernel needs BLOCK_N a multiple of BLOCK_M, the dQ kernel BLOCK_M a multiple "
                         f"of BLOCK_N (the causal diagonal is whole blocks): got {cfg_kv} and {cfg_q}")
    return cfg_kv, cfg_q


def acc_dtype(t: torch.Tensor):
    """fp32 accumulators and statistics, fp64 for fp64 inputs (so gradcheck sees float64 arithmetic)."""
    return tl.float64 if t.dtype == torch.float64 else tl.float32


def _stat_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def _check(*ts: torch.Tensor) -> None:
    """q, k, v (and o, dO): one (B, H, S, D) shape and dtype, D a power of two from 16 to 256."""
    shape, dtype = ts[0].shape, ts[0].dtype
    if len(shape) != 4 or any(t.shape != shape or t.dtype != dtype for t in ts):
        raise ValueError("attention expects tensors of one (B, H, S, D) shape and dtype, got "
                         + ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in ts))
    D = shape[-1]
    if D < 16 or D > 256 or D & (D - 1):
        raise ValueError(f"head dim D={D}: these kernels need a power of two from 16 to 256 (tl.dot, tl.arange)")


def _scale(q, sm_scale):
    return q.shape[-1] ** -0.5 if sm_scale is None else sm_scale


def attention_fwd(q, k, v, causal=False, sm_scale=None, **blocks):
    """``(o, lse)``: lse of shape (B, H, S), fp32 (fp64 for fp64 inputs)."""
    _check(q, k, v)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    B, H, S, D = q.shape
    cfg = {**_fwd_blocks(q), **blocks}
    o = torch.empty_like(q)
    lse = torch.empty((B, H, S), dtype=_stat_dtype(q), device=q.device)
    grid = (cdiv(S, cfg["BLOCK_M"]), B * H)
    attention_fwd_lse_kernel[grid](q, k, v, o, lse, S, _scale(q, sm_scale), CAUSAL=causal, D=D, ACC=acc_dtype(q), **cfg)
    return o, lse


def _sources(ts, block: int, tma: bool) -> list:
    """What the kernels read q/k/v/dO through: tensor descriptors of (B*H*S, D) rows in blocks of ``block``
    rows, or the tensors themselves."""
    if not tma:
        return list(ts)
    return [TensorDescriptor(t, [t.numel() // t.shape[-1], t.shape[-1]], [t.shape[-1], 1], [block, t.shape[-1]])
            for t in ts]


# (head dim, causal) where the one-kernel Gluon backward measured faster than these two kernels on the H200,
# at B4 H32 S4096 fp16, GPU time against SDPA's backward: D128 0.94x against 0.73x, causal D128 0.92-0.95x
# against 0.82x (results/h200/issue18/gbwd5.json, gbwd4.json: after its first two query blocks left the loop,
# which cut ptxas's spills; before, causal D128 was slower, 0.73 against 0.80, gbwd_run3.json), causal D64
# 0.97-0.98x against 0.92-0.93x, plain D64 0.93-0.95x against 0.90x (gbwd6.json: 3288-3300 against 3397 us,
# p20-p80 apart; gbwd4.json 0.89x against 0.87x); shorter S was not measured (fewer query blocks per program
# to spread its start-up over), so S >= 4096.
GLUON_BWD_WINS = {(128, False), (128, True), (64, False), (64, True)}
GLUON_BWD_MIN_S = 4096


def _gluon_bwd():
    """``gluon_attention_bwd`` (the one-kernel Hopper backward), or None where this Triton has no Gluon."""
    return gluon_module("gluon_attention_bwd")


def _gluon_measured_faster(q, causal, dkdv, dq, dq_atomic, tma) -> bool:
    """The default dispatch: the Gluon backward where it measured faster, unless a Triton option was asked for."""
    if dkdv or dq or dq_atomic or tma is not None or not is_hopper(q):
        return False
    S, D = q.shape[2], q.shape[3]
    G = _gluon_bwd() if (D, bool(causal)) in GLUON_BWD_WINS and S >= GLUON_BWD_MIN_S else None
    return G is not None and G.supports(q, causal)


def attention_bwd(do, q, k, v, o, lse, causal=False, sm_scale=None, dkdv=None, dq=None, dq_atomic=False, tma=None,
                  gluon=None, gluon_config=None):
    """``(dq, dk, dv)`` for ``o = softmax(q k^T * sm_scale) v`` from the forward's ``o`` and ``lse``.

    ``dkdv`` and ``dq`` override the two kernels' launch configs (``BLOCK_M``, ``BLOCK_N``, ``num_warps``,
    ``num_stages``). ``dq_atomic``: the dK/dV kernel also adds each block's dQ into an fp32 buffer with
    atomics, and the dQ kernel is not launched (fewer matmuls, an order of summation that varies).
    ``tma``: read through tensor descriptors (default: on Hopper, fp16/bf16, S a multiple of every block).
    ``gluon``: the one-kernel Gluon backward (``gluon_attention_bwd``, Hopper, fp16/bf16, S % 128 == 0); by
    default where it measured faster (``GLUON_BWD_WINS``), False for the two Triton kernels."""
    _check(q, k, v, o, do)
    if lse.shape != q.shape[:3]:
        raise ValueError(f"lse must have shape (B, H, S) = {tuple(q.shape[:3])}, got {tuple(lse.shape)}")
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    B, H, S, D = q.shape
    cfg_kv, cfg_q = bwd_configs(q, causal, dkdv, dq)
    scale = _scale(q, sm_scale)
    acc = acc_dtype(q)
    delta = torch.empty((B, H, S), dtype=_stat_dtype(q), device=q.device)
    if gluon is None:
        gluon = _gluon_measured_faster(q, causal, dkdv, dq, dq_atomic, tma)
    G = _gluon_bwd() if gluon else None
    if gluon and (G is None or not is_hopper(q) or not G.supports(q, causal, gluon_config)):
        raise ValueError(f"gluon=True needs Gluon, a Hopper GPU and fp16/bf16 inputs with S % 128 == 0 and D 64 or "
                         f"128 (DQ_SPLIT: D 128); got {tuple(q.shape)} {q.dtype} on {q.device}")
    dq_acc = torch.empty((B * H * S, D), dtype=torch.float32, device=q.device) if gluon else delta
    attention_bwd_delta_kernel[(cdiv(B * H * S, 64),)](o, do, delta, dq_acc, B * H * S, D=D, BLOCK_M=64, ACC=acc,
                                                       ZERO=gluon)
    if gluon:
        return G.attention_bwd(do, q, k, v, lse, delta, scale, causal, gluon_config, dq_acc)
    bounds_kv, bounds_q = S % cfg_kv["BLOCK_N"] != 0, S % cfg_q["BLOCK_M"] != 0
    if tma is None:
        tma = (TensorDescriptor is not None and is_hopper(q) and q.dtype in (torch.float16, torch.bfloat16)
               and not (bounds_kv or bounds_q))
    elif tma and (bounds_kv or bounds_q or TensorDescriptor is None):
        raise ValueError(f"tma=True needs triton.tools.tensor_descriptor and S a multiple of every block (S={S})")
    if tma and dq_atomic and (not on_gpu(q) or q.dtype == torch.float64):
        raise ValueError("dq_atomic with tma=True adds dQ into fp32 by TMA reduce, which neither Triton's interpreter "
                         "nor float64 inputs have: pass tma=False")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    dq_ = torch.zeros(q.shape, dtype=_stat_dtype(q), device=q.device) if dq_atomic else torch.empty_like(q)
    q_kv, do_kv = _sources((q, do), cfg_kv["BLOCK_M"], tma)
    k_kv, v_kv = _sources((k, v), cfg_kv["BLOCK_N"], tma)
    dq_kv = _sources((dq_,), cfg_kv["BLOCK_M"], tma and dq_atomic)[0]
    attention_bwd_dkdv_kernel[(cdiv(S, cfg_kv["BLOCK_N"]), B * H)](
        q_kv, k_kv, v_kv, do_kv, lse, delta, dk, dv, dq_kv, S, scale, CAUSAL=causal, BOUNDS=bounds_kv,
        DQ_ATOMIC=dq_atomic, TMA=tma, D=D, ACC=acc, **cfg_kv)
    if dq_atomic:
        return dq_.to(q.dtype), dk, dv
    q_q, do_q = _sources((q, do), cfg_q["BLOCK_M"], tma)
    k_q, v_q = _sources((k, v), cfg_q["BLOCK_N"], tma)
    attention_bwd_dq_kernel[(cdiv(S, cfg_q["BLOCK_M"]), B * H)](
        q_q, k_q, v_q, do_q, lse, delta, dq_, S, scale, CAUSAL=causal, BOUNDS=bounds_q, TMA=tma, D=D, ACC=acc,
        **cfg_q)
    return dq_, dk, dv


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


def compile_sm90(D: int = 64, causal: bool = False, dtype: torch.dtype = torch.float16, tma: bool = True,
                 S: int = 4096, configs: tuple | None = None, dq_atomic: bool = False) -> tuple:
    """The two backward kernels compiled for sm_90 offline, with their CUDA configs or ``configs``
    (``tcourse.compile_info.CompileReport`` each: dK/dV, then dQ; with ``dq_atomic`` the dK/dV kernel only)."""
    from ..compile_info import _DTYPES, compile_for_sm90

    name = _DTYPES[str(dtype).removeprefix("torch.")]
    ptr, stat = f"*{name}", "*fp64" if dtype == torch.float64 else "*fp32"
    acc = tl.float64 if dtype == torch.float64 else tl.float32
    cfg_kv, cfg_q = configs or BWD_CONFIGS[(D, causal)]
    reports = []
    kernels = ((attention_bwd_dkdv_kernel, cfg_kv, "BLOCK_N"), (attention_bwd_dq_kernel, cfg_q, "BLOCK_M"))
    for kernel, cfg, held in kernels[:1] if dq_atomic else kernels:
        meta = {k: v for k, v in cfg.items() if k.startswith("BLOCK")}
        q_src, k_src = (f"tensordesc<{name}[{meta[b]}, {D}]>" if tma else ptr for b in ("BLOCK_M", "BLOCK_N"))
        if kernel is attention_bwd_dkdv_kernel:  # dK, dV, then dQ (fp32 and through a descriptor when atomic)
            dq_out = (f"tensordesc<{stat[1:]}[{meta['BLOCK_M']}, {D}]>" if tma else stat) if dq_atomic else ptr
            outs, flags = (ptr, ptr, dq_out), {"DQ_ATOMIC": dq_atomic}
        else:
            outs, flags = (ptr,), {}
        args = (q_src, k_src, k_src, q_src, stat, stat, *outs, S, D ** -0.5)
        reports.append(compile_for_sm90(kernel, *args, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                                        CAUSAL=causal, BOUNDS=S % meta[held] != 0, TMA=tma, D=D, ACC=acc,
                                        **flags, **meta))
    return tuple(reports)
