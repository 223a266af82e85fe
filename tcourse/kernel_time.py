"""Per-call kernel time read from the profiler (CUPTI): what the GPU spends inside the kernels of one call.

do_bench and :func:`tcourse.bench.gpu_samples` time a call between two CUDA events, so each sample also holds the
GPU's work around the kernel: processing the events and the launch. On the H200 that is about 3 µs a call
(``results/h200/issue18/mm1024u.json``: a 1024^3 matmul reads 9.5 µs by do_bench and 6.5 µs by its kernel's own
duration, cuBLAS's 9.3 and 6.1), the same for both sides of a comparison, so for kernels of a few microseconds
it pulls the ratio towards 1. Here each call is preceded by a kernel of our own that clears L2 (as do_bench's
memset does) and also marks where the call begins in the trace; a call's sample is the summed duration of the
kernels, memsets and copies it ran, gaps between them not counted.
"""
from __future__ import annotations

import triton
import triton.language as tl

FLUSH_BLOCK = 8192


@triton.jit
def flush_l2_marker_kernel(buf_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(buf_ptr + offs, tl.zeros([BLOCK], tl.int32), mask=offs < n)


MARKER = "flush_l2_marker_kernel"


def per_call_ms(events) -> list[float]:
    """``events``: (name, start_us, end_us) of every GPU activity in a trace. Each marker kernel opens a call;
    a call's time is the sum of its activities' durations, in ms. Activities before the first marker and calls
    with nothing in them are dropped."""
    calls: list[float] = []
    for name, start, end in sorted(events, key=lambda e: e[1]):
        if MARKER in name:
            calls.append(0.0)
        elif calls:
            calls[-1] += (end - start) * 1e-3
    return [c for c in calls if c > 0]


def kernel_samples(fn, *, calls: int = 100, warmup: int = 3) -> list[float]:
    """Milliseconds of kernel time per call of ``fn`` (see the module docstring), ``calls`` samples."""
    from tcourse.bench import _require_gpu, flush_buffer

    _require_gpu()
    import torch
    from torch.profiler import ProfilerActivity, profile

    buf = flush_buffer()
    grid = (triton.cdiv(buf.numel(), FLUSH_BLOCK),)
    for _ in range(warmup):
        flush_l2_marker_kernel[grid](buf, buf.numel(), BLOCK=FLUSH_BLOCK)
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush_l2_marker_kernel[grid](buf, buf.numel(), BLOCK=FLUSH_BLOCK)
            fn()
        torch.cuda.synchronize()
    events = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type.name == "CUDA"]
    samples = per_call_ms(events)
    if len(samples) < calls // 2:
        raise RuntimeError(f"the profiler saw {len(samples)} of {calls} calls (activities: {len(events)})")
    return samples
