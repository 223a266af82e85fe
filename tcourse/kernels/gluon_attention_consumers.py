"""Attention forward in Gluon for Hopper: two or three consumer warpgroups, each strictly in order.

``gluon_attention_pipelined`` (chapter 9.7) asks one warpgroup to overlap its own softmax with its own
``P V``; ptxas moves that wait ahead of the softmax, and holding it back did not pay. This kernel drops the
idea. A consumer handles key block j as the Triton kernel of chapter 6.6 does: softmax of ``S_j``, rescale
O, issue ``O += P_j V_j``, issue ``S_{j+1} = Q K_{j+1}^T`` behind it, wait for both. Inside a warpgroup
nothing overlaps; the overlap comes from the other NC - 1 consumers, whose wgmmas and exponentials fill the
gaps (measured on an H200 against cuDNN, fp16 B4 H32: 1.00x at S1024 D64, where the pipelined kernel is at
0.90x and the Triton kernel at 0.93x; results/h200/issue18/fwd12.json, chapter 9.8).

One program per SM (persistent), NC consumers of BM = 64 query rows (a tile is NC * 64 rows of one head) and a
1-warp TMA loader. K and V have a ring each, shared by the NC consumers (a slot is released when all NC have
arrived); each consumer's Q is double-buffered, so the next tile's Q loads during this one; O leaves by an
asynchronous TMA store. NC = 3 is FlashAttention-3's choice for head dim 64: tiles of 192 rows; where S is not
a multiple of 192, a head's last tile has consumers past its end, which compute on the next head's rows (or on
TMA's zero fill past the tensor) and store nothing. Causal: every consumer of a tile walks the key blocks up to
the tile's last row and masks the blocks that reach past its own first row (``-inf`` scores give ``p = 0``;
key block 0 is visible to every row, so no row's maximum stays ``-inf``).

Limits: fp16/bf16, (B, H, S, D) contiguous, D 64 or 128, S a multiple of 128. No interpreter:
:func:`compile_sm90` compiles it offline.
"""
from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
    warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..compile_info import H100_SMEM_LIMIT
from ._launch import Launcher, Plans, current_device, num_sms, plan_of
from .gluon_attention import LOADER_REGS, LOADER_WARPS, LOG2E
from .gluon_attention_pipelined import _softmax_update, _store_o, _tile, tile_order
from .gluon_matmul import _GL_DTYPE, _layout, _tma_load, descriptor_type

BM = 64  # query rows per consumer warpgroup (one wgmma M)


@gluon.jit
def _n_blocks(m, S, NC: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, CAUSAL: gl.constexpr):
    """Key blocks of query tile m: all of them, or (causal) up to the tile's last row."""
    if CAUSAL:
        return (gl.minimum((m + 1) * NC * BM, S) + BN - 1) // BN
    else:
        return S // BN


@gluon.jit
def _causal_mask(s, q_row, j, BM: gl.constexpr, BN: gl.constexpr, layout: gl.constexpr, CAUSAL: gl.constexpr):
    """Causal: key block j's scores for query rows ``q_row ..`` with the keys past each row at -inf (blocks
    wholly left of the rows are left alone)."""
    if CAUSAL:
        if j * BN + BN - 1 > q_row:
            rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout)) + q_row
            cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout)) + j * BN
            s = gl.where(gl.expand_dims(rows, 1) >= gl.expand_dims(cols, 0), s, float("-inf"))
    return s


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
            S, n_m, BH, G, CAUSAL: gl.constexpr):
    NC: gl.constexpr = q_bufs.shape[0] // 2
    BM: gl.constexpr = q_bufs.shape[1]
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    it = 0
    ti = 0
    for t in range(gl.program_id(0), n_m * BH, gl.num_programs(0)):
        m, bh = _tile(t, n_m, BH, G)
        row = bh * S
        n = _n_blocks(m, S, NC, BM, BN, CAUSAL)
        b = ti % 2
        for c in gl.static_range(NC):  # a fresh barrier counts as "phase 1 completed": no wait the first time
            mbarrier.wait(q_empty.index(b * NC + c), ((ti // 2) & 1) ^ 1)
            mbarrier.expect(q_ready.index(b * NC + c), q_desc.block_type.nbytes)
            _tma_load(q_desc, [row + (m * NC + c) * BM, 0], q_ready.index(b * NC + c), q_bufs.index(b * NC + c))
        for j in range(n):
            s = (it + j) % STAGES
            phase = (((it + j) // STAGES) & 1) ^ 1
            mbarrier.wait(k_empty.index(s), phase)
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            _tma_load(k_desc, [row + j * BN, 0], k_ready.index(s), k_bufs.index(s))
            mbarrier.wait(v_empty.index(s), phase)
            mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
            _tma_load(v_desc, [row + j * BN, 0], v_ready.index(s), v_bufs.index(s))
        it += n
        ti += 1


@gluon.jit
def _consumer(q_bufs, q_ready, q_empty, k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty, o_desc, o_tile, c,
              S, n_m, BH, G, qk_scale, CAUSAL: gl.constexpr):
    """Consumer c: rows ``c * BM ..`` of every tile this program owns; block by block, strictly in order."""
    NC: gl.constexpr = q_bufs.shape[0] // 2
    BM: gl.constexpr = q_bufs.shape[1]
    D: gl.constexpr = q_bufs.shape[2]
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    dtype: gl.constexpr = q_bufs.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([BM, BN], gl.float32, s_layout)
    it = 0
    ti = 0
    for t in range(gl.program_id(0), n_m * BH, gl.num_programs(0)):
        m, bh = _tile(t, n_m, BH, G)
        n = _n_blocks(m, S, NC, BM, BN, CAUSAL)
        q_row = (m * NC + c) * BM  # inside the head
        qb = (ti % 2) * NC + c
        q_tile = q_bufs.index(qb)
        mbarrier.wait(q_ready.index(qb), (ti // 2) & 1)
        s0 = it % STAGES
        mbarrier.wait(k_ready.index(s0), (it // STAGES) & 1)
        s_tok = warpgroup_mma(q_tile, k_bufs.index(s0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(0, deps=[s_tok])
        mbarrier.arrive(k_empty.index(s0), count=1)
        if n == 1:
            mbarrier.arrive(q_empty.index(qb), count=1)
        s = _causal_mask(s, q_row, 0, BM, BN, s_layout, CAUSAL)
        m_i = gl.full([BM], float("-inf"), gl.float32, row_s)
        l_i = gl.zeros([BM], gl.float32, row_s)
        acc = gl.zeros([BM, D], gl.float32, o_layout)
        for j in range(n - 1):  # S_j is in s: its softmax, then P_j V_j and Q K_{j+1}^T, waited for together
            g = it + j
            sv = g % STAGES
            sk = (g + 1) % STAGES
            p, alpha, l_i, m_i = _softmax_update(s, m_i, l_i, qk_scale)
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p_op = gl.convert_layout(p.to(dtype), p_layout)
            mbarrier.wait(v_ready.index(sv), (g // STAGES) & 1)
            o_tok = warpgroup_mma(p_op, v_bufs.index(sv), acc, is_async=True)
            mbarrier.wait(k_ready.index(sk), ((g + 1) // STAGES) & 1)
            s_tok = warpgroup_mma(q_tile, k_bufs.index(sk).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            s, acc, p_op = warpgroup_mma_wait(0, deps=[s_tok, o_tok, p_op])
            mbarrier.arrive(k_empty.index(sk), count=1)
            mbarrier.arrive(v_empty.index(sv), count=1)
            if j == n - 2:  # the tile's last Q K^T is done: its Q buffer may take the tile after next
                mbarrier.arrive(q_empty.index(qb), count=1)
            s = _causal_mask(s, q_row, j + 1, BM, BN, s_layout, CAUSAL)
        g = it + n - 1
        sv = g % STAGES
        p, alpha, l_i, m_i = _softmax_update(s, m_i, l_i, qk_scale)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
        p_op = gl.convert_layout(p.to(dtype), p_layout)
        mbarrier.wait(v_ready.index(sv), (g // STAGES) & 1)
        o_tok = warpgroup_mma(p_op, v_bufs.index(sv), acc, is_async=True)
        acc, p_op = warpgroup_mma_wait(0, deps=[o_tok, p_op])
        mbarrier.arrive(v_empty.index(sv), count=1)
        if q_row < S:  # consumers past the head's end (NC = 3) store nothing
            _store_o(acc, l_i, o_desc, o_tile, bh * S + q_row, o_layout)
        it += n
        ti += 1
    tma.store_wait(0)
    return (it,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


@gluon.jit
def attention_consumers_kernel(q_desc, k_desc, v_desc, o_desc, S, n_m, BH, G, qk_scale, NC: gl.constexpr,
                               STAGES: gl.constexpr, REGS: gl.constexpr, CAUSAL: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    BM: gl.constexpr = q_desc.block_type.shape[0]
    D: gl.constexpr = q_desc.block_type.shape[1]
    BN: gl.constexpr = k_desc.block_type.shape[0]
    q_bufs = gl.allocate_shared_memory(dtype, [2 * NC, BM, D], q_desc.layout)
    o_bufs = gl.allocate_shared_memory(dtype, [NC, BM, D], o_desc.layout)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BN, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES, BN, D], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2 * NC, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2 * NC, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * NC):
        mbarrier.init(q_ready.index(i), count=1)
        mbarrier.init(q_empty.index(i), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=NC)  # every consumer releases each slot
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(v_empty.index(s), count=NC)
    fence_async_shared()
    loads = (q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
             S, n_m, BH, G, CAUSAL)
    c0 = (q_bufs, q_ready, q_empty, k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty, o_desc, o_bufs.index(0), 0,
          S, n_m, BH, G, qk_scale, CAUSAL)
    c1 = (q_bufs, q_ready, q_empty, k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty, o_desc, o_bufs.index(1), 1,
          S, n_m, BH, G, qk_scale, CAUSAL)
    if NC == 2:
        gl.warp_specialize([(_consumer, c0), (_consumer, c1), (_loader, loads)], [4, LOADER_WARPS],
                           [REGS, LOADER_REGS])
    else:
        c2 = (q_bufs, q_ready, q_empty, k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty, o_desc, o_bufs.index(2), 2,
              S, n_m, BH, G, qk_scale, CAUSAL)
        gl.warp_specialize([(_consumer, c0), (_consumer, c1), (_consumer, c2), (_loader, loads)],
                           [4, 4, LOADER_WARPS], [REGS, REGS, LOADER_REGS])


# (NC, BN, STAGES, REGS of each worker consumer): NC * 128 + 32 threads share the SM's 64K registers.
# Measured on an H200 against cuDNN (results/h200/issue18/fwd12.json, GPU time, fp16 B4 H32): two consumers
# 1.00-1.14x on the 8 shapes; three 1.06-1.08x at S4096 D64 (against 1.00x with two; fwd12s.json: 1.08x / 1.18x
# at S2048 / S8192 against 1.01x / 1.03x) but 0.98x at S1024 D64,
# where 1024 rows make 6 tiles of 192 and an eighth of the work is on rows past the end. D=128 with three
# consumers needs key blocks of 64 (shared memory), which measured 0.82-0.91x.
TWO = {64: (2, 128, 3, 240), 128: (2, 128, 2, 240)}
THREE = (3, 128, 3, 160)


def config_for(S: int, D: int, causal: bool) -> tuple:
    """The measured config: three consumers for D=64 without a mask where the last tile's padding is at most
    1/16 of S, else two."""
    if D == 64 and not causal and (-S) % (3 * BM) * 16 <= S:
        return THREE
    return TWO[D]


def supports(q: torch.Tensor, causal: bool, config: tuple | None = None) -> bool:
    """Whether this kernel takes (B, H, S, D) inputs like ``q`` (shape and dtype only)."""
    B, H, S, D = q.shape
    if q.dtype not in _GL_DTYPE or D not in TWO:
        return False
    nc, bn, stages, _ = config or config_for(S, D, causal)
    smem = (3 * nc * BM + 2 * stages * bn) * D * q.element_size()  # Q (two per consumer), O, the K/V rings
    return S % 128 == 0 and S % bn == 0 and smem + 1024 <= H100_SMEM_LIMIT


_launch = Launcher(attention_consumers_kernel)  # repeated calls: Triton's C launch, each CUtensorMap built once
# (shape, dtype, causal, scale, device, Q/K/V/O addresses) -> plan: a call on the buffers of an earlier one skips
# the four descriptors
_PLANS = Plans()


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale: float | None = None,
              config: tuple | None = None) -> torch.Tensor:
    """``softmax(q k^T * sm_scale [+ causal mask]) v`` for fp16/bf16 (B, H, S, D) CUDA tensors on Hopper;
    ``config``: (NC, BN, STAGES, REGS) instead of :func:`config_for`'s."""
    if not supports(q, causal, config):
        raise ValueError(f"fp16/bf16, D 64 or 128, S a multiple of 128 and of the key block; got {tuple(q.shape)} "
                         f"{q.dtype}")
    if k.shape != q.shape or v.shape != q.shape or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must have one shape and dtype, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, S, D = q.shape
    dt = q.dtype
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    q2, k2, v2 = (t.contiguous().view(B * H * S, D) for t in (q, k, v))
    o = torch.empty_like(q2)
    pkey = None if config else (B, H, S, D, dt, causal, sm_scale, current_device(), q2.data_ptr(), k2.data_ptr(),
                                v2.data_ptr(), o.data_ptr())
    plan = _PLANS.get(pkey) if pkey is not None else None  # a config given: the full path every call
    if plan is not None and plan():
        return o.view(B, H, S, D)
    nc, bn, stages, regs = config or config_for(S, D, causal)
    descs = tuple(TensorDescriptor.from_tensor(t, [rows, D], _layout([rows, D], dt))
                  for t, rows in ((q2, BM), (k2, bn), (v2, bn), (o, BM)))
    n_m = -(-S // (nc * BM))
    programs, g = tile_order(n_m, B * H, num_sms(q), causal)
    meta = {"NC": nc, "STAGES": stages, "REGS": regs, "CAUSAL": causal, "num_warps": 4}
    args = (*descs, S, n_m, B * H, g, sm_scale * LOG2E)
    _launch((programs,), args, meta)
    if pkey is not None:
        _PLANS.add(pkey, plan_of(_launch, (programs,), args, meta))
    return o.view(B, H, S, D)


def compile_sm90(S: int = 1024, D: int = 64, causal: bool = False, config: tuple | None = None):
    """The kernel compiled for sm_90 offline (``tcourse.compile_info.CompileReport``)."""
    from ..compile_info import compile_for_sm90

    nc, bn, stages, regs = config or config_for(S, D, causal)
    descs = [descriptor_type(block, torch.float16) for block in ([BM, D], [bn, D], [bn, D], [BM, D])]
    n_m = -(-S // (nc * BM))
    G = tile_order(n_m, 128, 132, causal)[1]
    return compile_for_sm90(attention_consumers_kernel, *descs, S, n_m, 128, G, 0.1, num_warps=4, num_stages=1,
                            NC=nc, STAGES=stages, REGS=regs, CAUSAL=causal)
