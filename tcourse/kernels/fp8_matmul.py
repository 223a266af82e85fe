"""FP8 (e4m3) matmul with dequantisation scales: ``C = (A * sa) @ (B * sb)``, fp32 accumulation.

Quantising to fp8 keeps 3 mantissa bits and a range of +-448, so each tensor is divided by a scale
first (``scale = amax / 448``) and the product is multiplied back. The scale is either one number per
tensor ("per-tensor") or one per row of A and one per column of B ("per-row" / row-wise): because
``(sa_i * A_i.) @ (B_.j * sb_j) = sa_i * sb_j * (A_i. @ B_.j)``, both kinds are applied once, to the fp32
accumulator in the epilogue, never inside the K loop. ``torch._scaled_mm`` computes the same thing with
cuBLAS(Lt); on Hopper both end up in fp8 wgmma instructions.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import cdiv

E4M3_MAX = 448.0


@triton.jit
def fp8_matmul_kernel(a_ptr, b_ptr, c_ptr, sa_ptr, sb_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, ROWWISE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_here
    pid_n = (pid % per_group) // rows_here
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # fp8 x fp8 -> fp32 on the tensor cores
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    if ROWWISE:  # one scale per row of A and per column of B
        sa = tl.load(sa_ptr + rm, mask=rm < M, other=0.0)
        sb = tl.load(sb_ptr + rn, mask=rn < N, other=0.0)
        acc = acc * sa[:, None] * sb[None, :]
    else:
        acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def quantize_e4m3(x: torch.Tensor, dim: int | None = None):
    """``(q, scale)`` with ``q * scale ~= x``: one fp32 scale for the whole tensor (``dim=None``) or one
    per slice along ``dim`` (``dim=1``: one per row; ``dim=0``: one per column), from the slice's amax."""
    xf = x.float()
    amax = xf.abs().amax() if dim is None else xf.abs().amax(dim=dim, keepdim=True)
    scale = amax.clamp(min=1e-12) / E4M3_MAX
    q = (xf / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, scale.float()


def _config(a: torch.Tensor) -> dict:
    if a.is_cuda:
        return {"BM": 128, "BN": 128, "BK": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    return {"BM": 32, "BN": 32, "BK": 32, "GROUP_M": 4}


def fp8_matmul(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               out_dtype: torch.dtype = torch.bfloat16, config: dict | None = None) -> torch.Tensor:
    """``(a * scale_a) @ (b * scale_b)`` for e4m3 ``a`` (M, K) and ``b`` (K, N). Scales: one element each
    (per-tensor), or ``scale_a`` with M elements and ``scale_b`` with N (per-row of A / per-column of B)."""
    if a.dtype != torch.float8_e4m3fn or b.dtype != torch.float8_e4m3fn:
        raise TypeError(f"fp8_matmul takes float8_e4m3fn inputs, got {a.dtype} and {b.dtype}")
    (M, K), N = a.shape, b.shape[1]
    sa, sb = scale_a.float().reshape(-1).contiguous(), scale_b.float().reshape(-1).contiguous()
    rowwise = sa.numel() != 1 or sb.numel() != 1
    if rowwise and (sa.numel() != M or sb.numel() != N):
        raise ValueError(f"row-wise scales need {M} and {N} elements, got {sa.numel()} and {sb.numel()}")
    c = torch.empty((M, N), dtype=out_dtype, device=a.device)
    cfg = {**_config(a), **(config or {})}
    grid = (cdiv(M, cfg["BM"]) * cdiv(N, cfg["BN"]),)
    fp8_matmul_kernel[grid](a, b, c, sa, sb, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            ROWWISE=rowwise, **cfg)
    return c
