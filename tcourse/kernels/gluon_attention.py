"""Attention forward in Gluon for Hopper: two softmax warpgroups and a TMA loader, warp-specialised.

Chapter 6.6 found that in Triton 3.6 one warpgroup does ``S = Q K^T`` (tensor cores), then the softmax
(MUFU exp2), then ``P V`` strictly one after the other, so the tensor cores idle during the softmax.
Here a program owns 2 x BM query rows and splits them between two *consumer* partitions of one warpgroup
each (the default partition and a worker), which run the same online-softmax loop on their own BM rows
over shared K/V tiles. While one warpgroup is in its softmax, the other's wgmma can use the tensor cores:
the warp schedulers interleave them (no explicit ping-pong barrier here). A 1-warp loader partition streams
K/V tiles into a ``STAGES``-deep ring: ``ready[s]`` (TMA bytes arrived), ``empty[s]`` (both consumers done,
so its count is 2).

Limits (a teaching kernel): non-causal, fp16, S a multiple of 2 * BM and of BN, D = 64 or 128, inputs
(B, H, S, D) contiguous. Nothing runs under the interpreter: on a laptop :func:`compile_sm90` compiles it.
"""
from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .gluon_matmul import _layout, _tma_load, _tma_store, descriptor_type

LOG2E = 1.4426950408889634
LOADER_WARPS = gl.constexpr(1)
LOADER_REGS = gl.constexpr(24)
CONSUMER_WARPS = gl.constexpr(4)
CONSUMER_REGS = gl.constexpr(240)  # the worker consumer: as many registers as the default partition


@gluon.jit
def _kv_loader(k_desc, v_desc, k_bufs, v_bufs, ready, empty, kv_row, n_blocks):
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    for j in range(n_blocks):
        s = j % STAGES
        mbarrier.wait(empty.index(s), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        _tma_load(k_desc, [kv_row + j * BN, 0], ready.index(s), k_bufs.index(s))
        _tma_load(v_desc, [kv_row + j * BN, 0], ready.index(s), v_bufs.index(s))


@gluon.jit
def _softmax_consumer(q_tile, k_bufs, v_bufs, ready, empty, o_desc, o_tile, o_row, n_blocks, qk_scale):
    """Online softmax over all K/V tiles for the BM query rows in ``q_tile``; writes O for them."""
    BM: gl.constexpr = q_tile.shape[0]
    D: gl.constexpr = q_tile.shape[1]
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    m_i = gl.full([BM], float("-inf"), gl.float32, row_s)
    l_i = gl.zeros([BM], gl.float32, row_s)
    acc = gl.zeros([BM, D], gl.float32, o_layout)
    s_zero = gl.zeros([BM, BN], gl.float32, s_layout)
    for j in range(n_blocks):
        st = j % STAGES
        mbarrier.wait(ready.index(st), (j // STAGES) & 1)
        s = warpgroup_mma(q_tile, k_bufs.index(st).permute((1, 0)), s_zero, use_acc=False) * qk_scale
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        p = gl.exp2(s - gl.expand_dims(m_new, 1))
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, axis=1)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
        p_op = gl.convert_layout(p.to(gl.float16), p_layout)
        acc = warpgroup_mma(p_op, v_bufs.index(st), acc)
        mbarrier.arrive(empty.index(st), count=1)
        m_i = m_new
    acc = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    o_tile.store(acc.to(gl.float16))
    fence_async_shared()
    _tma_store(o_desc, [o_row, 0], o_tile)
    tma.store_wait(0)
    return (m_i,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


@gluon.jit
def attention_ws_kernel(q_desc, k_desc, v_desc, o_desc, S, qk_scale, BM: gl.constexpr, BN: gl.constexpr,
                        D: gl.constexpr, STAGES: gl.constexpr):
    bh = gl.program_id(1)
    kv_row = bh * S
    q_row = kv_row + gl.program_id(0) * 2 * BM
    n_blocks = S // BN
    q_tiles = gl.allocate_shared_memory(gl.float16, [2, BM, D], q_desc.layout)
    o_tiles = gl.allocate_shared_memory(gl.float16, [2, BM, D], o_desc.layout)
    k_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BN, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BN, D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)  # both consumers release each K/V tile
    fence_async_shared()
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    _tma_load(q_desc, [q_row, 0], q_bar, q_tiles.index(0))
    _tma_load(q_desc, [q_row + BM, 0], q_bar, q_tiles.index(1))
    mbarrier.wait(q_bar, 0)
    first = (q_tiles.index(0), k_bufs, v_bufs, ready, empty, o_desc, o_tiles.index(0), q_row, n_blocks, qk_scale)
    second = (q_tiles.index(1), k_bufs, v_bufs, ready, empty, o_desc, o_tiles.index(1), q_row + BM, n_blocks, qk_scale)
    loads = (k_desc, v_desc, k_bufs, v_bufs, ready, empty, kv_row, n_blocks)
    gl.warp_specialize([(_softmax_consumer, first), (_softmax_consumer, second), (_kv_loader, loads)],
                       [CONSUMER_WARPS, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])
    mbarrier.invalidate(q_bar)


DEFAULT_CONFIG = {"BM": 64, "BN": 128, "STAGES": 2}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None = None,
              config: dict | None = None) -> torch.Tensor:
    """Non-causal ``softmax(q k^T * sm_scale) v`` for fp16 (B, H, S, D) CUDA tensors on Hopper."""
    cfg = {**DEFAULT_CONFIG, **(config or {})}
    B, H, S, D = q.shape
    if q.dtype != torch.float16 or S % (2 * cfg["BM"]) or S % cfg["BN"] or D not in (64, 128):
        raise ValueError("fp16, S a multiple of 2*BM and BN, D 64 or 128")
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(f"q, k, v must have one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    q2, k2, v2 = (t.contiguous().view(B * H * S, D) for t in (q, k, v))
    o = torch.empty_like(q2)
    bm, bn = cfg["BM"], cfg["BN"]
    descs = (TensorDescriptor.from_tensor(q2, [bm, D], _layout([bm, D], torch.float16)),
             TensorDescriptor.from_tensor(k2, [bn, D], _layout([bn, D], torch.float16)),
             TensorDescriptor.from_tensor(v2, [bn, D], _layout([bn, D], torch.float16)),
             TensorDescriptor.from_tensor(o, [bm, D], _layout([bm, D], torch.float16)))
    attention_ws_kernel[(S // (2 * bm), B * H)](*descs, S, sm_scale * LOG2E, BM=bm, BN=bn, D=D, STAGES=cfg["STAGES"],
                                                num_warps=4)
    return o.view(B, H, S, D)


def compile_sm90(S: int = 4096, D: int = 128, config: dict | None = None):
    """The kernel compiled for sm_90 offline (``tcourse.compile_info.CompileReport``)."""
    from ..compile_info import compile_for_sm90

    cfg = {**DEFAULT_CONFIG, **(config or {})}
    bm, bn = cfg["BM"], cfg["BN"]
    descs = [descriptor_type(block, torch.float16) for block in ([bm, D], [bn, D], [bn, D], [bm, D])]
    return compile_for_sm90(attention_ws_kernel, *descs, S, 0.1, num_warps=4, num_stages=1, BM=bm, BN=bn, D=D,
                            STAGES=cfg["STAGES"])
