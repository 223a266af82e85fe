"""Every benchmark case: inputs, our kernel, torch's, the reference for the correctness check, the target."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

import tcourse.kernels as K
from tcourse.kernels import softmax_kernels


@dataclass
class Case:
    family: str          # axpy, softmax, softmax_online, matmul, attention, layernorm, transpose
    name: str            # e.g. "fp16 4096x4096x4096"
    make: Callable[[], dict]          # fresh random inputs
    ours: Callable[[dict], torch.Tensor]
    baselines: dict[str, Callable[[dict], torch.Tensor]]  # name -> torch function (first is the main one)
    reference: Callable[[dict], torch.Tensor]              # high-precision result for the check
    tol: float                        # max ||out - ref|| / ||ref||
    nbytes: int | None = None
    flops: int | None = None
    targets: dict[str, float] = field(default_factory=dict)  # baseline name -> minimal speedup


def _randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


def axpy_cases():
    out = []
    for n in (2**20, 2**24, 2**27):  # 2^20: launch-bound (a few microseconds of GPU work), no target
        out.append(Case(
            "axpy", f"fp32 n=2^{int(math.log2(n))}",
            lambda n=n: {"a": 1.7, "x": _randn(n), "y": _randn(n)},
            lambda d: K.axpy(d["a"], d["x"], d["y"]),
            {"torch.add": lambda d: torch.add(d["y"], d["x"], alpha=d["a"])},
            lambda d: d["a"] * d["x"].double() + d["y"].double(),
            1e-6, nbytes=3 * 4 * n, targets={"torch.add": 1.0} if n >= 2**24 else {}))
    return out


def softmax_cases():
    out = []
    for n in (1000, 1024, 4096, 8192, 16384):
        out.append(Case(
            "softmax", f"fp32 4096x{n}", lambda n=n: {"x": _randn(4096, n) * 4},
            lambda d: K.softmax(d["x"]), {"torch.softmax": lambda d: torch.softmax(d["x"], -1)},
            lambda d: torch.softmax(d["x"].double(), -1), 1e-5, nbytes=2 * 4 * 4096 * n,
            targets={"torch.softmax": 1.2}))
    for n in (65536, 262144):
        out.append(Case(
            "softmax_online", f"fp32 4096x{n}", lambda n=n: {"x": _randn(4096, n) * 4},
            lambda d: K.softmax(d["x"]), {"torch.softmax": lambda d: torch.softmax(d["x"], -1)},
            lambda d: torch.softmax(d["x"].double(), -1), 1e-5, nbytes=2 * 4 * 4096 * n,
            targets={"torch.softmax": 1.0}))
    return out


def matmul_cases():
    out = []
    shapes = [(1024, 1024, 1024, 0.8), (4096, 4096, 4096, 1.0), (8192, 8192, 8192, 1.0), (4095, 4097, 1023, 0.85)]
    for dt, dname in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        for m, n, k, target in shapes:
            out.append(Case(
                "matmul", f"{dname} {m}x{n}x{k}",
                lambda m=m, n=n, k=k, dt=dt: {"a": _randn(m, k, dtype=dt), "b": _randn(k, n, dtype=dt)},
                lambda d: K.matmul(d["a"], d["b"]), {"torch.matmul": lambda d: torch.matmul(d["a"], d["b"])},
                lambda d: torch.matmul(d["a"].double(), d["b"].double()),
                5e-3 if dt == torch.float16 else 2e-2, flops=2 * m * n * k, targets={"torch.matmul": target}))
    return out


def _sdpa(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = getattr(SDPBackend, backend)

    def run(d):
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(d["q"], d["k"], d["v"], is_causal=d["causal"])
    return run


def attention_cases():
    out = []
    for S in (1024, 4096):
        for D in (64, 128):
            for causal in (False, True):
                flops = 4 * 4 * 32 * S * S * D // (2 if causal else 1)
                out.append(Case(
                    "attention", f"fp16 B4 H32 S{S} D{D}{' causal' if causal else ''}",
                    lambda S=S, D=D, causal=causal: {**{t: _randn(4, 32, S, D, dtype=torch.float16)
                                                        for t in "qkv"}, "causal": causal},
                    lambda d: K.attention(d["q"], d["k"], d["v"], causal=d["causal"]),
                    {"sdpa_default": lambda d: F.scaled_dot_product_attention(d["q"], d["k"], d["v"],
                                                                              is_causal=d["causal"]),
                     "sdpa_flash": _sdpa("FLASH_ATTENTION")},
                    lambda d: F.scaled_dot_product_attention(d["q"].float(), d["k"].float(), d["v"].float(),
                                                             is_causal=d["causal"]),
                    3e-3, flops=flops, targets={"sdpa_default": 0.95, "sdpa_flash": 1.3}))
    return out


def other_cases():
    """Kernels without a performance target, timed for the record."""
    def ln_make():
        return {"x": _randn(4096, 4096), "w": _randn(4096), "b": _randn(4096)}
    return [
        Case("layernorm", "fp32 4096x4096", ln_make, lambda d: K.layernorm(d["x"], d["w"], d["b"]),
             {"F.layer_norm": lambda d: F.layer_norm(d["x"], (4096,), d["w"], d["b"])},
             lambda d: F.layer_norm(d["x"].double(), (4096,), d["w"].double(), d["b"].double()), 1e-5,
             nbytes=2 * 4 * 4096 * 4096),
        Case("transpose", "fp32 8191x4097", lambda: {"x": _randn(8191, 4097)}, lambda d: K.transpose(d["x"]),
             {"x.T.contiguous": lambda d: d["x"].T.contiguous()}, lambda d: d["x"].T.double(), 0.0,
             nbytes=2 * 4 * 8191 * 4097),
    ]


def variant_cases():
    """Alternatives behind the public functions, to see what the dispatch chose against."""
    from tcourse.kernels import attention_kernels as A, matmul_kernels as M

    out = []
    for chunk in (4096, 16384):
        for n in (65536, 262144):
            out.append(Case(
                "variant", f"softmax_online chunk={chunk} fp32 4096x{n}", lambda n=n: {"x": _randn(4096, n)},
                lambda d, chunk=chunk: softmax_kernels.softmax_online(d["x"], chunk=chunk),
                {"torch.softmax": lambda d: torch.softmax(d["x"], -1)},
                lambda d: torch.softmax(d["x"].double(), -1), 1e-5, nbytes=2 * 4 * 4096 * n))
    for dt, dname in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):  # what matmul() does not pick at 1024^3
        out.append(Case(
            "variant", f"matmul_blocked {dname} 1024x1024x1024",
            lambda dt=dt: {"a": _randn(1024, 1024, dtype=dt), "b": _randn(1024, 1024, dtype=dt)},
            lambda d: M.matmul_blocked(d["a"], d["b"]), {"torch.matmul": lambda d: torch.matmul(d["a"], d["b"])},
            lambda d: torch.matmul(d["a"].double(), d["b"].double()), 5e-3 if dt == torch.float16 else 2e-2,
            flops=2 * 1024**3))
    out.append(Case(
        "variant", "matmul_blocked fp16 4096^3",
        lambda: {"a": _randn(4096, 4096, dtype=torch.float16), "b": _randn(4096, 4096, dtype=torch.float16)},
        lambda d: M.matmul_blocked(d["a"], d["b"]), {"torch.matmul": lambda d: torch.matmul(d["a"], d["b"])},
        lambda d: torch.matmul(d["a"].double(), d["b"].double()), 5e-3, flops=2 * 4096**3))
    out.append(Case(
        "variant", "matmul_blocked fp16 4095x4097x1023",
        lambda: {"a": _randn(4095, 1023, dtype=torch.float16), "b": _randn(1023, 4097, dtype=torch.float16)},
        lambda d: M.matmul_blocked(d["a"], d["b"]), {"torch.matmul": lambda d: torch.matmul(d["a"], d["b"])},
        lambda d: torch.matmul(d["a"].double(), d["b"].double()), 5e-3, flops=2 * 4095 * 4097 * 1023))
    for S, D, causal in ((4096, 64, False), (4096, 128, False), (4096, 128, True)):
        out.append(Case(
            "variant", f"attention_ptr fp16 B4 H32 S{S} D{D}{' causal' if causal else ''}",
            lambda S=S, D=D, causal=causal: {**{t: _randn(4, 32, S, D, dtype=torch.float16) for t in "qkv"},
                                             "causal": causal},
            lambda d: A.attention_ptr(d["q"], d["k"], d["v"], causal=d["causal"]),
            {"sdpa_default": lambda d: F.scaled_dot_product_attention(d["q"], d["k"], d["v"], is_causal=d["causal"])},
            lambda d: F.scaled_dot_product_attention(d["q"].float(), d["k"].float(), d["v"].float(),
                                                     is_causal=d["causal"]),
            3e-3, flops=4 * 4 * 32 * S * S * D // (2 if causal else 1)))
    return out


FAMILIES = {
    "axpy": axpy_cases, "softmax": softmax_cases, "matmul": matmul_cases, "attention": attention_cases,
    "other": other_cases, "variant": variant_cases,
}
