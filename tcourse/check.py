"""Checks against torch that say where and by how much a kernel is wrong."""
from __future__ import annotations

import torch


def check_close(out: torch.Tensor, ref: torch.Tensor, *, atol: float | None = None, rtol: float | None = None,
                name: str = "result") -> float:
    """``torch.testing.assert_close`` plus a one-line report; returns the max absolute error.

    Compares in float64 so the report's error is not itself rounded.
    """
    if out.shape != ref.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    diff = (out.double() - ref.double()).abs()
    nan_out = torch.isnan(out) & ~torch.isnan(ref)
    if nan_out.any():
        idx = tuple(int(i) for i in torch.nonzero(nan_out)[0])
        raise AssertionError(f"{name}: NaN at index {idx} where the reference is {ref[idx].item():.6g} "
                             f"({int(nan_out.sum())} NaN elements; an element never written, or exp overflow?)")
    max_err = float(diff.max()) if diff.numel() else 0.0
    torch.testing.assert_close(out, ref, atol=atol, rtol=rtol, msg=lambda m: f"{name}: {m}")
    print(f"OK {name}: shape {tuple(out.shape)}, {str(out.dtype).removeprefix('torch.')}, max abs error {max_err:.2e}")
    return max_err
