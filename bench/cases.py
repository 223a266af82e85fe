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
    shapes = [(1024, 1024, 1024, 0.95), (4096, 4096, 4096, 1.0), (8192, 8192, 8192, 1.0), (4095, 4097, 1023, 0.85)]
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
    for dt, dname in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        for S in (1024, 4096):
            for D in (64, 128):
                for causal in (False, True):
                    out.append(_attention_case(dt, dname, S, D, causal))
    return out


def _attention_case(dt, dname, S, D, causal):
    """fp16: targets against cuDNN (SDPA's default) and the FLASH backend; bf16: reported only."""
    flops = 4 * 4 * 32 * S * S * D // (2 if causal else 1)
    return Case(
        "attention", f"{dname} B4 H32 S{S} D{D}{' causal' if causal else ''}",
        lambda: {**{t: _randn(4, 32, S, D, dtype=dt) for t in "qkv"}, "causal": causal},
        lambda d: K.attention(d["q"], d["k"], d["v"], causal=d["causal"]),
        {"sdpa_default": lambda d: F.scaled_dot_product_attention(d["q"], d["k"], d["v"], is_causal=d["causal"]),
         "sdpa_flash": _sdpa("FLASH_ATTENTION")},
        lambda d: F.scaled_dot_product_attention(d["q"].float(), d["k"].float(), d["v"].float(),
                                                 is_causal=d["causal"]),
        3e-3 if dt == torch.float16 else 2e-2, flops=flops,
        targets={"sdpa_default": 0.95, "sdpa_flash": 1.3} if dt == torch.float16 else {})


def _scaled_mm(d):
    return torch._scaled_mm(d["a"], d["b"], scale_a=d["sa"], scale_b=d["sb"], out_dtype=torch.bfloat16)


def fp8_cases():
    """e4m3 matmul with per-tensor scales (target: torch._scaled_mm) and row-wise scales (reported)."""
    from tcourse.kernels.fp8_matmul import fp8_matmul, quantize_e4m3

    def make(n, rowwise):
        a, b = _randn(n, n), _randn(n, n)
        qa, sa = quantize_e4m3(a, 1 if rowwise else None)
        qb, sb = quantize_e4m3(b, 0 if rowwise else None)
        sa, sb = (sa.reshape(n, 1), sb.reshape(1, n)) if rowwise else (sa.reshape(()), sb.reshape(()))
        return {"a": qa, "b": qb.t().contiguous().t(), "sa": sa, "sb": sb}  # column-major B, as _scaled_mm wants

    def reference(d):  # fp32 (torch's fp32 matmul does not use tf32 by default): error ~1e-6, tolerance 1e-2
        return (d["a"].float() * d["sa"]) @ (d["b"].float() * d["sb"])
    out = []
    for n in (4096, 8192):
        for rowwise in (False, True):
            out.append(Case(
                "fp8", f"e4m3 {n}x{n}x{n} {'row-wise' if rowwise else 'per-tensor'} scales",
                lambda n=n, rowwise=rowwise: make(n, rowwise),
                lambda d: fp8_matmul(d["a"], d["b"], d["sa"], d["sb"]), {"torch._scaled_mm": _scaled_mm},
                reference, 1e-2, flops=2 * n**3, targets={} if rowwise else {"torch._scaled_mm": 1.0}))
    return out


def _grads_fp64(d) -> torch.Tensor:
    """dQ, dK, dV in float64 (SDPA's math path), 8 heads at a time so the S x S scores stay small."""
    q, k, v, do = (d[t] for t in ("q", "k", "v", "do"))
    B, H, S, D = q.shape
    parts = [[], [], []]
    flat = [t.reshape(B * H, S, D) for t in (q, k, v, do)]
    for i in range(0, B * H, 8):
        qs, ks, vs = (t[i:i + 8].double().requires_grad_() for t in flat[:3])
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=d["causal"])
        for acc, g in zip(parts, torch.autograd.grad(o, (qs, ks, vs), flat[3][i:i + 8].double())):
            acc.append(g)
    return torch.cat([torch.cat(p).flatten() for p in parts])


def attention_bwd_cases():
    """The chapter 10 backward (dQ, dK, dV from the saved O and lse) against SDPA's backward (default backend)."""
    from tcourse.kernels.attention_bwd_kernels import attention_bwd, attention_fwd

    def make(S, D, causal):
        q, k, v, do = (_randn(4, 32, S, D, dtype=torch.float16) for _ in range(4))
        o, lse = attention_fwd(q, k, v, causal)
        qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
        o_ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
        return {"q": q, "k": k, "v": v, "do": do, "o": o, "lse": lse, "causal": causal, "torch": (o_ref, qr, kr, vr)}

    def ours(d):
        g = attention_bwd(d["do"], d["q"], d["k"], d["v"], d["o"], d["lse"], d["causal"])
        return torch.cat([t.flatten() for t in g])

    def theirs(d):
        o_ref, qr, kr, vr = d["torch"]
        return torch.cat([t.flatten() for t in torch.autograd.grad(o_ref, (qr, kr, vr), d["do"], retain_graph=True)])
    out = []
    for D in (64, 128):
        for causal in (False, True):
            S = 4096
            flops = 5 * 2 * 4 * 32 * S * S * D // (2 if causal else 1)  # five S x S x D matmuls
            out.append(Case("attention_bwd", f"fp16 B4 H32 S{S} D{D}{' causal' if causal else ''}",
                            lambda S=S, D=D, causal=causal: make(S, D, causal), ours, {"sdpa_default": theirs},
                            _grads_fp64, 1e-2, flops=flops, targets={"sdpa_default": 1.0}))
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
    "fp8": fp8_cases, "attention_bwd": attention_bwd_cases,
    "other": other_cases, "variant": variant_cases,
}
