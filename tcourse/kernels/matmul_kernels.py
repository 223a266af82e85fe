"""C = A @ B for 2-D fp16/bf16/fp32 tensors, fp32 accumulation.

Two kernels here, and a third that ``matmul`` dispatches to:

- ``matmul_blocked_kernel``: the portable one (any GPU, and the CPU interpreter). One program per
  BM x BN tile of C, tiles visited in groups of GROUP_M rows so neighbouring programs share tiles of
  A and B in L2; masks only along K (rows/cols past the edge wrap around and are never stored).
- ``matmul_tma_persistent_kernel``: Hopper (sm_90). One program per SM loops over tiles; A and B tiles
  arrive through tensor descriptors (the TMA copy engine writes shared memory directly, no address
  arithmetic in registers), so the next tile's loads overlap the current tile's epilogue.
- at 1024^3 on Hopper, the warp-specialised Gluon kernel of chapter 9 (``gluon_matmul``).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import Tuned, cdiv, check_2d, gluon_module, is_hopper, num_sms, on_gpu

try:  # host-side tensor descriptors (triton >= 3.3)
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton: portable kernel only
    TensorDescriptor = None


@triton.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """Tile index -> (row block, col block), walking GROUP_M row blocks column by column."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows_here = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows_here
    pid_n = (tile % per_group) // rows_here
    return pid_m, pid_n


@triton.jit
def matmul_blocked_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, PRECISION: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # Wrap out-of-range rows/cols to valid ones: loads need no M/N mask, the store masks them.
    ram = tl.max_contiguous(tl.multiple_of(rm % M, BM), BM)
    rbn = tl.max_contiguous(tl.multiple_of(rn % N, BN), BN)
    a_ptrs = a_ptr + ram[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rbn[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def matmul_tma_persistent_kernel(a_desc, b_desc, c, M, N, K, stride_cm, BM: tl.constexpr, BN: tl.constexpr,
                                 BK: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                                 C_DESC: tl.constexpr, SPLIT_EPILOGUE: tl.constexpr, FLATTEN: tl.constexpr):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    dtype = a_desc.dtype
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=FLATTEN):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kt in range(k_tiles):
            a = a_desc.load([off_m, kt * BK])  # TMA zero-fills past the edges of A and B
            b = b_desc.load([kt * BK, off_n])
            acc = tl.dot(a, b, acc)
        if C_DESC:
            if SPLIT_EPILOGUE:  # store two BM x BN/2 halves: half the shared-memory staging buffer
                halves = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
                c0, c1 = tl.split(halves)
                c.store([off_m, off_n], c0.to(dtype))
                c.store([off_m, off_n + BN // 2], c1.to(dtype))
            else:
                c.store([off_m, off_n], acc.to(dtype))
        else:  # C's row stride is not 16-byte aligned (odd N): plain masked stores
            rm = off_m + tl.arange(0, BM)
            rn = off_n + tl.arange(0, BN)
            tl.store(c + rm[:, None].to(tl.int64) * stride_cm + rn[None, :], acc.to(dtype),
                     mask=(rm[:, None] < M) & (rn[None, :] < N))


def _blocked_configs():
    cfg = [(128, 256, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 64, 4, 8), (64, 128, 64, 4, 4),
           (64, 128, 128, 3, 4), (64, 128, 128, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 5, 4)]
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for bm, bn, bk, s, w in cfg]


def _set_desc_blocks(nargs):
    bm, bn, bk = nargs["BM"], nargs["BN"], nargs["BK"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    if nargs["C_DESC"]:
        nargs["c"].block_shape = [bm, bn // 2] if nargs["SPLIT_EPILOGUE"] else [bm, bn]


# (BM, BN, BK, stages, warps, split epilogue). Shared memory per stage: (BM + BN) * BK * 2 bytes.
TMA_CONFIGS = [(128, 256, 64, 3, 8, False), (128, 256, 64, 4, 8, True), (256, 128, 64, 3, 8, False),
               (128, 128, 64, 4, 8, False), (128, 128, 64, 5, 4, False), (128, 128, 128, 3, 8, False),
               (64, 128, 64, 5, 4, False), (64, 256, 64, 4, 4, True)]


def _tma_configs():
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "SPLIT_EPILOGUE": sp, "FLATTEN": True},
                          num_stages=s, num_warps=w, pre_hook=_set_desc_blocks)
            for bm, bn, bk, s, w, sp in TMA_CONFIGS]


def _prune_tma(configs, named_args, **kwargs):
    # SPLIT_EPILOGUE only matters when C goes through a descriptor
    c_desc = kwargs.get("C_DESC", named_args.get("C_DESC"))
    return [c for c in configs if c_desc or not c.kwargs["SPLIT_EPILOGUE"]] or configs[:1]


matmul_blocked_tuned = Tuned("matmul_blocked", matmul_blocked_kernel, _blocked_configs(), key=["M", "N", "K"])
matmul_tma_tuned = Tuned("matmul_tma", matmul_tma_persistent_kernel, _tma_configs(), key=["M", "N", "K", "C_DESC"], prune=_prune_tma)

_PRECISION = {torch.float32: "ieee", torch.float16: "tf32", torch.bfloat16: "tf32"}


def _check(a, b):
    check_2d("matmul", a)
    check_2d("matmul", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: {tuple(a.shape)} @ {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in _PRECISION:
        raise TypeError(f"matmul takes two fp16, bf16 or fp32 tensors, got {a.dtype} and {b.dtype}")


def _output(a, b) -> tuple[torch.Tensor, bool]:
    """The output C and whether a kernel must still run (empty C, or K == 0 which gives zeros, needs none)."""
    M, K = a.shape
    c = a.new_empty((M, b.shape[1]))  # new_empty: less host time than torch.empty(shape, dtype=, device=)
    if K == 0:
        c.zero_()
    return c, c.numel() > 0 and K > 0


def matmul_blocked(a: torch.Tensor, b: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """Portable kernel. ``config`` (BM, BN, BK, GROUP_M, num_warps, num_stages) skips autotuning."""
    _check(a, b)
    return _blocked(a, b, config)


def _blocked(a, b, config):
    c, work = _output(a, b)
    if not work:
        return c
    (M, K), N = a.shape, b.shape[1]
    sa, sb = a.stride(), b.stride()
    args = (a, b, c, M, N, K, sa[0], sa[1], sb[0], sb[1], N, 1)  # c is a fresh contiguous (M, N) tensor
    grid = lambda m: (cdiv(M, m["BM"]) * cdiv(N, m["BN"]),)  # noqa: E731
    if config is None and on_gpu(a):
        matmul_blocked_tuned.launch((M, N, K, a.dtype, sa, sb), grid, *args, PRECISION=_PRECISION[a.dtype])
    else:
        config = config or {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 4}
        matmul_blocked_kernel[grid(config)](*args, PRECISION=_PRECISION[a.dtype], **config)
    return c


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself if TMA can read it (row-major, 16-byte aligned base and row stride), else a copy
    into a buffer whose row stride is padded to 16 bytes (the padding is never read: the descriptor
    keeps the true shape)."""
    align = 16 // t.element_size()
    if t.stride(1) == 1 and t.stride(0) % align == 0 and t.data_ptr() % 16 == 0:
        return t
    rows, cols = t.shape
    padded = torch.empty((rows, cdiv(cols, align) * align), dtype=t.dtype, device=t.device)
    view = padded[:, :cols]
    view.copy_(t)
    return view


def tma_available(a: torch.Tensor) -> bool:
    return TensorDescriptor is not None and is_hopper(a) and a.dtype in (torch.float16, torch.bfloat16)


def matmul_tma(a: torch.Tensor, b: torch.Tensor, config: dict | None = None) -> torch.Tensor:
    """Hopper persistent TMA kernel (fp16/bf16). ``config`` (BM, BN, BK, GROUP_M, SPLIT_EPILOGUE,
    FLATTEN, num_warps, num_stages) skips autotuning."""
    _check(a, b)
    if not tma_available(a):
        raise RuntimeError("the TMA kernel needs a Hopper GPU, fp16/bf16 inputs and triton's TensorDescriptor")
    return _tma(a, b, config)


def _tma(a, b, config):
    c, work = _output(a, b)
    if not work:
        return c
    (M, K), N = a.shape, b.shape[1]
    a, b = _tma_ready(a), _tma_ready(b)
    dummy = [16, 16]  # the real block shapes are set per config (pre-hook)
    a_desc = TensorDescriptor(a, [M, K], [a.stride(0), 1], dummy)
    b_desc = TensorDescriptor(b, [K, N], [b.stride(0), 1], dummy)
    c_desc = c.stride(0) * c.element_size() % 16 == 0
    c_arg = TensorDescriptor(c, [M, N], [c.stride(0), 1], dummy) if c_desc else c
    sms = num_sms(a)
    grid = lambda m: (min(sms, cdiv(M, m["BM"]) * cdiv(N, m["BN"])),)  # noqa: E731
    args = (a_desc, b_desc, c_arg, M, N, K, c.stride(0))
    if config is None:
        descs = {"a_desc": a_desc, "b_desc": b_desc, "c": c_arg}
        matmul_tma_tuned.launch((M, N, K, a.dtype, c_desc, sms), grid, *args, NUM_PROGRAMS=sms, C_DESC=c_desc,
                                before=lambda meta: _set_desc_blocks({**descs, **meta}))
    else:
        config = dict(config)
        _set_desc_blocks({"a_desc": a_desc, "b_desc": b_desc, "c": c_arg, "C_DESC": c_desc, **config})
        matmul_tma_persistent_kernel[grid(config)](*args, NUM_PROGRAMS=sms, C_DESC=c_desc, **config)
    return c


# Above 1024^3: the TMA kernel. At 1024^3 the blocked kernel is the steady one: 0.80-0.84x torch in three
# H200 runs, while the TMA kernel gave 0.92-0.98x on two machines but 0.54-0.60x (fp16) on two others,
# whose host was slower (bare launch 14.7 us vs 10.9 us): its ~36-46 us of host work per call (tensor
# descriptors) then no longer hides under the L2-clearing memset that do_bench issues before each call.
TMA_MIN_MNK = 2**30 + 1


# 1024^3 on Hopper: the warp-specialised Gluon kernel (chapter 9) with 64x128 tiles, K steps of 64 and 8 stages,
# in one wave (128 tiles on 132 SMs): 0.95-0.97x cuBLAS against 0.91-0.94x for the blocked kernel's pinned
# config (results/h200/issue18/mm1024.json and gmmhost.json, 5 rounds; ncu: cuBLAS runs 128x64 tiles, 8 stages, in
# 7.0 us, the blocked kernel 7.8 us). Its host path is a launch plan per (A, B, C) addresses (gluon_matmul._PLANS):
# 9.9 us a call against torch's 8.4 and 25.2 us building the three descriptors each call (gmmhost.json); without
# it, a suite run read bf16 at 0.18x by do_bench (issue18/bench_suite_run9.json). Slower at 1024^3 (mm1024b.json,
# GPU time): C stored straight from the accumulator's registers 0.90x, K steps of 32 with 16 stages 0.85x, against
# 0.96x. Measured at 1024^3 only: the band is the one-wave problems down to half of it.
GLUON_CONFIG = {"BM": 64, "BN": 128, "BK": 64, "STAGES": 8, "num_warps": 4}
GLUON_MNK = (2**29, 2**30)


def _gluon_matmul(a: torch.Tensor, b: torch.Tensor):
    """``gluon_matmul`` where it is the measured choice for ``a @ b``, else None (Triton without Gluon included)."""
    (M, K), N = a.shape, b.shape[1]
    if not (tma_available(a) and GLUON_MNK[0] < M * N * K <= GLUON_MNK[1] and a.is_contiguous() and b.is_contiguous()
            and K * a.element_size() % 16 == 0 and N * a.element_size() % 16 == 0  # TMA: 16-byte rows and bases
            and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0):
        return None
    gluon = gluon_module("gluon_matmul")
    one_wave = gluon is not None and cdiv(M, GLUON_CONFIG["BM"]) * cdiv(N, GLUON_CONFIG["BN"]) <= num_sms(a)
    return gluon if one_wave else None


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b``: on Hopper for fp16/bf16 the Gluon kernel at 1024^3 (``GLUON_MNK``) and the persistent TMA
    kernel above; the blocked kernel otherwise."""
    _check(a, b)
    if tma_available(a) and a.shape[0] * a.shape[1] * b.shape[1] >= TMA_MIN_MNK:
        return _tma(a, b, None)
    gluon = _gluon_matmul(a, b)
    if gluon is not None:  # _check and _gluon_matmul made gluon_matmul.matmul's checks
        return gluon.launch_matmul(a, b, GLUON_CONFIG)
    return _blocked(a, b, None)
