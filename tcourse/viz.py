"""Small matplotlib pictures the chapters reuse (program coverage, masks, sweeps) and IR excerpts."""
from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np


def program_coverage(n: int, block: int, *, max_cols: int = 64, ax=None):
    """Which program owns which element; lanes the mask switches off are drawn grey and hatched.

    Element ``i`` belongs to program ``i // block``; the last program's lanes at or beyond ``n``
    exist (``tl.arange`` always makes ``block`` lanes) but ``mask = offsets < n`` turns them off.
    """
    programs = -(-n // block)
    lanes = programs * block
    cols = min(max_cols, lanes)
    rows = -(-lanes // cols)
    grid = np.full((rows, cols), np.nan)
    idx = np.arange(lanes)
    grid.flat[: lanes] = idx // block
    masked = np.zeros((rows, cols), bool)
    masked.flat[: lanes] = idx >= n
    if ax is None:
        _, ax = plt.subplots(figsize=(min(12, 0.18 * cols + 2), 0.3 * rows + 1.2))
    cmap = plt.get_cmap("tab20", max(programs, 1))
    shown = np.ma.masked_where(masked | np.isnan(grid), grid)
    ax.imshow(shown, cmap=cmap, vmin=-0.5, vmax=programs - 0.5, aspect="auto", interpolation="nearest")
    ys, xs = np.nonzero(masked)
    ax.scatter(xs, ys, marker="x", color="0.4", s=12, label="mask=False (not loaded/stored)")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"N={n}, BLOCK_SIZE={block}: grid=({programs},), {lanes - n} lanes masked off")
    if lanes > n:
        ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    return ax


def plot_sweep(xs, series: dict, *, xlabel: str, ylabel: str, title: str = "", ceiling: float | None = None,
               ceiling_label: str = "ceiling", logx: bool = True, ax=None):
    """Lines of ``series[name] = ys`` over ``xs``, with an optional horizontal ceiling."""
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", label=name)
    if ceiling:
        ax.axhline(ceiling, ls="--", color="k", lw=1, label=ceiling_label)
    if logx:
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")
_SASS_ENCODING = re.compile(r"\s*/\* 0x[0-9a-f]{16} \*/")


def ir_lines(text: str, *patterns: str, limit: int = 12) -> str:
    """The lines of an IR/PTX/SASS dump that match any regex in ``patterns``.

    MLIR ``loc(...)`` annotations and SASS instruction encodings (``/* 0x... */``) are stripped.

    A whole dump is hundreds of lines; a chapter shows the few that carry the point.
    """
    keep = [re.compile(p) for p in patterns]
    out = []
    for line in text.splitlines():
        if line.startswith("#loc"):
            continue
        line = _SASS_ENCODING.sub("", _LOC.sub("", line)).rstrip()
        if line and any(p.search(line) for p in keep):
            out.append(line)
    more = len(out) - limit
    return "\n".join(out[:limit] + ([f"... ({more} more matching lines)"] if more > 0 else []))


def plot_bandwidth(rows: list[dict], *, x: str, xlabel: str, ceiling: float | None = None,
                   highlight: tuple | None = None, title: str = "", ax=None):
    """Bandwidth over ``x`` from sweep rows: one line per ``num_warps``, torch dashed, HBM ceiling.

    Each row needs ``x``, ``num_warps``, ``triton_gbs`` and ``torch_gbs``; torch does not depend
    on num_warps, so its line is the median of its measurements at each ``x``.
    ``highlight=(x_value, num_warps)`` rings one point (the slider's choice).
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.6))
    xs = sorted({r[x] for r in rows})
    for nw in sorted({r["num_warps"] for r in rows}):
        pts = sorted((r[x], r["triton_gbs"]) for r in rows if r["num_warps"] == nw)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, label=f"triton num_warps={nw}")
    torch_line = [float(np.median([r["torch_gbs"] for r in rows if r[x] == v])) for v in xs]
    ax.plot(xs, torch_line, "k--", marker="s", ms=4, label="torch")
    if ceiling:
        ax.axhline(ceiling, color="r", lw=1, ls=":", label=f"HBM ceiling {ceiling:.0f} GB/s")
    if highlight is not None:
        hit = [r for r in rows if r[x] == highlight[0] and r["num_warps"] == highlight[1]]
        if hit:
            ax.plot([highlight[0]], [hit[0]["triton_gbs"]], "o", ms=14, mfc="none", mec="r", mew=2)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    crowded = any(b / a < 1.5 for a, b in zip(xs, xs[1:]))  # e.g. widths 1000 and 1024
    ax.set_xticklabels([str(v) for v in xs], rotation=60 if crowded else 0, fontsize=8 if crowded else None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("GB/s")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return ax


def row_blocks(n_rows: int, n_cols: int, block: int, *, ax=None):
    """Row-per-program layout: each row is one program's ``block`` lanes; lanes past ``n_cols`` are masked.

    Masked lanes load ``other=-inf`` so they add nothing to max/sum and are never stored.
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.35 * n_rows + 1.2))
    img = np.zeros((n_rows, block))
    img[:, n_cols:] = 1
    ax.imshow(img, cmap=plt.get_cmap("coolwarm", 2), vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(n_rows))
    ax.set_yticklabels([f"pid {r}" for r in range(n_rows)], fontsize=7)
    ax.set_xticks([0, n_cols, block - 1] if n_cols < block else [0, block - 1])
    ax.set_xlabel("lane = tl.arange(0, BLOCK_SIZE)")
    ax.set_title(f"n_cols={n_cols} -> BLOCK_SIZE={block}: {block - n_cols} lanes/row masked "
                 f"({(block - n_cols) / block:.0%}, red, load other=-inf)", fontsize=9)
    return ax
