"""FlashAttention forward: softmax(q k^T * sm_scale) v without materialising the S x S scores.

One program owns BM query rows of one (batch, head); it walks over the keys BN at a time and keeps a
running row max ``m``, running denominator ``l`` and unnormalised output ``acc`` (online softmax),
using exp2 with log2(e) folded into the scale. Causal attention splits the key range in two stages:
blocks fully left of the diagonal need no mask, only the diagonal block does. Query blocks are
handed out heaviest first (the last rows see the most keys), which shortens the causal tail.

Two kernels with the same arithmetic: pointer loads (portable, CPU interpreter, any S) and, on
Hopper, tensor descriptors (TMA) when S is a multiple of the block sizes.

Speed on Hopper comes from occupancy. Inside one warpgroup the softmax (exp2 on the MUFU unit) and
the wgmma matmuls run one after the other: Triton 3.6 waits for a dot's result before its first use.
Its automatic warp specialisation for Hopper (``tl.range(..., warp_specialize=True)``) does not help
here: with 8 warps it leaves the loop alone; with 4 warps it builds a producer and two consumer
warpgroups (384 threads, ``setmaxnreg``), but that kernel never finished on an H200 (killed after
75 s), the two-loop causal form crashes the pass, and a descriptor store in the epilogue is
rejected by it. The two warpgroups of one 8-warp program do not fill each
other's gaps either: the key loop holds CTA-wide barriers (before each TMA load that refills a
buffer), so both run their softmax at the same moment. Two programs on one SM are independent, so
the configs below aim at two programs per SM: BM=64 with one warpgroup and 3 stages (115 KB of
shared memory, 138 registers at D=128), or BM=128 with two warpgroups capped at 128 registers a
thread (``maxnreg``; 2 x 256 threads x 128 = the SM's 64K registers; ptxas then serialises the
wgmmas for lack of registers, warning C7512, and it still wins). On an H200 that gained 2-19% over
one program per SM (most at S=1024 and causal). Pipelining the key loop by hand (issue block
j+1's q k^T before block j's softmax) measured 2-31% slower: Triton still waits right after that
dot unless its result only crosses the loop edge, and then ptxas serialises every wgmma because
the in-flight result is copied across the edge (warning C7514). Rescaling lazily (moving the running
max only when a row's block max exceeds it by more than 8, in log2 units) measured 0.4-9% slower:
deciding whether any row needs it takes a reduction across the program's warps and a branch.
Computing a quarter of the exp2s on the FMA pipe instead of MUFU measured 2-9% slower: the loop is
bound by instruction issue about as much as by MUFU (results/h200/attention_sweeps/README.md). Fewer
instructions alone do not help either: taking each block's row sums on the tensor cores (``p @ ones``,
BM x 8 by mma.sync) instead of 32 FADDs and two shuffle rounds per thread cut the sm_90 loop from 306 to
276 instructions; it measured 3.5-9% slower with BM=128 (two warpgroups) and within 2.5% either way with
BM=64, and no shape got faster than with its best config (results/h200/issue18/fwd6.json; the variant is
in commit 9c74dd1). A persistent version looping over query tiles ran correctly but 2-11% slower; with
``tl.range(..., flatten=True)``, so that the next tile's loads could start early, Triton 3.6 produced
wrong results on the H200 (fwd7.json).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._launch import Plans, Tuned, cdiv, current_device, gluon_module, is_hopper, on_gpu

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover
    TensorDescriptor = None


@triton.jit
def _online_softmax_step(acc, l_i, m_i, qk, v, qk_scale):
    """Fold one block of scores (already masked with -inf) and its values into the running state."""
    m_new = tl.maximum(m_i, tl.max(qk, axis=1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def _attn_range_ptr(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, lo, hi, S,
                    qk_scale, BN: tl.constexpr, CAUSAL_MASK: tl.constexpr, BOUND_MASK: tl.constexpr):
    offs_n = tl.arange(0, BN)
    for start_n in range(lo, hi, BN):
        cols = start_n + offs_n
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        qk = tl.dot(q, tl.trans(k))
        if CAUSAL_MASK:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -float("inf"))
        if BOUND_MASK:
            qk = tl.where(cols[None, :] < S, qk, -float("inf"))
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :], mask=cols[:, None] < S, other=0.0)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, qk, v, qk_scale)
    return acc, l_i, m_i


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, H, S, qk_scale,
                         sqb, sqh, sqs, skb, skh, sks, svb, svh, svs, sob, soh, sos,
                         D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # heaviest query blocks first
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqs + offs_d[None, :],
                mask=offs_m[:, None] < S, other=0.0)
    k_base = k_ptr + b * skb + h * skh
    v_base = v_ptr + b * svb + h * svh
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    if CAUSAL:  # keys left of this block: no mask; then the diagonal block with the causal mask
        acc, l_i, m_i = _attn_range_ptr(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d,
                                        0, start_m * BM, S, qk_scale, BN, False, False)
        acc, l_i, m_i = _attn_range_ptr(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d,
                                        start_m * BM, tl.minimum((start_m + 1) * BM, S), S, qk_scale,
                                        BN, True, False)
    else:  # whole key blocks without a mask, then the ragged last block (if any) with one
        full = (S // BN) * BN
        acc, l_i, m_i = _attn_range_ptr(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d,
                                        0, full, S, qk_scale, BN, False, False)
        acc, l_i, m_i = _attn_range_ptr(acc, l_i, m_i, q, k_base, v_base, sks, svs, offs_m, offs_d,
                                        full, S, S, qk_scale, BN, False, True)
    out = acc / l_i[:, None]
    tl.store(o_ptr + b * sob + h * soh + offs_m[:, None] * sos + offs_d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < S)


@triton.jit
def _attn_range_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, lo, hi, qk_scale,
                    BN: tl.constexpr, CAUSAL_MASK: tl.constexpr):
    offs_n = tl.arange(0, BN)
    for start_n in range(lo, hi, BN):
        k = k_desc.load([row0 + start_n, 0])
        qk = tl.dot(q, tl.trans(k))
        if CAUSAL_MASK:
            qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, -float("inf"))
        v = v_desc.load([row0 + start_n, 0])
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, qk, v, qk_scale)
    return acc, l_i, m_i


@triton.jit
def attention_fwd_tma_kernel(q_desc, k_desc, v_desc, o_desc, S, qk_scale, D: tl.constexpr, BM: tl.constexpr,
                             BN: tl.constexpr, CAUSAL: tl.constexpr):
    """Hopper: q/k/v/o are (B*H*S, D) descriptors; S is a multiple of BM and BN (no bounds masks)."""
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    row0 = tl.program_id(1) * S
    offs_m = start_m * BM + tl.arange(0, BM)
    q = q_desc.load([row0 + start_m * BM, 0])
    m_i = tl.full((BM,), -float("inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    if CAUSAL:
        acc, l_i, m_i = _attn_range_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, start_m * BM,
                                        qk_scale, BN, False)
        acc, l_i, m_i = _attn_range_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, start_m * BM,
                                        (start_m + 1) * BM, qk_scale, BN, True)
    else:
        acc, l_i, m_i = _attn_range_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, 0, S, qk_scale, BN, False)
    o_desc.store([row0 + start_m * BM, 0], (acc / l_i[:, None]).to(o_desc.dtype))


def _ptr_configs():
    cfg = [(128, 64, 3, 4), (128, 64, 3, 8), (128, 128, 3, 8), (128, 64, 4, 4), (64, 64, 4, 4), (128, 32, 4, 4)]
    return [triton.Config({"BM": bm, "BN": bn}, num_stages=s, num_warps=w) for bm, bn, s, w in cfg]


def _set_attn_blocks(nargs):
    bm, bn, d = nargs["BM"], nargs["BN"], nargs["D"]
    nargs["q_desc"].block_shape = [bm, d]
    nargs["o_desc"].block_shape = [bm, d]
    nargs["k_desc"].block_shape = [bn, d]
    nargs["v_desc"].block_shape = [bn, d]


# (BM, BN, stages, warps, maxnreg) per head dim, measured on an H200 (B4 H32, S 1024 and 4096);
# other head dims take the list of the nearest one.
TMA_CONFIGS = {
    64: [(128, 64, 3, 8, None), (128, 64, 4, 8, None), (128, 128, 2, 8, 128), (64, 64, 3, 4, None),
         (64, 128, 2, 4, None)],
    128: [(128, 128, 3, 8, None), (128, 64, 3, 8, None), (128, 64, 2, 8, 128), (64, 64, 3, 4, None)],
    256: [(64, 64, 2, 4, None), (128, 32, 4, 4, None)],
}


def _tma_configs():
    every = {c for cs in TMA_CONFIGS.values() for c in cs}
    return [triton.Config({"BM": bm, "BN": bn}, num_stages=s, num_warps=w, maxnreg=r, pre_hook=_set_attn_blocks)
            for bm, bn, s, w, r in sorted(every, key=str)]


def _prune_tma(configs, named_args, **kwargs):
    d = kwargs.get("D", named_args.get("D"))
    causal = kwargs.get("CAUSAL", named_args.get("CAUSAL"))
    wanted = set(TMA_CONFIGS[min(TMA_CONFIGS, key=lambda k: abs(k - d))])
    return [c for c in configs if (c.kwargs["BM"], c.kwargs["BN"], c.num_stages, c.num_warps, c.maxnreg) in wanted
            and _blocks_fit(c.kwargs, causal)]


attention_ptr_tuned = Tuned("attention_ptr", attention_fwd_kernel, _ptr_configs(), key=["S", "D", "CAUSAL"])
attention_tma_tuned = Tuned("attention_tma", attention_fwd_tma_kernel, _tma_configs(), key=["S", "D", "CAUSAL"], prune=_prune_tma)
MIN_TMA_BLOCK = 128  # S must be a multiple of this for the TMA kernel (every config's BM and BN)


def _check(q, k, v):
    if q.dim() != 4 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must all be (B, H, S, D); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError("q, k, v must have one dtype")
    d = q.shape[-1]
    if d not in (16, 32, 64, 128, 256):
        raise ValueError(f"head dim D must be a power of two from 16 to 256, got {d}")
    if q.is_cuda and q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError("attention on a GPU takes fp16 or bf16")


def _qk_scale(sm_scale, D: int) -> float:
    """sm_scale (default 1/sqrt(D)) times log2(e), for exp2. The kernels set masked scores to -inf and take
    max(qk) * scale as the row maximum before scaling the scores: both hold only for a positive scale."""
    scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    if not scale > 0:
        raise ValueError(f"sm_scale must be > 0 (masked scores are -inf before the scale is applied), got {sm_scale}")
    return scale * 1.4426950408889634


def _blocks_fit(config: dict, causal: bool) -> bool:
    """Causal needs BM a multiple of BN: the unmasked key range stops at a multiple of BM, not of BN."""
    return not causal or config["BM"] % config["BN"] == 0


def _check_config(config: dict, causal: bool) -> None:
    if not _blocks_fit(config, causal):
        raise ValueError(f"causal attention needs BM a multiple of BN (the unmasked key range ends at a multiple "
                         f"of BM), got {config}")


_PTR_PLANS = Plans()  # (shape, dtype, causal, scale, device, q/k/v/o 16-byte aligned) -> plan, contiguous inputs


def attention_ptr(q, k, v, causal=False, sm_scale=None, config: dict | None = None):
    """Pointer-load kernel (any GPU, CPU interpreter, any S)."""
    _check(q, k, v)
    B, H, S, D = q.shape
    qk_scale = _qk_scale(sm_scale, D)
    planned = config is None and on_gpu(q) and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    if planned:  # a shape seen before: only the four pointers change (all strides follow from the shape)
        o = torch.empty_like(q)
        ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr())
        pkey = (q.shape, q.dtype, causal, qk_scale, current_device(), *(not p & 15 for p in ptrs))
        plan = _PTR_PLANS.get(pkey)
        if plan is not None and plan(*ptrs):
            return o
    else:
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        o = q.new_empty((B, H, S, D))
    args = (q, k, v, o, H, S, qk_scale, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3])
    grid = lambda m: (cdiv(S, m["BM"]), B * H)  # noqa: E731
    if config is None and on_gpu(q):
        key = (S, D, causal, q.dtype)
        attention_ptr_tuned.launch(key, grid, *args, D=D, CAUSAL=causal)
        if planned:
            _PTR_PLANS.add(pkey, attention_ptr_tuned.plan(key, grid, *args, n_lead=4))
    else:
        config = config or {"BM": 32, "BN": 16}
        _check_config(config, causal)
        attention_fwd_kernel[grid(config)](*args, D=D, CAUSAL=causal, **config)
    return o


def tma_available(q) -> bool:
    return (TensorDescriptor is not None and is_hopper(q) and q.dtype in (torch.float16, torch.bfloat16)
            and q.shape[2] % MIN_TMA_BLOCK == 0)


def attention_tma(q, k, v, causal=False, sm_scale=None, config: dict | None = None):
    """Hopper tensor-descriptor kernel; S must be a multiple of 128."""
    _check(q, k, v)
    if not tma_available(q):
        raise RuntimeError("the TMA attention kernel needs Hopper, fp16/bf16 and S % 128 == 0")
    B, H, S, D = q.shape
    qk_scale = _qk_scale(sm_scale, D)
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    descs = [TensorDescriptor(t, [B * H * S, D], [D, 1], [16, D]) for t in (q, k, v, o)]
    grid = lambda m: (S // m["BM"], B * H)  # noqa: E731
    if config is None:
        names = {"q_desc": descs[0], "k_desc": descs[1], "v_desc": descs[2], "o_desc": descs[3]}
        attention_tma_tuned.launch((S, D, causal, q.dtype), grid, *descs, S, qk_scale, D=D, CAUSAL=causal,
                                   before=lambda meta: _set_attn_blocks({**names, **meta}))
    else:
        config = dict(config)
        _check_config(config, causal)
        _set_attn_blocks({"q_desc": descs[0], "k_desc": descs[1], "v_desc": descs[2], "o_desc": descs[3],
                          "D": D, **config})
        attention_fwd_tma_kernel[grid(config)](*descs, S, qk_scale, D=D, CAUSAL=causal, **config)
    return o


# Below this much work (B * H * S * S * D) the pointer kernel: building four tensor descriptors per call
# costs more host time than such a problem takes on the GPU (H200, B1 H8 D64: S 128-512 took the same GPU
# time with either kernel and 16-18 us against 53-54 us per call end to end; S 1024 was 1.28x faster
# with the pointer kernel; results/h200/issue18/host.json).
TMA_MIN_WORK = 2**32


def _gluon_kernel(q, causal):
    """The Gluon kernel with two or three in-order consumer warpgroups (``gluon_attention_consumers``), which
    measured 1.00-1.14x cuDNN on the H200 on all 8 fp16 B4 H32 shapes (S 1024 / 4096, D 64 / 128, causal or not;
    results/h200/issue18/fwd12.json), against 0.93-1.14x for the dispatch before it (the Triton kernel for D=64
    without a mask and for S4096 D64 causal, the pipelined Gluon kernel elsewhere). None where it does not take the
    shape, or where this Triton has no Gluon."""
    found = gluon_module("gluon_attention_consumers")
    return found if found is not None and found.supports(q, causal) else None


def attention(q, k, v, causal=False, sm_scale=None):
    """softmax(q @ k^T * sm_scale [+ causal mask]) @ v for (B, H, S, D) tensors; sm_scale defaults
    to 1/sqrt(D). fp16/bf16 on a GPU: on Hopper, for problems of ``TMA_MIN_WORK`` and up with
    S % 128 == 0, the Gluon kernel where it takes the shape (D 64 or 128), else the Triton TMA kernel;
    smaller problems and other GPUs the pointer kernel. fp32/fp16 on CPU."""
    if tma_available(q):
        B, H, S, D = q.shape
        if B * H * S * S * D >= TMA_MIN_WORK:
            gluon = _gluon_kernel(q, causal)
            if gluon is not None:
                _check(q, k, v)
                _qk_scale(sm_scale, D)  # the same check of sm_scale as the Triton kernels' (the Gluon one scales itself)
                return gluon.attention(q, k, v, causal, sm_scale)
            return attention_tma(q, k, v, causal, sm_scale)
    return attention_ptr(q, k, v, causal, sm_scale)
