"""Attention backward in Gluon for Hopper, one kernel the way FlashAttention-3 does it.

The Triton backward (``attention_bwd_kernels``, chapter 10) runs two kernels and seven matrix multiplies
per block pair, because each gradient is written by one program. Here one program owns BN = 128 keys of
one head, split between two consumer warpgroups of 64 keys each, and walks over the query blocks that see
them; a 1-warp loader streams ``Q_i`` and ``dO_i`` through a ``STAGES``-deep ring of shared memory. For
query block i a consumer computes, as asynchronous wgmma:

    S^T = K Q_i^T      dP^T = V dO_i^T      P^T = exp2(S^T * scale * log2 e - lse_i * log2 e)
    dS^T = P^T * (dP^T - delta_i) * scale   dV += P^T dO_i      dK += dS^T Q_i

P^T and dS^T stay in registers as the left operand of the last two. dQ_i needs the sum over all 128 keys:
both consumers write their half of dS^T to shared memory, and with ``DQ_SPLIT`` each then multiplies the
whole ``dS_i`` (128 keys) by its half of K's columns (dQ_i's columns ``c * D/2 ..``), so the two halves of
dQ_i leave the program once, added into an fp32 buffer by one TMA reduce-add each
(``cp.reduce.async.bulk.tensor``). At D = 64 half a row of K is narrower than its swizzle, so with ``DQ_ALT``
the consumers take turns instead: consumer i % 2 multiplies all of ``dS_i`` by all of K and adds dQ_i once.
Without either, each consumer adds its own keys' share of all D columns: no wait for the other warpgroup,
twice the reduce traffic (at D = 64, B4 H32 S4096: 0.94x SDPA's backward, against 0.99x with DQ_ALT and 3
stages; causal 0.98-0.99x against 1.035x). The fp32 buffer is cast to the input dtype afterwards.

When dQ reads all 128 keys (either way), it runs a step late: step i multiplies dS_{i-1} (the other of the two
dS^T buffers) for dQ_{i-1}, so the wait for the other consumer's half is a step old and the consumers need not
run in phase; the step issues dV_i, dQ_{i-1}, dK_i, and dQ_{i-1} is stored and sent while dK_i runs. On the
H200 (B4 H32 S4096, GPU time, SDPA's backward / ours) this took D128 from 0.93-0.94x to 0.97-0.995x, causal
0.96-0.97x to 1.004-1.007x, D64 0.97-0.98x to 0.99-1.00x, causal 1.03-1.04x to 1.05-1.07x, with more spills at
D128 (Triton 3.6: 176 / 192 bytes against 120 / 128; results/h200/issue18/gbwd9.json, gbwd10.json; fewer since,
below). The same order without the lag was slower than the lag everywhere; making the consumers take turns at
issuing their multiplies (a ping-pong) was 0.80-0.97x.

Every partition loops over the tiles (key blocks of a head) of its program: pid, pid + P, ... The loader brings a
tile's first query blocks as soon as the ring has room, and its K and V once both consumers have signalled
``kv_empty`` for the previous tile; barrier phases count blocks over all the program's tiles. With ``PERSISTENT``
(D64, not causal) there is one program per SM, so a tile's dK/dV stores and the program's start-up overlap the
next tile's loads: 0.986-0.991x SDPA's backward against 0.972-0.977x (gbwd11.json). Otherwise each program takes one
tile, as before; the loop form alone changed ptxas's allocation at D128 (Triton 3.6: 112 / 128 bytes of spills
against 176 / 192), and that run measured 1.0x (D128) and 1.0-1.03x (causal) against 0.97-0.995x and 1.0x before.
Persistent causal problems were 0.79x (D128) and 1.01x against 1.04-1.05x (D64): with tiles of different lengths the
programs drift apart and work on many heads at once (our reading, not profiled).

Registers decide its speed at D = 128: two fp32 accumulators (dK, dV) of 64 x 128 per consumer leave ptxas
too few of the 240 it may use, and what it spills is loaded and stored again for every query block. Taking
the first two query blocks out of the loop (for causal problems the only ones that cross the diagonal, so
the loop needs no mask) cut the spills of Triton 3.6's ptxas from 216 to 120 bytes (causal: 344 to 128) and
took the kernel from 0.86x to 0.94x SDPA's backward (causal 0.73x to 0.92-0.95x) on the H200; Triton 3.9's
ptxas spills more with either form (184/256 bytes before, 280/288 after, 280/296 with the causal group order of
``_tile``, 256/280 with dQ a step late, 264/368 with the tile loop, which also spills 8 bytes at D64; not timed
on a GPU).

Limits: fp16/bf16, (B, H, S, D) contiguous, S a multiple of BN = 128 = 2 * BM, D 64 or 128; with
``DQ_SPLIT`` D/2 columns of K must be one shared-memory swizzle slab (D = 128; not with ``DQ_ALT``). No interpreter:
:func:`compile_sm90` compiles it offline.
"""
from __future__ import annotations

import torch
from triton._C.libtriton import ir
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
    warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ..compile_info import H100_SMEM_LIMIT
from .gluon_attention import CONSUMER_REGS, LOADER_REGS, LOADER_WARPS, LOG2E
from ._launch import num_sms
from .gluon_matmul import _GL_DTYPE, _layout, _tma_load, descriptor_type


@builtin
def _tma_add_36(tensor_desc, coord, src, _semantic=None):
    """TMA reduce-add of a shared-memory tile into global memory (Triton 3.6 has the op, not the wrapper)."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


LOG2E_C = gl.constexpr(LOG2E)  # lse is a natural log; the kernel works in base 2
_tma_add = getattr(tma, "async_atomic_add", None) or _tma_add_36  # Triton 3.9 names it async_atomic_add


@gluon.jit
def _tile(t, S, BH, GROUP, BN: gl.constexpr, BM: gl.constexpr, CAUSAL):
    """Tile t -> (first key row, batch*head, first query row, query blocks).

    The key blocks of one head are neighbouring tiles, so the programs that run at once share their heads'
    Q, dO and dQ in L2 (heads as the fast index made the dQ reduce-adds and the Q/dO reads go to DRAM: 60% of
    its bandwidth). Causal, key block kb walks S/BM - 2 kb query blocks: ``GROUP`` heads at a time are handed
    out heaviest key block first, so the last tiles to start are the shortest (head by head, the last head's
    longest block started with 31 programs to go; on the H200 at S=4096, D=128, the order took the kernel from
    0.952-0.955x SDPA's backward to 0.972-0.975x). Arguments reach a warp-specialised partition as values, not
    constexprs, so ``if CAUSAL`` is a runtime branch: it sets the names set before it."""
    n_kb = S // BN
    item = t  # batch*head * n_kb + key block
    start = t * 0
    if CAUSAL:
        per_group = GROUP * n_kb
        g = t // per_group
        heads = gl.minimum(BH - g * GROUP, GROUP)  # fewer in the last group
        idx = t - g * per_group
        item = (g * GROUP + idx % heads) * n_kb + idx // heads
        start = (item % n_kb) * BN  # queries before n0 see none of these keys
    return (item % n_kb) * BN, item // n_kb, start, (S - start) // BM


@gluon.jit
def _load_block(q_desc, do_desc, lse_desc, delta_desc, q_bufs, do_bufs, lse_bufs, delta_bufs, q_ready, q_empty, gi, r):
    """Q, dO, lse and delta of the query block at row r into stage gi % STAGES (gi: blocks loaded before, all tiles)."""
    STAGES: gl.constexpr = q_bufs.shape[0]
    s = gi % STAGES
    mbarrier.wait(q_empty.index(s), ((gi // STAGES) & 1) ^ 1)  # a fresh barrier passes parity 1
    mbarrier.expect(q_ready.index(s), q_desc.block_type.nbytes + do_desc.block_type.nbytes
                    + lse_desc.block_type.nbytes + delta_desc.block_type.nbytes)
    _tma_load(q_desc, [r, 0], q_ready.index(s), q_bufs.index(s))
    _tma_load(do_desc, [r, 0], q_ready.index(s), do_bufs.index(s))
    _tma_load(lse_desc, [r], q_ready.index(s), lse_bufs.index(s))
    _tma_load(delta_desc, [r], q_ready.index(s), delta_bufs.index(s))


@gluon.jit
def _loader(q_desc, do_desc, lse_desc, delta_desc, k_desc, v_desc, k_smem, v_smem, q_bufs, do_bufs, lse_bufs,
            delta_bufs, kv_ready, kv_empty, q_ready, q_empty, S, BH, GROUP, CAUSAL):
    """Every tile of this program: its first query blocks as soon as the ring has room (while the consumers finish
    the previous tile), K and V once both consumers are done with the previous tile's, then the other blocks."""
    BN: gl.constexpr = k_smem.shape[0]
    BM: gl.constexpr = q_bufs.shape[1]
    STAGES: gl.constexpr = q_bufs.shape[0]
    g = 0  # query blocks loaded, all tiles
    tc = 0  # tiles
    for t in range(gl.program_id(0), S // BN * BH, gl.num_programs(0)):
        n0, bh, start, n_steps = _tile(t, S, BH, GROUP, BN, BM, CAUSAL)
        row = bh * S + start
        first = gl.minimum(n_steps, STAGES)
        for i in range(first):
            _load_block(q_desc, do_desc, lse_desc, delta_desc, q_bufs, do_bufs, lse_bufs, delta_bufs, q_ready,
                        q_empty, g + i, row + i * BM)
        mbarrier.wait(kv_empty, (tc & 1) ^ 1)
        mbarrier.expect(kv_ready, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        _tma_load(k_desc, [bh * S + n0, 0], kv_ready, k_smem)
        _tma_load(v_desc, [bh * S + n0, 0], kv_ready, v_smem)
        for i in range(first, n_steps):
            _load_block(q_desc, do_desc, lse_desc, delta_desc, q_bufs, do_bufs, lse_bufs, delta_bufs, q_ready,
                        q_empty, g + i, row + i * BM)
        g += n_steps
        tc += 1


@gluon.jit
def _scores(gi, bufs, q_ready, STAGES: gl.constexpr):
    """Wait for the query block in stage gi % STAGES (gi counts this program's blocks over all its tiles), then issue
    ``S^T = K Q_i^T`` and ``dP^T = V dO_i^T`` (asynchronous)."""
    k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, dq_smem = bufs
    KB: gl.constexpr = k_c.shape[0]
    BM: gl.constexpr = q_bufs.shape[1]
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])
    s = gi % STAGES
    mbarrier.wait(q_ready.index(s), (gi // STAGES) & 1)
    st_zero = gl.zeros([KB, BM], gl.float32, st_layout)
    st_tok = warpgroup_mma(k_c, q_bufs.index(s).permute((1, 0)), st_zero, use_acc=False, is_async=True)
    dpt_tok = warpgroup_mma(v_c, do_bufs.index(s).permute((1, 0)), st_zero, use_acc=False, is_async=True)
    return st_tok, dpt_tok


@gluon.jit
def _grads(i, g, dk, dv, st_tok, dpt_tok, bufs, ds_mine, ds_ready, ds_free, dq_src, dq_ready, dq_phase, n0, start, key0,
           qk_scale, sm_scale, MASK: gl.constexpr, STAGES: gl.constexpr, DO_DQ: gl.constexpr, LAG: gl.constexpr):
    """From query block i's scores to its gradient multiplies, issued asynchronously: dV, dK and, with ``DO_DQ``, a dQ
    (without it the returned dQ token is dK's); with ``LAG`` (dQ a step late) dV, dQ, dK in that order. ``ds_mine``:
    this consumer's 64 keys of dS^T buffer i % 2, announced on ``ds_ready`` once written. The dQ multiply reads
    ``dq_src`` (all 128 keys of a dS^T buffer, block i's or, a step late, block i - 1's) after ``dq_ready``
    passes ``dq_phase``. ``MASK``: the block crosses the diagonal (causal). ``g``: blocks of the tiles before."""
    k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, dq_smem = bufs
    KB: gl.constexpr = k_c.shape[0]
    D: gl.constexpr = k_c.shape[1]
    BN: gl.constexpr = dq_src.shape[0]
    BM: gl.constexpr = q_bufs.shape[1]
    DQ_N: gl.constexpr = dq_smem.shape[1]
    ALL_KEYS: gl.constexpr = k_dq.shape[0] == BN  # DQ_SPLIT or DQ_ALT: dS_i of all 128 keys, else this consumer's
    dtype: gl.constexpr = k_c.dtype
    st_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BM, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                        instr_shape=[16, DQ_N, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    col_layout: gl.constexpr = gl.SliceLayout(0, st_layout)
    s = (g + i) % STAGES
    m0 = start + i * BM
    q_s = q_bufs.index(s)
    do_s = do_bufs.index(s)
    lse2 = lse_bufs.index(s).load(col_layout) * LOG2E_C
    st = warpgroup_mma_wait(1, deps=[st_tok])
    pt = gl.exp2(st * qk_scale - gl.expand_dims(lse2, 0))
    if MASK:
        cols = m0 + gl.arange(0, BM, layout=col_layout)
        keys = n0 + key0 + gl.arange(0, KB, layout=gl.SliceLayout(1, st_layout))
        pt = gl.where(gl.expand_dims(cols, 0) >= gl.expand_dims(keys, 1), pt, 0.0)
    delta = delta_bufs.index(s).load(col_layout)
    dpt = warpgroup_mma_wait(0, deps=[dpt_tok])
    dst = (pt * (dpt - gl.expand_dims(delta, 0)) * sm_scale).to(dtype)
    pt_op = gl.convert_layout(pt.to(dtype), a_layout)
    ds_op = gl.convert_layout(dst, a_layout)
    # dS^T into shared memory for dQ; when dQ takes all 128 keys the other consumer reads it too, so the buffer
    # is free only when both are done with it two steps ago (a fresh barrier passes parity 1)
    if ALL_KEYS:
        mbarrier.wait(ds_free, (((g + i) // 2) & 1) ^ 1)
    ds_mine.store(dst)
    fence_async_shared()
    dv_tok = warpgroup_mma(pt_op, do_s, dv, is_async=True)
    if not LAG:
        dk_tok = warpgroup_mma(ds_op, q_s, dk, is_async=True)
    if ALL_KEYS:
        mbarrier.arrive(ds_ready, count=1)
    if DO_DQ:
        dq_zero = gl.zeros([BM, DQ_N], gl.float32, dq_layout)
        if ALL_KEYS:  # all 128 keys of dS times K's columns (DQ_SPLIT: this consumer's half; DQ_ALT: all)
            mbarrier.wait(dq_ready, dq_phase)
            dq_tok = warpgroup_mma(dq_src.permute((1, 0)), k_dq, dq_zero, use_acc=False, is_async=True)
        else:  # this consumer's keys of dS_i times its rows of K
            dq_tok = warpgroup_mma(ds_mine.permute((1, 0)), k_dq, dq_zero, use_acc=False, is_async=True)
    if LAG:
        dk_tok = warpgroup_mma(ds_op, q_s, dk, is_async=True)
    if not DO_DQ:
        dq_tok = dk_tok
    return dv_tok, dk_tok, dq_tok, pt_op, ds_op


@gluon.jit
def _release(gi, bufs, q_empty, ds_free, STAGES: gl.constexpr, FREE_DS: gl.constexpr = True):
    """Query block gi's multiplies are done (gi: over all tiles): release its Q/dO stage (and, when dQ reads all keys
    and ``FREE_DS``, the dS^T buffer dQ read)."""
    k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, dq_smem = bufs
    mbarrier.arrive(q_empty.index(gi % STAGES), count=1)
    if k_dq.shape[0] != k_c.shape[0] and FREE_DS:
        mbarrier.arrive(ds_free, count=1)


@gluon.jit
def _dq_out(i, g, dq, bufs, q_empty, ds_free, dq_desc, bh, start, dq_col, S, STAGES: gl.constexpr):
    """Release query block i's buffers, add dQ_i into the fp32 buffer by TMA reduce."""
    _release(g + i, bufs, q_empty, ds_free, STAGES)
    _dq_store(i, dq, bufs, dq_desc, bh, start, dq_col, S)


@gluon.jit
def _dq_store(i, dq, bufs, dq_desc, bh, start, dq_col, S):
    """Add dQ_i into the fp32 buffer by TMA reduce."""
    k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, dq_smem = bufs
    BM: gl.constexpr = q_bufs.shape[1]
    tma.store_wait(0)  # the previous reduce-add has read dq_smem
    dq_smem.store(dq)
    fence_async_shared()
    _tma_add(dq_desc, [bh * S + start + i * BM, dq_col], dq_smem)


@gluon.jit
def _step(i, g, dk, dv, bufs, cur, prev, q_ready, q_empty, dq_desc, n0, bh, start, key0, dq_col, S, qk_scale, sm_scale,
          MASK: gl.constexpr, STAGES: gl.constexpr, DO_DQ: gl.constexpr, LAG: gl.constexpr, FIRST: gl.constexpr):
    """Query block i, one stage after the other: its scores, its gradient multiplies and the dQ of block j = i - LAG
    (``DO_DQ``; with ``LAG`` and ``FIRST`` there is no block j). ``cur`` / ``prev``: (all keys, this consumer's
    keys, ready, free) of dS^T buffer i % 2 and of the other one; ``g``: blocks of earlier tiles (even)."""
    _, ds_mine, ds_ready, ds_free = cur
    j = i - LAG
    dq_bufs = prev if LAG else cur  # the dS^T buffer dQ_j reads
    DQ: gl.constexpr = DO_DQ and not (LAG and FIRST)
    st_tok, dpt_tok = _scores(g + i, bufs, q_ready, STAGES)
    dv_tok, dk_tok, dq_tok, pt_op, ds_op = _grads(i, g, dk, dv, st_tok, dpt_tok, bufs, ds_mine, ds_ready, ds_free,
                                                  dq_bufs[0], dq_bufs[2], ((g + j) // 2) & 1, n0, start, key0,
                                                  qk_scale, sm_scale, MASK, STAGES, DQ, LAG)
    if DQ and LAG:  # dQ_j goes out while dK's multiply runs
        dv, dq, pt_op = warpgroup_mma_wait(1, deps=[dv_tok, dq_tok, pt_op])
        _dq_store(j, dq, bufs, dq_desc, bh, start, dq_col, S)
        dk, ds_op = warpgroup_mma_wait(0, deps=[dk_tok, ds_op])
        _release(g + i, bufs, q_empty, dq_bufs[3], STAGES)
    elif DQ:
        dv, dk, dq, pt_op, ds_op = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok, dq_tok, pt_op, ds_op])
        _dq_out(i, g, dq, bufs, q_empty, dq_bufs[3], dq_desc, bh, start, dq_col, S, STAGES)  # j == i
    else:
        dv, dk, pt_op, ds_op = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok, pt_op, ds_op])
        _release(g + i, bufs, q_empty, dq_bufs[3], STAGES, not (LAG and FIRST))
    return dk, dv


@gluon.jit
def _store_dkdv(dk, dv, dk_ptr, dv_ptr, row0):
    """This consumer's rows of dK and dV (once per program: plain stores)."""
    KB: gl.constexpr = dk.shape[0]
    D: gl.constexpr = dk.shape[1]
    rows = (row0 + gl.arange(0, KB, layout=gl.SliceLayout(1, dk.type.layout))).to(gl.int64)
    offs = gl.expand_dims(rows, 1) * D + gl.expand_dims(gl.arange(0, D, layout=gl.SliceLayout(0, dk.type.layout)), 0)
    gl.store(dk_ptr + offs, dk.to(dk_ptr.dtype.element_ty))
    gl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty))


@gluon.jit
def _consumer(args, C: gl.constexpr):
    """Consumer C's part of every tile of this program: dK and dV for the 64 keys ``key0 ..`` of the tile's block,
    and its share of every dQ_i (with DQ_ALT, all of dQ_i for the query blocks i with i % 2 == C). Steps go in
    pairs, one per dS^T buffer (the number of query blocks is even: S and the causal start are multiples of 128)."""
    (k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, ds0, ds1, ds0_mine, ds1_mine, dq_smem, kv_ready, kv_empty,
     q_ready, q_empty, ds_ready, ds_free, dq_desc, dk_ptr, dv_ptr, key0, dq_col, S, BH, GROUP, qk_scale, sm_scale,
     CAUSAL) = args
    KB: gl.constexpr = k_c.shape[0]  # this warpgroup's keys
    D: gl.constexpr = k_c.shape[1]
    BN: gl.constexpr = ds0.shape[0]
    BM: gl.constexpr = q_bufs.shape[1]
    STAGES: gl.constexpr = q_bufs.shape[0]
    ALT: gl.constexpr = k_dq.shape[0] == BN and k_dq.shape[1] == D  # DQ_ALT: dQ of even / odd blocks by consumer 0 / 1
    LAG: gl.constexpr = k_dq.shape[0] == BN  # dQ reads all 128 keys (DQ_SPLIT or DQ_ALT): a step late
    EVEN: gl.constexpr = not ALT or C == 0
    ODD: gl.constexpr = not ALT or C == 1
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    bufs = (k_c, v_c, k_dq, q_bufs, do_bufs, lse_bufs, delta_bufs, dq_smem)
    # the first pair of query blocks outside the loop: causal, they cross the diagonal (start = n0, BN = 2 BM) and
    # only they are masked; either way ptxas then spills less in the loop (sm_90, Triton 3.6, D128: 216 -> 120
    # bytes, causal 344 -> 128). With LAG, step i computes dQ_{i-1}: the even steps that of an odd block
    buf0 = (ds0, ds0_mine, ds_ready.index(0), ds_free.index(0))
    buf1 = (ds1, ds1_mine, ds_ready.index(1), ds_free.index(1))
    DQ0: gl.constexpr = ODD if LAG else EVEN
    DQ1: gl.constexpr = EVEN if LAG else ODD
    g = 0  # query blocks of this program's tiles before this one (even)
    tc = 0  # tiles
    for t in range(gl.program_id(0), S // BN * BH, gl.num_programs(0)):
        n0, bh, start, n_steps = _tile(t, S, BH, GROUP, BN, BM, CAUSAL)
        dk = gl.zeros([KB, D], gl.float32, kv_layout)
        dv = gl.zeros([KB, D], gl.float32, kv_layout)
        mbarrier.wait(kv_ready, tc & 1)
        dk, dv = _step(0, g, dk, dv, bufs, buf0, buf1, q_ready, q_empty, dq_desc, n0, bh, start, key0, dq_col, S,
                       qk_scale, sm_scale, CAUSAL, STAGES, DQ0, LAG, True)
        dk, dv = _step(1, g, dk, dv, bufs, buf1, buf0, q_ready, q_empty, dq_desc, n0, bh, start, key0, dq_col, S,
                       qk_scale, sm_scale, CAUSAL, STAGES, DQ1, LAG, False)
        for i in range(2, n_steps, 2):  # unmasked: the mask's index vectors take no registers here
            dk, dv = _step(i, g, dk, dv, bufs, buf0, buf1, q_ready, q_empty, dq_desc, n0, bh, start, key0, dq_col, S,
                           qk_scale, sm_scale, False, STAGES, DQ0, LAG, False)
            dk, dv = _step(i + 1, g, dk, dv, bufs, buf1, buf0, q_ready, q_empty, dq_desc, n0, bh, start, key0, dq_col,
                           S, qk_scale, sm_scale, False, STAGES, DQ1, LAG, False)
        if LAG:
            if ODD:  # the last block's dQ (odd: the number of blocks is even)
                DQ_N: gl.constexpr = dq_smem.shape[1]
                dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                                    instr_shape=[16, DQ_N, 16])
                mbarrier.wait(ds_ready.index(1), ((g + n_steps - 1) // 2) & 1)
                dq = warpgroup_mma(ds1.permute((1, 0)), k_dq, gl.zeros([BM, DQ_N], gl.float32, dq_layout),
                                   use_acc=False)
                _dq_store(n_steps - 1, dq, bufs, dq_desc, bh, start, dq_col, S)
            mbarrier.arrive(ds_free.index(1), count=1)  # the next tile may write dS^T buffer 1 again
        mbarrier.arrive(kv_empty, count=1)  # done with K and V: the loader brings the next tile's while dK, dV go out
        _store_dkdv(dk, dv, dk_ptr, dv_ptr, bh * S + n0 + key0)
        g += n_steps
        tc += 1
    tma.store_wait(0)  # the last dQ reduce-add has read dq_smem
    return (tc,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


# Arguments reach a partition as values; a literal written inside it is a constexpr, so each consumer is its own
# function around the same body
@gluon.jit
def _consumer0(args):
    return _consumer(args, 0)


@gluon.jit
def _consumer1(args):
    _consumer(args, 1)


@gluon.jit
def attention_bwd_kernel(q_desc, k_desc, v_desc, do_desc, lse_desc, delta_desc, dq_desc, dk_ptr, dv_ptr, S, BH, GROUP,
                         qk_scale, sm_scale, BM: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr,
                         CAUSAL: gl.constexpr, DQ_SPLIT: gl.constexpr, DQ_ALT: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    BN: gl.constexpr = k_desc.block_type.shape[0]
    KB: gl.constexpr = BN // 2
    DQ_N: gl.constexpr = dq_desc.block_type.shape[1]  # D / 2 with DQ_SPLIT, else D
    k_smem = gl.allocate_shared_memory(dtype, [BN, D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [BN, D], v_desc.layout)
    q_bufs = gl.allocate_shared_memory(dtype, [STAGES, BM, D], q_desc.layout)
    do_bufs = gl.allocate_shared_memory(dtype, [STAGES, BM, D], do_desc.layout)
    lse_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BM], lse_desc.layout)
    delta_bufs = gl.allocate_shared_memory(gl.float32, [STAGES, BM], delta_desc.layout)
    ds_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    ds0 = gl.allocate_shared_memory(dtype, [BN, BM], ds_layout)
    ds1 = gl.allocate_shared_memory(dtype, [BN, BM], ds_layout)
    dq_bufs = gl.allocate_shared_memory(gl.float32, [2, BM, DQ_N], dq_desc.layout)
    kv_ready = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    q_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ds_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    ds_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready.index(0), count=1)
    mbarrier.init(kv_empty.index(0), count=2)  # both consumers are done with a tile's K and V
    for s in gl.static_range(STAGES):
        mbarrier.init(q_ready.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)  # both consumers release each Q/dO stage
    for b in gl.static_range(2):
        mbarrier.init(ds_ready.index(b), count=2)
        mbarrier.init(ds_free.index(b), count=2)
    fence_async_shared()
    if DQ_SPLIT:  # consumer c: dQ_i's columns c * D/2 .., a contraction over all 128 keys
        k_dq0 = k_smem.slice(0, DQ_N, dim=1)
        k_dq1 = k_smem.slice(DQ_N, DQ_N, dim=1)
    elif DQ_ALT:  # consumer i % 2: all of dQ_i, a contraction over all 128 keys
        k_dq0 = k_smem
        k_dq1 = k_smem
    else:  # consumer c: its own keys' share of all D columns
        k_dq0 = k_smem.slice(0, KB)
        k_dq1 = k_smem.slice(KB, KB)
    kv_full = kv_ready.index(0)
    kv_free = kv_empty.index(0)
    first = (k_smem.slice(0, KB), v_smem.slice(0, KB), k_dq0, q_bufs, do_bufs, lse_bufs, delta_bufs, ds0, ds1,
             ds0.slice(0, KB), ds1.slice(0, KB), dq_bufs.index(0), kv_full, kv_free, q_ready, q_empty, ds_ready,
             ds_free, dq_desc, dk_ptr, dv_ptr, 0, 0, S, BH, GROUP, qk_scale, sm_scale, CAUSAL)
    second = (k_smem.slice(KB, KB), v_smem.slice(KB, KB), k_dq1, q_bufs, do_bufs, lse_bufs, delta_bufs, ds0, ds1,
              ds0.slice(KB, KB), ds1.slice(KB, KB), dq_bufs.index(1), kv_full, kv_free, q_ready, q_empty, ds_ready,
              ds_free, dq_desc, dk_ptr, dv_ptr, KB, DQ_N if DQ_SPLIT else 0, S, BH, GROUP, qk_scale, sm_scale,
              CAUSAL)
    loads = (q_desc, do_desc, lse_desc, delta_desc, k_desc, v_desc, k_smem, v_smem, q_bufs, do_bufs, lse_bufs,
             delta_bufs, kv_full, kv_free, q_ready, q_empty, S, BH, GROUP, CAUSAL)
    gl.warp_specialize([(_consumer0, (first,)), (_consumer1, (second,)), (_loader, loads)],
                       [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])

# per head dim: query rows per step, Q/dO ring depth, how dQ is split between the two consumers, causal heads per
# group (_tile), one program per SM (not causal); measured on the H200 at B4 H32 S4096 (results/h200/issue18/
# gbwd_run*.json, gbwd7.json to gbwd11.json): 3 stages at D128 (0.85-0.86x SDPA against 0.80-0.81x with 2), DQ_SPLIT at
# D128 (0.58-0.64x without), DQ_ALT with 3 stages at D64 (0.99x against 0.94x, causal 1.035x against 0.98-0.99x; 2
# stages 0.96-0.97x / 1.01-1.02x), dQ a step late at both (the module docstring), persistent at D64 (0.986-0.991x
# against 0.972-0.977x; at D128 a tie, 0.998-1.0x against 1.0x). Issuing the next block's scores before waiting for
# this block's gradients (commit e11d416, AHEAD) was slower everywhere, 0.45-0.79x, and was removed.
CONFIGS = {64: {"BM": 64, "STAGES": 3, "DQ_SPLIT": False, "DQ_ALT": True, "GROUP": 4, "PERSISTENT": True},
           128: {"BM": 64, "STAGES": 3, "DQ_SPLIT": True, "DQ_ALT": False, "GROUP": 4, "PERSISTENT": False}}
BN = 128  # keys per program: two consumers of 64


def _config(D: int, config: dict | None) -> dict:
    return {**CONFIGS[D], **(config or {})}


def smem_bytes(D: int, config: dict | None = None, itemsize: int = 2) -> int:
    """Shared memory of one program: K and V, the Q/dO/lse/delta ring, two dS^T buffers and two fp32 dQ
    tiles, and 1 KiB for the barriers and alignment."""
    cfg = _config(D, config)
    bm, dq_n = cfg["BM"], D // 2 if cfg["DQ_SPLIT"] else D
    ring = cfg["STAGES"] * (2 * bm * D * itemsize + 2 * bm * 4)
    return (2 * BN * D + 2 * BN * bm) * itemsize + ring + 2 * bm * dq_n * 4 + 1024


def supports(q: torch.Tensor, causal: bool = False, config: dict | None = None) -> bool:
    """Whether this kernel takes (B, H, S, D) inputs like ``q`` (shape and dtype only)."""
    B, H, S, D = q.shape
    if q.dtype not in _GL_DTYPE or D not in CONFIGS:
        return False
    cfg = _config(D, config)  # DQ_SPLIT: K's D/2 columns must be one 128-byte swizzle slab
    return (S % BN == 0 and S % cfg["BM"] == 0 and not (cfg["DQ_SPLIT"] and (D != 128 or cfg["DQ_ALT"]))
            and BN == 2 * cfg["BM"]  # the consumers take query blocks in pairs; causal: the first pair holds the diagonal
            and smem_bytes(D, cfg) <= H100_SMEM_LIMIT)


ROW_LAYOUT = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)  # lse and delta: BM floats


def _descriptors(q2, k2, v2, do2, lse, delta, dq_acc, bm: int, dq_n: int):
    D, dt = q2.shape[1], q2.dtype
    return (TensorDescriptor.from_tensor(q2, [bm, D], _layout([bm, D], dt)),
            TensorDescriptor.from_tensor(k2, [BN, D], _layout([BN, D], dt)),
            TensorDescriptor.from_tensor(v2, [BN, D], _layout([BN, D], dt)),
            TensorDescriptor.from_tensor(do2, [bm, D], _layout([bm, D], dt)),
            TensorDescriptor.from_tensor(lse.view(-1), [bm], ROW_LAYOUT),
            TensorDescriptor.from_tensor(delta.view(-1), [bm], ROW_LAYOUT),
            TensorDescriptor.from_tensor(dq_acc, [bm, dq_n], _layout([bm, dq_n], torch.float32)))


def attention_bwd(do, q, k, v, lse, delta, sm_scale: float, causal: bool = False, config: dict | None = None,
                  dq_acc: torch.Tensor | None = None):
    """``(dq, dk, dv)`` from the forward's ``lse`` (natural log, fp32, (B, H, S)) and ``delta = rowsum(dO * O)``.

    fp16/bf16 (B, H, S, D) CUDA tensors on Hopper; dQ is summed in fp32 (``dq_acc``, (B*H*S, D) zeros, if the
    caller has one) and cast at the end."""
    if not supports(q, causal, config):
        raise ValueError(f"fp16/bf16, D 64 or 128, S a multiple of {BN}; got {tuple(q.shape)} {q.dtype}")
    B, H, S, D = q.shape
    cfg = _config(D, config)
    bm, dq_n = cfg["BM"], D // 2 if cfg["DQ_SPLIT"] else D
    q2, k2, v2, do2 = (t.contiguous().view(B * H * S, D) for t in (q, k, v, do))
    if dq_acc is None:
        dq_acc = torch.zeros((B * H * S, D), dtype=torch.float32, device=q.device)
    dk, dv = torch.empty_like(k2), torch.empty_like(v2)
    descs = _descriptors(q2, k2, v2, do2, lse.contiguous(), delta.contiguous(), dq_acc, bm, dq_n)
    tiles = S // BN * B * H
    # PERSISTENT: one program per SM walks tiles pid, pid + P, ...; causal problems keep one tile per program, since
    # tiles of different lengths spread such programs over many heads at once (gbwd11: 0.79x at D128 against 1.0-1.03x)
    programs = min(tiles, num_sms(q)) if cfg["PERSISTENT"] and not causal else tiles
    attention_bwd_kernel[(programs,)](*descs, dk, dv, S, B * H, cfg["GROUP"], sm_scale * LOG2E, sm_scale, BM=bm, D=D,
                                      STAGES=cfg["STAGES"], CAUSAL=causal, DQ_SPLIT=cfg["DQ_SPLIT"],
                                      DQ_ALT=cfg["DQ_ALT"], num_warps=4)
    return tuple(t.view(B, H, S, D) for t in (dq_acc.to(q.dtype), dk, dv))


def compile_sm90(S: int = 4096, D: int = 128, causal: bool = False, config: dict | None = None):
    """The kernel compiled for sm_90 offline (``tcourse.compile_info.CompileReport``)."""
    from ..compile_info import compile_for_sm90

    cfg = _config(D, config)
    bm, dq_n = cfg["BM"], D // 2 if cfg["DQ_SPLIT"] else D
    blocks = (([bm, D], torch.float16), ([BN, D], torch.float16), ([BN, D], torch.float16), ([bm, D], torch.float16))
    rows = f"tensordesc<fp32[{bm}],{ROW_LAYOUT!r}>"
    descs = [descriptor_type(block, dt) for block, dt in blocks] + [rows, rows,
                                                                    descriptor_type([bm, dq_n], torch.float32)]
    return compile_for_sm90(attention_bwd_kernel, *descs, "*fp16", "*fp16", S, 128, cfg["GROUP"], 0.1, 0.1,
                            num_warps=4, num_stages=1, BM=bm, D=D, STAGES=cfg["STAGES"], CAUSAL=causal,
                            DQ_SPLIT=cfg["DQ_SPLIT"], DQ_ALT=cfg["DQ_ALT"])
