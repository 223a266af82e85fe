"""AXPY: out = a * x + y. Memory-bound: 12 bytes per fp32 element, no reuse."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import INTERPRETED, Launcher, Plans, Tuned, cdiv, current_device


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr, EVICT: tl.constexpr = ""):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # EVICT: a cache hint for the loads. On the H200 evict_first is 2-5 % slower than none from 2^24 elements up
    # and evict_last 1.1 % faster (results/h200/issue18/axpyv.json, hints2.json); the autotuner picks per size.
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy=EVICT)
    y = tl.load(y_ptr + offs, mask=mask, eviction_policy=EVICT)
    tl.store(out_ptr + offs, a * x + y, mask=mask)


# Block sizes from 1K to 8K land within a few percent of each other at 2^27 on the H200 (bench/).
GPU_CONFIGS = [triton.Config({"BLOCK": b, "EVICT": e}, num_warps=w) for b, w, e in
               [(1024, 4, ""), (1024, 4, "evict_first"), (1024, 4, "evict_last"), (2048, 4, ""),
                (2048, 8, "evict_first"), (2048, 4, "evict_last"), (4096, 4, ""), (4096, 8, ""), (8192, 8, "")]]
axpy_tuned = Tuned("axpy", axpy_kernel, GPU_CONFIGS, key=["n"])
axpy_launch = Launcher(axpy_kernel)
CPU_BLOCK = 1024


_PLANS = Plans()  # (n, dtype, device, x/y/out 16-byte aligned) -> plan of the launch taking (x, y, out, a)


def axpy(a, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``a * x + y`` for same-shape, same-dtype tensors; ``a`` is a Python number or 0-d tensor."""
    if x.shape != y.shape or x.dtype != y.dtype or x.get_device() != y.get_device():
        raise ValueError(f"x and y must match: {tuple(x.shape)} {x.dtype} {x.device} vs "
                         f"{tuple(y.shape)} {y.dtype} {y.device}")
    if a.__class__ is not float:
        a = float(a.item()) if isinstance(a, torch.Tensor) else float(a)
    xc, yc = x.contiguous(), y.contiguous()
    out = torch.empty_like(xc)
    n = out.numel()
    gpu = xc.is_cuda and not INTERPRETED
    if gpu:  # a size launched before (so 0 < n < 2**31) has a plan: only the pointers and `a` change
        xp, yp, op = xc.data_ptr(), yc.data_ptr(), out.data_ptr()
        pkey = (n, xc.dtype, current_device(), not xp & 15, not yp & 15, not op & 15)
        plan = _PLANS.get(pkey)
        if plan is not None and plan(xp, yp, op, a):
            return out
    if n >= 2**31:
        raise ValueError("axpy indexes with int32: at most 2**31 - 1 elements")
    if n == 0:
        return out
    if gpu:
        key, grid = (n, xc.dtype), lambda m: (cdiv(n, m["BLOCK"]),)
        axpy_tuned.launch(key, grid, xc, yc, out, a, n)
        _PLANS.add(pkey, axpy_tuned.plan(key, grid, xc, yc, out, a, n, n_lead=4))
    else:
        axpy_launch((cdiv(n, CPU_BLOCK),), (xc, yc, out, a, n), {"BLOCK": CPU_BLOCK})
    return out
