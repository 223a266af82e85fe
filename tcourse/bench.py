"""Honest GPU timing: do_bench medians with p20/p80, ours beside torch in the same run.

On CPU (or with the interpreter on) every function here raises :class:`NeedsGPU` instead of
returning a number: interpreter timings measure Python, not a GPU.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass

from .numbers import comparison_text


class NeedsGPU(RuntimeError):
    """Raised instead of timing on a machine without a GPU or with TRITON_INTERPRET=1."""


def refuse_reason() -> str | None:
    """Why timing is impossible here, or None when it is allowed."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return ("TRITON_INTERPRET=1: the interpreter runs kernels as numpy on the CPU; its time says "
                "nothing about a GPU (one public issue reports 0.03 GB/s). Showing recorded numbers instead.")
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU: nothing to time. Showing recorded numbers instead."
    return None


def _require_gpu():
    why = refuse_reason()
    if why:
        raise NeedsGPU(why)


@dataclass
class Timing:
    """Milliseconds per call: median and the 20th/80th percentiles over all repeats."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int

    @classmethod
    def from_samples(cls, samples_ms: list[float]) -> "Timing":
        s = sorted(samples_ms)
        q = statistics.quantiles(s, n=10, method="inclusive") if len(s) > 1 else [s[0]] * 9
        return cls(statistics.median(s), q[1], q[7], len(s))

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: how far to trust a difference between two kernels."""
        return (self.p80_ms - self.p20_ms) / self.median_ms


def _samples(fn, warmup_ms: int, rep_ms: int) -> list[float]:
    import triton.testing

    return list(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all"))


_FLUSH: dict = {}
FLUSH_WORDS = 2**26  # 256 MB of int32, the size do_bench clears


def flush_buffer():
    """The 256 MB int32 CUDA buffer that clears L2 before each timed call, allocated once per process."""
    if "buf" not in _FLUSH:
        import torch

        _FLUSH["buf"] = torch.empty(FLUSH_WORDS, dtype=torch.int32, device="cuda")
    return _FLUSH["buf"]


QUEUE_CHUNK = 32  # calls enqueued behind one GPU sleep (4 queue entries each: well below CUDA's queue depth)


def gpu_samples(fn, *, warmup_ms: int = 25, rep_ms: int = 100, flush: str = "zero") -> list[float]:
    """Milliseconds of GPU time per call, with L2 cleared before each call and no host time in it.

    do_bench records an event, calls ``fn``, records another: when ``fn`` spends more host time than
    the L2-clearing memset before it takes on the GPU, the GPU idles inside the timed interval and the
    host's launch cost is counted as kernel time. Here a GPU sleep is queued first and the calls are
    enqueued behind it, so the GPU runs them back to back: no host time in the samples. The GPU's own work
    between the two events (processing them, starting the kernel) is still in each sample, about 3 µs on the
    H200; :mod:`tcourse.kernel_time` reads the kernels' durations without it.
    ``flush="zero"`` clears L2 the way do_bench does (a 256 MB memset, which leaves dirty lines that
    the timed kernel must write back); ``flush="read"`` reads 256 MB instead (clean lines).
    """
    if flush not in ("zero", "read"):
        raise ValueError(f"flush must be 'zero' or 'read', not {flush!r}")
    _require_gpu()
    import time

    import torch

    buf = flush_buffer()
    clear = buf.zero_ if flush == "zero" else (lambda: buf.max())

    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(5):
        clear()
        fn()
    end.record()
    host_s = (time.perf_counter() - t0) / 5
    torch.cuda.synchronize()
    per_call_ms = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup_ms / per_call_ms))
    n = max(5, int(rep_ms / per_call_ms))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    sleep_cycles = int(4 * host_s * QUEUE_CHUNK * 2e9)  # twice the host time of a chunk at up to 2 GHz
    for _ in range(n_warmup):
        clear()
        fn()
    for i0 in range(0, n, QUEUE_CHUNK):
        torch.cuda._sleep(sleep_cycles)
        for s, e in events[i0:i0 + QUEUE_CHUNK]:
            clear()
            s.record()
            fn()
            e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in events]


def time_fn(fn, *, warmup_ms: int = 25, rep_ms: int = 100) -> Timing:
    """One kernel alone (do_bench: warm-up, L2 cleared before each call, median of repeats)."""
    _require_gpu()
    return Timing.from_samples(_samples(fn, warmup_ms, rep_ms))


@dataclass
class Comparison:
    ours: Timing
    torch: Timing
    nbytes: int | None = None
    flops: int | None = None
    ceiling: float | None = None  # GB/s or TFLOP/s of the device, same unit as .rate()

    @property
    def speedup(self) -> float:
        """torch time / our time: above 1 means our kernel is faster."""
        return self.torch.median_ms / self.ours.median_ms

    def rate(self, t: Timing) -> float | None:
        if self.nbytes is not None:
            return self.nbytes / (t.median_ms * 1e-3) / 1e9  # GB/s
        if self.flops is not None:
            return self.flops / (t.median_ms * 1e-3) / 1e12  # TFLOP/s
        return None

    @property
    def unit(self) -> str:
        return "GB/s" if self.nbytes is not None else "TFLOP/s" if self.flops is not None else "ms"

    def as_dict(self) -> dict:
        d = {"ours": asdict(self.ours), "torch": asdict(self.torch), "speedup": self.speedup, "unit": self.unit}
        if self.unit != "ms":
            d["ours_rate"], d["torch_rate"] = self.rate(self.ours), self.rate(self.torch)
            if self.ceiling:
                d["ours_of_ceiling"] = d["ours_rate"] / self.ceiling
        return d

    def __str__(self) -> str:
        def one(name, t):
            r = self.rate(t)
            rate = f"{r:8.1f} {self.unit}" if r is not None else ""
            frac = f"  {r / self.ceiling:5.1%} of ceiling" if (r is not None and self.ceiling) else ""
            return (f"{name:<7}{t.median_ms * 1e3:9.1f} us  [p20 {t.p20_ms * 1e3:.1f}, p80 {t.p80_ms * 1e3:.1f}]"
                    f"  {rate}{frac}")

        return "\n".join([one("triton", self.ours), one("torch", self.torch),
                          f"speedup vs torch: {comparison_text(self.as_dict())} (torch time / triton time)"])


def compare(ours, ref, *, nbytes: int | None = None, flops: int | None = None, ceiling: float | None = None,
            rounds: int = 3, warmup_ms: int = 25, rep_ms: int = 100, timer: str = "do_bench") -> Comparison:
    """Time ``ours`` and ``ref`` interleaved (ours, ref, ours, ref, ...) in one process.

    Clocks drift on a power-capped GPU (the H200 drops from 1980 to ~1300 MHz under sustained
    matmul), so both kernels see the same conditions; all repeats are pooled into median/p20/p80.
    ``timer="gpu_time"`` uses :func:`gpu_samples` (the same L2 clearing, no host time counted);
    ``timer="gpu_time_clean_l2"`` does too, emptying L2 by a read instead (``flush="read"``);
    ``timer="kernel"`` reads the kernels' own durations from the profiler (:mod:`tcourse.kernel_time`: no
    event or launch time either).
    """
    _require_gpu()
    samples = {"do_bench": _samples,
               "gpu_time": lambda fn, w, r: gpu_samples(fn, warmup_ms=w, rep_ms=r),
               "gpu_time_clean_l2": lambda fn, w, r: gpu_samples(fn, warmup_ms=w, rep_ms=r, flush="read"),
               "kernel": lambda fn, w, r: _kernel_samples(fn)}[timer]
    a, b = [], []
    for _ in range(rounds):
        a += samples(ours, warmup_ms, rep_ms)
        b += samples(ref, warmup_ms, rep_ms)
    return Comparison(Timing.from_samples(a), Timing.from_samples(b), nbytes, flops, ceiling)


def _kernel_samples(fn) -> list[float]:
    from tcourse.kernel_time import kernel_samples  # imported when this timer is used: it defines a Triton kernel

    return kernel_samples(fn)


_CEILING: dict[str, float] = {}


def hbm_ceiling_gbs() -> float:
    """Measured device-memory bandwidth (GB/s): a 1 GiB device-to-device copy, read + write bytes."""
    _require_gpu()
    if "hbm" not in _CEILING:
        import torch

        src = torch.empty(2**28, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        t = time_fn(lambda: dst.copy_(src))
        _CEILING["hbm"] = 2 * src.numel() * 4 / (t.median_ms * 1e-3) / 1e9
        del src, dst
    return _CEILING["hbm"]


def memory_ceilings() -> dict:
    """The HBM ceiling a memory-bound kernel is compared with, and the two measurements behind it (GB/s).

    A copy moves as many bytes each way; a kernel that mostly reads (AXPY reads two bytes for each one
    it writes) can beat it, because the memory spends less time turning between reads and writes.
    So the ceiling is the best of a 1 GiB copy and a 1 GiB read-only reduction (``torch.sum``), both
    timed on the GPU alone with L2 emptied by a read (``gpu_samples(flush="read")``: no dirty lines
    left to write back, no host time). A kernel timed with do_bench, whose memset leaves dirty L2
    lines behind, should land at or below it.
    """
    _require_gpu()
    if "memory" not in _CEILING:
        import torch

        src = torch.empty(2**28, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        nbytes = src.numel() * 4
        copy = Timing.from_samples(gpu_samples(lambda: dst.copy_(src), flush="read"))
        read = Timing.from_samples(gpu_samples(lambda: src.sum(), flush="read"))
        del src, dst
        rates = {"copy_gbs": 2 * nbytes / (copy.median_ms * 1e-3) / 1e9,
                 "read_gbs": nbytes / (read.median_ms * 1e-3) / 1e9}
        _CEILING["memory"] = {**rates, "ceiling_gbs": max(rates.values())}
    return dict(_CEILING["memory"])


def memory_ceiling_gbs() -> float:
    """``memory_ceilings()["ceiling_gbs"]``: best of copy and read-only reduction, L2 emptied, GPU time."""
    return memory_ceilings()["ceiling_gbs"]
