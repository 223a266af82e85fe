"""Small matplotlib pictures the chapters reuse: program coverage, masks, sweeps."""
from __future__ import annotations

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
