"""What a GPU's ``tl.dot`` does to float32 operands, for the interpreter to copy (``tcourse.runtime``).

Triton's default ``input_precision`` for float32 is TF32; the PTX it emits hands the float32 bits straight to
``wgmma``/``mma`` with no ``cvt.rna.tf32.f32``, so the tensor cores read only the top 19 bits. This checks that on
the GPU: ``tl.dot(a, I)`` returns each operand as the tensor core saw it, on the wgmma path (64 rows, 4 warps) and
the mma.sync path (16 rows, 1 warp), for both operands, and compares with truncating and with rounding to TF32.
Then full products against the interpreter's emulation (operands truncated, the product in float64): the
difference left is the order of the float32 additions. Writes JSON to stdout.
"""
import json
import sys

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(o_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, input_precision=PREC))


def truncated(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def rounded(x: np.ndarray) -> np.ndarray:  # round to nearest, ties away from zero (cvt.rna.tf32.f32)
    return ((x.view(np.uint32) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def run(a: np.ndarray, b: np.ndarray, prec: str, warps: int) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    out = torch.empty(m, n, device="cuda", dtype=torch.float32)
    dot_kernel[(1,)](ta, tb, out, m, n, k, prec, num_warps=warps)
    return out.cpu().numpy()


def main() -> None:
    g = np.random.default_rng(0)
    rows = {}
    for path, m, warps in (("wgmma", 64, 4), ("mma.sync", 16, 1)):
        k = n = 32
        # every value has low mantissa bits set, half of them past the rounding point
        a = (g.standard_normal((m, k)) * 3).astype(np.float32)
        eye_n = np.eye(k, n, dtype=np.float32)
        seen_a = run(a, eye_n, "tf32", warps)
        b = (g.standard_normal((k, n)) * 3).astype(np.float32)
        r = min(m, k)  # I(m x k) @ b: b's first r rows
        seen_b, b_rows = run(np.eye(m, k, dtype=np.float32), b, "tf32", warps)[:r], b[:r]
        full = run(a, b, "tf32", warps)
        emulated = (truncated(a).astype(np.float64) @ truncated(b).astype(np.float64)).astype(np.float32)
        exact = (a.astype(np.float64) @ b.astype(np.float64))
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        rows[path] = {
            "a_equals_truncated": float(np.mean(seen_a == truncated(a))),
            "a_equals_rounded": float(np.mean(seen_a == rounded(a))),
            "b_equals_truncated": float(np.mean(seen_b == truncated(b_rows))),
            "b_equals_rounded": float(np.mean(seen_b == rounded(b_rows))),
            "ieee_equals_exact_operand": float(np.mean(run(a, eye_n, "ieee", warps) == a)),
            "product_vs_emulated_max_rel_to_scale": float(np.max(np.abs(full - emulated) / scale)),
            "product_vs_exact_max_rel_to_scale": float(np.max(np.abs(full - exact) / scale)),
            "emulated_vs_exact_max_rel_to_scale": float(np.max(np.abs(emulated - exact) / scale)),
        }
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "paths": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
