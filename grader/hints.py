"""The promises a kernel makes to Triton's compiler, checked against the values the interpreter computed.

``tl.multiple_of``, ``tl.max_contiguous`` and ``tl.max_constancy`` change nothing in the interpreter, but a GPU
build believes them: it widens loads and stores to vectors on them. (``tl.assume`` needs no help: the interpreter
asserts its condition itself.) A kernel whose hint is false is right on a CPU and wrong on a GPU, so the replay
checks each hint where it is given, on the values it is given for (:meth:`grader.replay.Guard.install` calls this).

The meaning follows Triton's docstrings, per dimension ``d`` with ``values[d] > 1``:

- contiguity ``C``: along ``d`` the elements form groups of ``C`` (at indices ``0, C, 2C, ...``) of consecutive
  integers (for pointers, consecutive elements: one element's size apart). One exception, for the idiom of Triton's
  own matmul tutorials (``tl.max_contiguous(tl.multiple_of(offs % M, BM), BM)``, or ``tl.where(offs < M, offs, 0)``):
  after a group's first break the rest may be consecutive again from no higher than the group's start (wrapped), or
  repeat the last value (clamped) or one no higher than the start; those are the rows past the edge, which
  the store masks, so a GPU that loads them as if contiguous changes nothing that is kept;
- constancy ``C``: such groups of equal values;
- divisibility ``v``: the first element of every contiguous group along ``d`` is a multiple of ``v`` (for pointers,
  of ``v`` bytes). The groups the compiler sees are never longer than the runs of consecutive values in the data,
  so checking every run's first element asks no more than the compiler assumes (a repeated value, such as the
  edge of ``tl.minimum(offs, M - 1)``, is not taken as a new run).
"""
from __future__ import annotations

import numpy as np

NAMES = {"tt.divisibility": "tl.multiple_of", "tt.contiguity": "tl.max_contiguous", "tt.constancy": "tl.max_constancy"}


def violation(key: str, data, values, elem_bytes: int | None = None) -> str | None:
    """Why hint ``key`` (an attribute the interpreter sets) with ``values`` does not hold for ``data``, or None.
    ``elem_bytes``: for a block of pointers, the size of what they point to (consecutive pointers are that far apart)."""
    name = NAMES.get(key)
    a = np.asarray(data)
    if name is None or a.dtype.kind not in "iu" or a.size == 0 or not isinstance(values, (list, tuple)):
        return None
    if a.ndim == 0:
        a = a.reshape(1)
    if len(values) != a.ndim:
        return None  # the interpreter raises for this itself
    a = a.astype(np.int64) if a.dtype.kind == "i" else a.astype(np.uint64).view(np.int64)
    step = elem_bytes or 1
    for d, v in enumerate(values):
        v = int(v)
        if v <= 1:
            continue
        x = np.moveaxis(a, d, -1)
        if key == "tt.divisibility":
            starts, jumps = np.ones(x.shape, dtype=bool), np.diff(x, axis=-1)
            starts[..., 1:] = (jumps != step) & (jumps != 0)  # a repeat (a clamped edge, as above) starts nothing
            bad = x[starts][x[starts] % v != 0]
            if bad.size and elem_bytes:
                return f"{name}(..., {v}) 给的指针里有地址 {hex(int(bad[0]))}，不是 {v} 字节的倍数"
            if bad.size:
                return f"{name}(..., {v}) 的值里有 {int(bad[0])}，不是 {v} 的倍数"
            continue
        n = x.shape[-1]
        group = min(v, n)
        if group < 2:  # one element along d: a group of one is contiguous and constant
            continue
        usable = n - n % group
        g = x[..., :usable].reshape(x.shape[:-1] + (usable // group, group))
        diffs = np.diff(g, axis=-1)
        if key == "tt.contiguity":
            breaks = diffs != step
            first = breaks.argmax(-1)[..., None]  # each group's first break: between elements first and first + 1
            after = np.arange(group - 1) > first
            back = np.take_along_axis(g, first + 1, -1)[..., 0]
            edge = (back <= g[..., 0]) | (back == np.take_along_axis(g, first, -1)[..., 0])  # wrapped or clamped
            ok = ~breaks.any(-1) | (edge & (~(after & breaks).any(-1) | ~(after & (diffs != 0)).any(-1)))
        else:
            ok = (diffs == 0).all(-1)
        wrong = np.argwhere(~ok)
        if wrong.size:
            kind = "连续" if key == "tt.contiguity" else "相同"
            return (f"{name}(..., {v}) 说每 {v} 个元素一组、组内{kind}，但从第 {int(wrong[0][-1]) * group} 个元素起的"
                    f"一组是 {g[tuple(int(i) for i in wrong[0])][:16].tolist()}")
    return None
