"""Guarded tensors, shared by the learner-side harness and the replay: every input and output is a view
into a larger flat buffer with ``guard`` extra elements on each side.

Input padding is NaN (an unmasked read poisons the result), output padding is :data:`OUT_SENTINEL`
and the output itself starts as NaN (an element never written stays NaN; integers start at -1).
"""
from __future__ import annotations

import numpy as np
import torch

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32,
                "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8}
OUT_SENTINEL = {"float32": 1234.0, "float16": 1234.0, "bfloat16": 1232.0, "int32": -7, "int64": -7, "int8": -7,
                "uint8": 251}
OUT_FILL = {"int32": -1, "int64": -1, "int8": -1, "uint8": 253}  # floats start as NaN
IN_PAD = {"int32": -(2**31) + 7, "int64": -(2**62), "int8": -128, "uint8": 255}  # floats pad with NaN


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def guard_size(numel: int) -> int:
    """Padding elements on each side: at least a whole row of blocks, a multiple of 64 (aligned views)."""
    return min(-(-max(4096, numel) // 64) * 64, 1 << 20)


def _row_major(shape, step: int, gap: int) -> tuple[int, ...]:
    """Strides of a row-major layout whose last dimension is ``step`` elements apart and whose every other dimension
    sits ``gap`` elements further apart than what it holds."""
    strides, acc = [step], step * shape[-1]
    for s in reversed(shape[:-1]):
        strides.append(acc + gap)
        acc = (acc + gap) * s
    return tuple(reversed(strides))


def layout_strides(shape, layout: str) -> tuple[tuple[int, ...], int]:
    """Strides of a view with this layout and the number of storage elements it spans.

    ``padded``: the last dimension is contiguous, and each dimension before it sits 3 elements further
    apart than what it holds (rows of a matrix; also the matrices of a batch). ``transposed``: the last two
    dimensions swapped (``base.transpose(-1, -2)``, ``base`` contiguous). ``transposed_padded``: the same with
    ``base`` padded (``x.stride() == (1, M + 3)``: neither stride is what the shape says). ``step2``: every other
    element of padded rows (``base[:, ::2]``: ``x.stride() == (2 * N + 3, 2)``). 1-D and 0-D tensors are contiguous."""
    shape = tuple(shape)
    if layout == "contig" or len(shape) < 2:
        strides = _row_major(shape, 1, 0) if shape else ()
        return strides, max(int(np.prod(shape)) if shape else 1, 1)
    if layout in ("padded", "step2"):
        strides = _row_major(shape, 2 if layout == "step2" else 1, 3)
    elif layout in ("transposed", "transposed_padded"):
        base = list(_row_major(shape[:-2] + (shape[-1], shape[-2]), 1, 3 if layout == "transposed_padded" else 0))
        strides = tuple(base[:-2] + [base[-1], base[-2]])
    else:
        raise ValueError(f"unknown layout {layout!r}")
    if any(s == 0 for s in shape):
        return strides, 1
    return strides, sum((n - 1) * st for n, st in zip(shape, strides)) + 1


def guarded(shape, layout: str, dtype: str, device: str, pad_value, fill_value):
    """(view, flat buffer): the view sits ``guard`` elements into the buffer."""
    strides, span = layout_strides(shape, layout)
    g = guard_size(span)
    buf = torch.full((span + 2 * g,), pad_value, dtype=TORCH_DTYPES[dtype], device=device)
    view = buf.as_strided(tuple(shape), strides, g)
    view.fill_(fill_value)
    return view, buf


def guarded_input(spec: dict, values: np.ndarray, device: str):
    view, buf = guarded(spec["shape"], spec["layout"], spec["dtype"], device, IN_PAD.get(spec["dtype"], float("nan")), 0)
    view.copy_(torch.from_numpy(values).to(TORCH_DTYPES[spec["dtype"]]).to(device))
    return view, buf


def guarded_output(spec: dict, device: str):
    dt = spec["dtype"]
    return guarded(spec["shape"], spec.get("layout", "contig"), dt, device, OUT_SENTINEL[dt], OUT_FILL.get(dt, float("nan")))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bf16; widening is exact
        t = t.float()
    return t.numpy()


def numpy_dtype(dtype: str):
    return np.float32 if dtype == "bfloat16" else np.dtype(dtype_name(TORCH_DTYPES[dtype]))
