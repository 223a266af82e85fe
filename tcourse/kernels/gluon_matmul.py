"""C = A @ B in Gluon for Hopper (sm_90): a warp-specialised kernel with explicit layouts.

One program computes one BM x BN tile of C. Two partitions share a ring of ``STAGES`` shared-memory
buffers for the A and B tiles:

- the loader partition (1 warp, few registers) waits until a buffer is free (``empty`` barrier),
  announces how many bytes will arrive (``mbarrier.expect``) and starts two TMA copies that signal
  the ``ready`` barrier when the bytes have landed;
- the default partition (one warpgroup, 4 warps) waits on ``ready``, issues an asynchronous
  ``warpgroup_mma`` (wgmma) on the two shared-memory tiles, keeps one MMA in flight, and frees the
  buffer of the previous step by arriving on its ``empty`` barrier; after the K loop it writes C
  through shared memory and a TMA store.

Nothing here runs under the interpreter (Gluon has none): on a laptop :func:`compile_sm90` compiles
it for sm_90 offline; on an H200 :func:`matmul` launches it. The API differences between the
supported Triton versions (3.6 on the H200, 3.9 on the laptop) are handled in the code (see below); both
compile it for sm_90 offline.
"""
from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
    warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from ._launch import Launcher, Plans, cdiv, current_device, is_hopper, plan_of

# The Gluon API differences between the supported versions that this kernel meets (3.6 read and compiled
# for sm_90 on a laptop, as 3.9 is): the TMA copies are async_copy_global_to_shared / async_copy_shared_to_global
# in 3.6 and async_load / async_store in 3.9 (where the old names raise); 3.6 needs the default partition of
# warp_specialize to return a tuple, and cannot call gl.num_warps() inside a constexpr layout expression.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

LOADER_WARPS = gl.constexpr(1)
LOADER_REGS = gl.constexpr(24)  # the loader only computes coordinates: give its registers to the MMA warps


@gluon.jit
def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles):
    # the tile shapes and the ring depth are read off the shared-memory buffers
    BK: gl.constexpr = a_bufs.shape[2]
    STAGES: gl.constexpr = a_bufs.shape[0]
    for k in range(k_tiles):
        s = k % STAGES
        # a fresh barrier counts as "phase 1 completed": the first pass over the ring does not wait
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        _tma_load(a_desc, [off_m, k * BK], ready.index(s), a_bufs.index(s))
        _tma_load(b_desc, [k * BK, off_n], ready.index(s), b_bufs.index(s))


@gluon.jit
def _mma(a_bufs, b_bufs, ready, empty, k_tiles, acc):
    STAGES: gl.constexpr = a_bufs.shape[0]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(ready.index(s), (k // STAGES) & 1)
        a, b = a_bufs.index(s), b_bufs.index(s)
        acc = warpgroup_mma(a, b, acc, is_async=True)
        # at most one wgmma in flight: the one of step k-1 is done, so its buffers can be refilled
        acc, a, b = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a, b))
        if k > 0:
            mbarrier.arrive(empty.index((k - 1) % STAGES), count=1)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    return (acc,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


@gluon.jit
def matmul_ws_kernel(a_desc, b_desc, c_desc, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                     STAGES: gl.constexpr, MMA_WARPS: gl.constexpr):
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    k_tiles = gl.cdiv(K, BK)
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    # the wgmma accumulator layout: the default partition's warps (num_warps) stacked along M, instruction m64 x BN x k16
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[MMA_WARPS, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma_layout)
    mma_args = (a_bufs, b_bufs, ready, empty, k_tiles, acc)
    load_args = (a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles)
    # the default partition (the MMA warps of this program) first, then the workers with their warp and register counts
    acc = gl.warp_specialize([(_mma, mma_args), (_loader, load_args)], [LOADER_WARPS], [LOADER_REGS])[0]
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    c_smem = gl.allocate_shared_memory(dtype, [BM, BN], c_desc.layout)
    c_smem.store(acc.to(dtype))
    fence_async_shared()
    _tma_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


DEFAULT_CONFIG = {"BM": 128, "BN": 128, "BK": 64, "STAGES": 4, "num_warps": 4}
_launch = Launcher(matmul_ws_kernel)  # repeated calls: Triton's C launch, each CUtensorMap built once
# (A, B, C addresses, M, N, K, dtype, device, config) -> plan: a call with the same three buffers as an earlier
# one (a loop over the same inputs, C landing where the caching allocator put the last one) skips the descriptors
_PLANS = Plans()


_GL_DTYPE = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


def _layout(block, dtype):
    return _layout_of(tuple(block), dtype)


@functools.lru_cache(maxsize=None)
def _layout_of(block: tuple, dtype):
    # NVMMASharedLayout.get_default_for takes 16 us a call on the laptop (the swizzle is worked out in Python);
    # the layout is a frozen dataclass, so one object per (block, dtype) serves every descriptor
    return gl.NVMMASharedLayout.get_default_for(list(block), {**_GL_DTYPE, torch.float32: gl.float32}[dtype])


def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, BM: int, BN: int, BK: int):
    """Host-side Gluon descriptors for A (BM x BK tiles), B (BK x BN) and C (BM x BN): the shared-memory
    layout (NVMMA, with its swizzle) is part of the descriptor's type, so kernel and host agree on it."""
    return (TensorDescriptor.from_tensor(a, [BM, BK], _layout([BM, BK], a.dtype)),
            TensorDescriptor.from_tensor(b, [BK, BN], _layout([BK, BN], b.dtype)),
            TensorDescriptor.from_tensor(c, [BM, BN], _layout([BM, BN], c.dtype)))


def matmul(a: torch.Tensor, b: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """``a @ b`` for 2-D fp16/bf16 CUDA tensors with 16-byte aligned rows (Hopper only)."""
    cfg = {**DEFAULT_CONFIG, **(config or {})}
    if not is_hopper(a):
        raise RuntimeError("the Gluon matmul is written for Hopper (sm_90): wgmma and TMA")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"fp16 or bf16 inputs of one dtype, got {a.dtype} and {b.dtype}")
    return launch_matmul(a.contiguous(), b.contiguous(), cfg)


def launch_matmul(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    """:func:`matmul` without its checks, for a caller that has made them (``tcourse.kernels.matmul`` at 1024^3,
    where host time is as long as the GPU's): ``a`` and ``b`` contiguous, fp16 or bf16 of one dtype, on a Hopper
    GPU, ``cfg`` a whole config (every key of ``DEFAULT_CONFIG``)."""
    (M, K), N = a.shape, b.shape[1]
    c = a.new_empty((M, N))
    pkey = (a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, a.dtype, current_device(), *cfg.values())
    plan = _PLANS.get(pkey)
    if plan is not None and plan():
        return c
    a_d, b_d, c_d = descriptors(a, b, c, cfg["BM"], cfg["BN"], cfg["BK"])
    grid = (cdiv(M, cfg["BM"]), cdiv(N, cfg["BN"]))
    args, meta = (a_d, b_d, c_d, K), {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "STAGES": cfg["STAGES"],
                                      "MMA_WARPS": cfg["num_warps"], "num_warps": cfg["num_warps"]}
    _launch(grid, args, meta)
    _PLANS.add(pkey, plan_of(_launch, grid, args, meta))
    return c


def descriptor_type(block: list[int], dtype: torch.dtype) -> str:
    """The type string a launch gives a Gluon descriptor argument (Triton 3.6 and 3.9 parse the same form):
    element type, block shape and the shared-memory layout."""
    name = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]
    return f"tensordesc<{name}[{','.join(map(str, block))}],{_layout(block, dtype)!r}>"


def compile_sm90(K: int = 4096, dtype: torch.dtype = torch.float16, config: dict | None = None):
    """Compile the kernel for sm_90 without a GPU (for a K-long reduction): returns
    ``tcourse.compile_info.CompileReport`` (TTGIR with the explicit layouts, PTX, SASS, resources)."""
    from ..compile_info import compile_for_sm90

    cfg = {**DEFAULT_CONFIG, **(config or {})}
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    descs = (descriptor_type([bm, bk], dtype), descriptor_type([bk, bn], dtype), descriptor_type([bm, bn], dtype))
    return compile_for_sm90(matmul_ws_kernel, *descs, K, num_warps=cfg["num_warps"], num_stages=1, BM=bm, BN=bn,
                            BK=bk, STAGES=cfg["STAGES"], MMA_WARPS=cfg["num_warps"])
