"""Host (Python) microseconds per call of each reference kernel and of torch's counterpart.

Measured without synchronising: batches of calls are issued back to back and timed on the host; the
GPU only runs behind. When this time exceeds a kernel's GPU time, the GPU idles between launches, and
a do_bench measurement (which clears L2 with a ~256 MB memset before each call) includes whatever
part of the host time that memset does not cover.

    python -m bench.host                          # JSON: per kernel {"ours": us, "torch": us}
    python -m bench.host --kernels PACKAGE        # another copy of tcourse.kernels (before/after)
    python -m bench.host --profile softmax        # cProfile of our calls, top functions by own time
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time


def host_us(fn, calls: int = 100, batches: int = 10) -> float:
    """Fewest host microseconds per call over ``batches`` batches of ``calls`` unsynchronised calls
    (a batch is short enough that the launch queue never fills, so the GPU cannot slow the host)."""
    import torch

    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
        torch.cuda.synchronize()
    return best * 1e6


def pairs(K) -> dict:
    """Per kernel: (ours, torch's), at the sizes where launch cost matters (GPU time ~10-50 us)."""
    import torch
    import torch.nn.functional as F

    dev = "cuda"
    v = torch.randn(2**20, device=dev)
    x = torch.randn(4096, 1024, device=dev)
    a = torch.randn(1024, 1024, device=dev, dtype=torch.float16)
    ln_w, ln_b = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    t = torch.randn(1024, 1024, device=dev)
    q, k, w = (torch.randn(1, 8, 256, 64, device=dev, dtype=torch.float16) for _ in range(3))
    found = {
        "axpy 2^20": (lambda: K.axpy(2.0, v, v), lambda: torch.add(v, v, alpha=2.0)),
        "softmax 4096x1024": (lambda: K.softmax(x), lambda: torch.softmax(x, -1)),
        "matmul fp16 1024^3": (lambda: K.matmul(a, a), lambda: torch.matmul(a, a)),
        "layernorm 4096x1024": (lambda: K.layernorm(x, ln_w, ln_b), lambda: F.layer_norm(x, (1024,), ln_w, ln_b)),
        "transpose 1024x1024": (lambda: K.transpose(t), lambda: t.T.contiguous()),
        "attention B1 H8 S256 D64": (lambda: K.attention(q, k, w),
                                     lambda: F.scaled_dot_product_attention(q, k, w)),
    }
    mm = K.matmul_kernels
    found["matmul_blocked fp16 1024^3"] = (lambda: mm.matmul_blocked(a, a), lambda: torch.matmul(a, a))
    return found


def bare_triton_us() -> float:
    """One plain ``kernel[grid](...)`` launch of a trivial kernel: the floor our wrappers add to."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    x = torch.randn(2**20, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    return host_us(lambda: _copy[grid](x, out, x.numel(), BLOCK=1024))


def measure(K=None, names: list[str] | None = None) -> dict:
    """``{"triton kernel[grid] (bare)": us, name: {"ours": us, "torch": us}, ...}``."""
    if K is None:
        import tcourse.kernels as K
    out: dict = {"triton kernel[grid] (bare)": bare_triton_us()}
    for name, (ours, theirs) in pairs(K).items():
        if names and not any(n in name for n in names):
            continue
        out[name] = {"ours": host_us(ours), "torch": host_us(theirs)}
    return out


def profile(K, name: str, calls: int = 2000) -> str:
    import cProfile
    import io
    import pstats

    import torch

    ours = next(fns[0] for n, fns in pairs(K).items() if name in n)
    ours()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        ours()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(15)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.host", description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", default="tcourse.kernels", help="package with the reference kernels")
    ap.add_argument("--only", help="comma-separated substrings of kernel names")
    ap.add_argument("--profile", help="print a cProfile of our calls for the kernel whose name contains this")
    args = ap.parse_args(argv)
    from tcourse.bench import refuse_reason

    why = refuse_reason()
    if why:
        print(f"python -m bench.host refuses to run: {why.split('. Showing')[0]}.", file=sys.stderr)
        return 2
    import tcourse

    tcourse.setup(quiet=True)
    K = importlib.import_module(args.kernels)
    print(json.dumps(measure(K, args.only.split(",") if args.only else None), indent=1))
    if args.profile:
        print(profile(K, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
