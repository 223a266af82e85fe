"""Honest GPU timing: do_bench medians with p20/p80, ours beside torch in the same run.

On CPU (or with the interpreter on) every function here raises :class:`NeedsGPU` instead of
returning a number: interpreter timings measure Python, not a GPU.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass


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
                          f"speedup vs torch: {self.speedup:.2f}x (torch time / triton time)"])


def compare(ours, ref, *, nbytes: int | None = None, flops: int | None = None, ceiling: float | None = None,
            rounds: int = 3, warmup_ms: int = 25, rep_ms: int = 100) -> Comparison:
    """Time ``ours`` and ``ref`` interleaved (ours, ref, ours, ref, ...) in one process.

    Clocks drift on a power-capped GPU (the H200 drops from 1980 to ~1300 MHz under sustained
    matmul), so both kernels see the same conditions; all repeats are pooled into median/p20/p80.
    """
    _require_gpu()
    a, b = [], []
    for _ in range(rounds):
        a += _samples(ours, warmup_ms, rep_ms)
        b += _samples(ref, warmup_ms, rep_ms)
    return Comparison(Timing.from_samples(a), Timing.from_samples(b), nbytes, flops, ceiling)


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
