"""Attention forward in Gluon for Hopper, pipelined the way FlashAttention-3 is: persistent programs,
separate K and V rings, and asynchronous wgmma written so that a warpgroup's softmax would overlap its own P V.

``gluon_attention.attention_ws_kernel`` (chapter 9) waits for every wgmma: inside one consumer warpgroup
``S = Q K^T``, the softmax and ``O += P V`` run one after the other. Here, for key block j, a consumer
issues ``S_j = Q K_j^T`` and ``O += P_{j-1} V_{j-1}`` without waiting, waits for ``S_j`` only (wgmma
groups finish in order), computes the softmax of ``S_j``, then waits for ``P_{j-1} V_{j-1}`` and rescales
``O``. In the machine code that last wait comes before the softmax: ptxas (CUDA 12.8 and 12.9) moves a
``wgmma.wait_group`` up past arithmetic to the previous memory operation or barrier, here the release of K_j
(chapter 9.7 prints where the exponentials land). Held back by a shared-memory load that depends on the row
sums, the wait stays after the softmax; measured on the H200 that was 3-4 % faster at plain D=64 (still slower
than the Triton kernel there) and level or 1-4 % slower on the other shapes (results/h200/issue18/fwd11.json),
so the kernel does without it: the two consumers already take turns on the tensor cores. K tiles are
released as soon as their ``Q K^T`` is done, V tiles after their ``P V``, so the loader refills K early.

Programs are persistent (at most one per SM): each walks query tiles ``pid, pid + #programs, ...``, in an
order (:func:`tile_order`) that keeps the heads in flight few enough for their K and V to stay in L2 and,
for causal problems, gives every program as many heavy tiles (late query blocks) as light ones. The loader loads the next tile's Q as soon as both consumers have issued their last
``Q K^T`` of the current one, so a tile's start (Q load, first K) overlaps the previous tile's last
``P V`` and its O store (asynchronous TMA store, waited for only before the O buffer is reused).

One program: 2 x BM query rows (one consumer warpgroup of 4 warps per BM rows) and a 1-warp loader.
Limits: fp16/bf16, (B, H, S, D) contiguous, S a multiple of 2 * BM and BN, D 64 or 128; causal needs
BN = 2 * BM (only the diagonal block is masked). No interpreter: :func:`compile_sm90` compiles it offline.

The public ``attention`` no longer calls this kernel: ``gluon_attention_consumers`` (chapter 9.8), the same loader and
persistent tiles with each consumer strictly in order, measured 1.00-1.14x cuDNN on the 8 suite shapes where this one
is 0.90-1.14x (results/h200/issue18/fwd12.json). It stays as chapter 9.7's kernel, and its tile orders serve both.
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
from .gluon_attention import CONSUMER_REGS, LOADER_REGS, LOADER_WARPS, LOG2E
from .gluon_matmul import _GL_DTYPE, _layout, _tma_load, _tma_store, descriptor_type


@gluon.jit
def _tile(t, n_m, BH, G):
    """Query tile ``t`` -> (query block index, batch*head). ``G`` > 0: rounds of G heads' tiles, one tile per
    program (the grid has G * n_m programs), the highest query blocks (most keys under the causal mask) first
    and every other round reversed, so over two rounds each program gets one heavy and one light tile, and
    the programs running at once read at most 2 G heads' K and V, which stay in L2. ``G`` = 0: a head's tiles
    are neighbours (for n_m past the SM count); ``G`` = -1: the head is the fast index, as before the rounds
    (132 programs read 132 heads' K and V: at S=4096, D=128 264 MB, past the 60 MB L2)."""
    if G > 0:
        R = G * n_m
        k = t // R
        g0 = k * G
        gk = G
        if BH - g0 < G:  # the last round holds the remaining heads
            gk = BH - g0
        s = t % R
        if k % 2 == 1:
            s = gk * n_m - 1 - s
        return n_m - 1 - s // gk, g0 + s % gk
    if G == 0:
        return n_m - 1 - t % n_m, t // n_m
    return n_m - 1 - t // BH, t % BH


@gluon.jit
def _n_blocks(m, S, BN: gl.constexpr, CAUSAL: gl.constexpr):
    if CAUSAL:
        return m + 1  # BN == 2 * BM: block m is the diagonal one
    else:
        return S // BN


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
            S, BH, n_tiles, G, CAUSAL: gl.constexpr):
    BM: gl.constexpr = q_bufs.shape[1]
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    n_m = S // (2 * BM)
    it = 0
    ti = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        m, bh = _tile(t, n_m, BH, G)
        row = bh * S
        n = _n_blocks(m, S, BN, CAUSAL)
        for j in range(n):
            cur = it + j
            s = cur % STAGES
            phase = ((cur // STAGES) & 1) ^ 1
            mbarrier.wait(k_empty.index(s), phase)
            mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
            _tma_load(k_desc, [row + j * BN, 0], k_ready.index(s), k_bufs.index(s))
            if j == 0:  # K_0 first: the Q buffers free up only when the previous tile's last Q K^T is done
                for c in gl.static_range(2):  # a fresh barrier counts as "phase 1 completed": no wait at first
                    mbarrier.wait(q_empty.index(c), (ti & 1) ^ 1)
                    mbarrier.expect(q_ready.index(c), q_desc.block_type.nbytes)
                    _tma_load(q_desc, [row + m * 2 * BM + c * BM, 0], q_ready.index(c), q_bufs.index(c))
            mbarrier.wait(v_empty.index(s), phase)
            mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
            _tma_load(v_desc, [row + j * BN, 0], v_ready.index(s), v_bufs.index(s))
        it += n
        ti += 1


@gluon.jit
def _softmax_update(s, m_i, l_i, qk_scale):
    """One block of raw scores into the running row max and denominator; returns P (unnormalised) and
    the factor alpha that rescales what was accumulated before. The scale is folded into exp2's FMA."""
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    return p, alpha, l_i * alpha + gl.sum(p, axis=1), m_new


@gluon.jit
def _diagonal_mask(s, half, BM: gl.constexpr, BN: gl.constexpr, layout: gl.constexpr):
    """The causal mask of the diagonal block (BN == 2 * BM): row ``half + r`` sees columns ``<= half + r``."""
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout)) + half
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    return gl.where(gl.expand_dims(rows, 1) >= gl.expand_dims(cols, 0), s, float("-inf"))


@gluon.jit
def _my_turn(turn, k, flip, PINGPONG: gl.constexpr):
    """Ping-pong: wait until the other consumer has issued its wgmmas of the previous group."""
    if PINGPONG:
        mbarrier.wait(turn, (k & 1) ^ flip)


@gluon.jit
def _pass_turn(turn, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(turn, count=1)


@gluon.jit
def _my_blocks(S, BH, n_tiles, G, BM: gl.constexpr, BN: gl.constexpr, CAUSAL: gl.constexpr):
    """How many key blocks this program walks over, summed over its tiles."""
    n_m = S // (2 * BM)
    total = 0
    for t in range(gl.program_id(0), n_tiles, gl.num_programs(0)):
        m, bh = _tile(t, n_m, BH, G)
        total += _n_blocks(m, S, BN, CAUSAL)
    return total


@gluon.jit
def _store_o(acc, l_i, o_desc, o_tile, row, o_layout: gl.constexpr):
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    acc = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    tma.store_wait(0)  # the previous tile's O store has read o_tile
    o_tile.store(acc.to(o_tile.dtype))
    fence_async_shared()
    _tma_store(o_desc, [row, 0], o_tile)


@gluon.jit
def _consumer(q_tile, q_ready, q_empty, k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty, o_desc, o_tile, half,
              turn_mine, turn_other, flip, S, BH, n_tiles, G, qk_scale, CAUSAL: gl.constexpr,
              PINGPONG: gl.constexpr):
    """The online softmax for the BM query rows ``half .. half + BM`` of every tile this program owns.

    One flat loop over all key blocks of all the program's tiles: step g issues ``Q K_g^T`` and
    ``P_{g-1} V_{g-1}`` together, also across a tile boundary, so a tile's first scores are computed
    while the previous tile's last P V runs; that tile's O is then normalised and stored.

    With PINGPONG the two consumers take turns to issue their wgmmas, so that one's matrix multiplies
    queue behind the other's and run while the other computes its softmax. ``k`` counts this
    consumer's turns; ``flip`` is 1 for the consumer that goes first."""
    BM: gl.constexpr = q_tile.shape[0]
    D: gl.constexpr = q_tile.shape[1]
    BN: gl.constexpr = k_bufs.shape[1]
    STAGES: gl.constexpr = k_bufs.shape[0]
    dtype: gl.constexpr = q_tile.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([BM, BN], gl.float32, s_layout)
    n_m = S // (2 * BM)
    nprog = gl.num_programs(0)
    total = _my_blocks(S, BH, n_tiles, G, BM, BN, CAUSAL)
    t = gl.program_id(0)
    m, bh = _tile(t, n_m, BH, G)
    n = _n_blocks(m, S, BN, CAUSAL)
    o_row = bh * S + m * 2 * BM + half
    # block 0 of the first tile: nothing to overlap with yet
    mbarrier.wait(q_ready, 0)
    mbarrier.wait(k_ready.index(0), 0)
    _my_turn(turn_mine, 0, flip, PINGPONG)
    s_tok = warpgroup_mma(q_tile, k_bufs.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    _pass_turn(turn_other, PINGPONG)
    s = warpgroup_mma_wait(0, deps=[s_tok])
    mbarrier.arrive(k_empty.index(0), count=1)
    if n == 1:
        mbarrier.arrive(q_empty, count=1)
        if CAUSAL:
            s = _diagonal_mask(s, half, BM, BN, s_layout)
    m_i = gl.full([BM], float("-inf"), gl.float32, row_s)
    l_i = gl.zeros([BM], gl.float32, row_s)
    p, alpha, l_i, m_i = _softmax_update(s, m_i, l_i, qk_scale)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    acc = gl.zeros([BM, D], gl.float32, o_layout)
    j = 1
    ti = 0
    for g in range(1, total):
        new_tile = j == n
        o_prev = o_row
        if new_tile:  # block g opens this program's next tile
            t += nprog
            ti += 1
            m, bh = _tile(t, n_m, BH, G)
            n = _n_blocks(m, S, BN, CAUSAL)
            o_row = bh * S + m * 2 * BM + half
            j = 0
            mbarrier.wait(q_ready, ti & 1)
        sk = g % STAGES
        sv = (g - 1) % STAGES
        mbarrier.wait(k_ready.index(sk), (g // STAGES) & 1)
        mbarrier.wait(v_ready.index(sv), ((g - 1) // STAGES) & 1)
        _my_turn(turn_mine, g, flip, PINGPONG)
        s_tok = warpgroup_mma(q_tile, k_bufs.index(sk).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        # rescale O for block g-1's max while Q K_g^T runs; then O += P_{g-1} V_{g-1}
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
        o_tok = warpgroup_mma(p_op, v_bufs.index(sv), acc, is_async=True)
        _pass_turn(turn_other, PINGPONG)
        s = warpgroup_mma_wait(1, deps=[s_tok])  # S_g is ready; P_{g-1} V_{g-1} may still run
        mbarrier.arrive(k_empty.index(sk), count=1)
        if j == n - 1:  # the tile's last Q K^T is done: the loader may load the next Q
            mbarrier.arrive(q_empty, count=1)
            if CAUSAL:
                s = _diagonal_mask(s, half, BM, BN, s_layout)
        l_prev = l_i
        if new_tile:
            m_i = gl.full([BM], float("-inf"), gl.float32, row_s)
            l_i = gl.zeros([BM], gl.float32, row_s)
        p, alpha, l_i, m_i = _softmax_update(s, m_i, l_i, qk_scale)
        p_next = gl.convert_layout(p.to(dtype), p_layout)
        acc, p_op = warpgroup_mma_wait(0, deps=[o_tok, p_op])
        mbarrier.arrive(v_empty.index(sv), count=1)
        if new_tile:  # block g-1 closed the previous tile
            _store_o(acc, l_prev, o_desc, o_tile, o_prev, o_layout)
            acc = gl.zeros([BM, D], gl.float32, o_layout)
        p_op = p_next
        j += 1
    # the last block's P V, then the last tile's O
    sv = (total - 1) % STAGES
    mbarrier.wait(v_ready.index(sv), ((total - 1) // STAGES) & 1)
    _my_turn(turn_mine, total, flip, PINGPONG)
    acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
    o_tok = warpgroup_mma(p_op, v_bufs.index(sv), acc, is_async=True)
    _pass_turn(turn_other, PINGPONG)
    acc, p_op = warpgroup_mma_wait(0, deps=[o_tok, p_op])
    mbarrier.arrive(v_empty.index(sv), count=1)
    _store_o(acc, l_i, o_desc, o_tile, o_row, o_layout)
    tma.store_wait(0)
    return (total,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


@gluon.jit
def attention_pipelined_kernel(q_desc, k_desc, v_desc, o_desc, S, BH, qk_scale, G, BM: gl.constexpr,
                               BN: gl.constexpr, D: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                               PINGPONG: gl.constexpr):
    dtype: gl.constexpr = q_desc.dtype
    n_tiles = (S // (2 * BM)) * BH
    q_bufs = gl.allocate_shared_memory(dtype, [2, BM, D], q_desc.layout)
    o_bufs = gl.allocate_shared_memory(dtype, [2, BM, D], o_desc.layout)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BN, D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES, BN, D], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(2):
        mbarrier.init(q_ready.index(c), count=1)
        mbarrier.init(q_empty.index(c), count=1)
        mbarrier.init(turn.index(c), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=2)  # both consumers release each tile
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(v_empty.index(s), count=2)
    fence_async_shared()
    first = (q_bufs.index(0), q_ready.index(0), q_empty.index(0), k_bufs, v_bufs, k_ready, k_empty, v_ready, v_empty,
             o_desc, o_bufs.index(0), 0, turn.index(0), turn.index(1), 1, S, BH, n_tiles, G, qk_scale,
             CAUSAL, PINGPONG)
    second = (q_bufs.index(1), q_ready.index(1), q_empty.index(1), k_bufs, v_bufs, k_ready, k_empty, v_ready,
              v_empty, o_desc, o_bufs.index(1), BM, turn.index(1), turn.index(0), 0, S, BH, n_tiles, G, qk_scale,
              CAUSAL, PINGPONG)
    loads = (q_desc, k_desc, v_desc, q_bufs, k_bufs, v_bufs, q_ready, q_empty, k_ready, k_empty, v_ready, v_empty,
             S, BH, n_tiles, G, CAUSAL)
    gl.warp_specialize([(_consumer, first), (_consumer, second), (_loader, loads)],
                       [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])


# measured on an H200 (results/h200/issue18/fwd2_run*.json; ping-pong at D=64 and D=128 within the runs' noise)
CONFIGS = {64: {"BM": 64, "BN": 128, "STAGES": 3, "PINGPONG": False},
           128: {"BM": 64, "BN": 128, "STAGES": 2, "PINGPONG": True}}
_launch = Launcher(attention_pipelined_kernel)  # repeated calls: Triton's C launch, each CUtensorMap built once
# (shape, dtype, causal, scale, order, device, Q/K/V/O addresses) -> plan: a call on the buffers of an earlier one
# skips the four descriptors (as gluon_matmul's plans do)
_PLANS = Plans()


ORDERS = ("rounds", "head_major", "heads_fast")


def tile_order(n_m: int, BH: int, sms: int, causal: bool, order: str | None = None) -> tuple[int, int]:
    """(programs, G) for :func:`_tile`, ``n_m`` query tiles per head and ``BH`` heads; ``order`` one of
    :data:`ORDERS`. By default, as measured on the H200 (results/h200/issue18/fwd4_run1.json and _run2, fp16
    B4 H32 against cuDNN): rounds for causal problems (S1024 D128 1.13x, S4096 D128 1.06-1.07x, S1024 D64
    1.02x, against 0.90x, 0.94-0.98x and 0.83x head-major); a head's tiles adjacent otherwise (S1024 D128
    0.99x against 0.98x in rounds, which leave 4 of the 132 SMs idle, in both runs; at S4096 the two traded
    places between the runs, 0.95-1.05x and 1.0-1.01x) and wherever one head has more tiles than SMs."""
    order = order or ("rounds" if causal and n_m <= sms else "head_major")
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if order == "rounds":
        if n_m > sms:
            raise ValueError(f"rounds need a head's {n_m} tiles to fit on the {sms} SMs")
        g = min(sms // n_m, BH)
        return g * n_m, g
    return min(sms, n_m * BH), 0 if order == "head_major" else -1


def supports(q: torch.Tensor, causal: bool, config: dict | None = None) -> bool:
    """Whether this kernel takes (B, H, S, D) inputs like ``q`` (shape and dtype only)."""
    B, H, S, D = q.shape
    if q.dtype not in _GL_DTYPE or D not in CONFIGS:
        return False
    cfg = {**CONFIGS[D], **(config or {})}
    bm, bn = cfg["BM"], cfg["BN"]
    smem = (4 * bm + 2 * cfg["STAGES"] * bn) * D * q.element_size()  # Q and O (2 x BM rows each), the K/V rings
    return (S % (2 * bm) == 0 and S % bn == 0 and not (causal and bn != 2 * bm)
            and smem + 1024 <= H100_SMEM_LIMIT)  # + barriers


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale: float | None = None,
              config: dict | None = None, order: str | None = None) -> torch.Tensor:
    """``softmax(q k^T * sm_scale [+ causal mask]) v`` for fp16/bf16 (B, H, S, D) CUDA tensors on Hopper;
    ``order``: the tile order (:func:`tile_order`)."""
    if not supports(q, causal, config):
        raise ValueError(f"fp16/bf16, D 64 or 128, S a multiple of 2*BM and BN (causal: BN = 2*BM); "
                         f"got {tuple(q.shape)} {q.dtype}")
    if k.shape != q.shape or v.shape != q.shape or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must have one shape and dtype, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    B, H, S, D = q.shape
    cfg = {**CONFIGS[D], **(config or {})}
    bm, bn = cfg["BM"], cfg["BN"]
    dt = q.dtype
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    q2, k2, v2 = (t.contiguous().view(B * H * S, D) for t in (q, k, v))
    o = torch.empty_like(q2)
    pkey = None if config else (B, H, S, D, dt, causal, sm_scale, order, current_device(), q2.data_ptr(),
                                k2.data_ptr(), v2.data_ptr(), o.data_ptr())
    plan = _PLANS.get(pkey) if pkey is not None else None  # a config given: the full path every call
    if plan is not None and plan():
        return o.view(B, H, S, D)
    descs = (TensorDescriptor.from_tensor(q2, [bm, D], _layout([bm, D], dt)),
             TensorDescriptor.from_tensor(k2, [bn, D], _layout([bn, D], dt)),
             TensorDescriptor.from_tensor(v2, [bn, D], _layout([bn, D], dt)),
             TensorDescriptor.from_tensor(o, [bm, D], _layout([bm, D], dt)))
    programs, g = tile_order(S // (2 * bm), B * H, num_sms(q), causal, order)
    meta = {**cfg, "D": D, "CAUSAL": causal, "num_warps": 4}
    args = (*descs, S, B * H, sm_scale * LOG2E, g)
    _launch((programs,), args, meta)
    if pkey is not None:
        _PLANS.add(pkey, plan_of(_launch, (programs,), args, meta))
    return o.view(B, H, S, D)


def compile_sm90(S: int = 4096, D: int = 128, causal: bool = False, config: dict | None = None):
    """The kernel compiled for sm_90 offline (``tcourse.compile_info.CompileReport``)."""
    from ..compile_info import compile_for_sm90

    cfg = {**CONFIGS[D], **(config or {})}
    bm, bn = cfg["BM"], cfg["BN"]
    descs = [descriptor_type(block, torch.float16) for block in ([bm, D], [bn, D], [bn, D], [bm, D])]
    G = tile_order(S // (2 * bm), 128, 132, causal)[1]
    return compile_for_sm90(attention_pipelined_kernel, *descs, S, 128, 0.1, G, num_warps=4, num_stages=1, BM=bm, BN=bn,
                            D=D, STAGES=cfg["STAGES"], CAUSAL=causal, PINGPONG=cfg["PINGPONG"])
