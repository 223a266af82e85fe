"""Tile pictures and counts for chapters 4 and 6: which tiles a program touches, and in what order.

Everything here is plain Python/numpy (no Triton): the same index arithmetic a kernel does, so a
CPU can draw a 8192x8192 problem's first wave instantly while the interpreter could never run it.
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .indexing import cdiv, grouped_pid  # noqa: F401  (re-exported for the chapters)

H200_SMS = 132


def program_order(num_pid_m: int, num_pid_n: int, group_m: int) -> np.ndarray:
    """``order[pid_m, pid_n]`` = the program id that computes that C tile."""
    order = np.full((num_pid_m, num_pid_n), -1, dtype=np.int64)
    for pid in range(num_pid_m * num_pid_n):
        order[grouped_pid(pid, num_pid_m, num_pid_n, group_m)] = pid
    return order


@dataclass
class Wave:
    """The first ``programs`` programs (one per SM): which C tiles and which A/B panels they touch."""

    M: int
    N: int
    K: int
    block_m: int
    block_n: int
    group_m: int
    programs: int
    tiles: list  # (pid_m, pid_n) in launch order
    a_rows: set  # distinct pid_m: A row panels (BLOCK_M x K) the wave reads
    b_cols: set  # distinct pid_n: B column panels (K x BLOCK_N) the wave reads

    def a_tiles(self, block_k: int) -> int:
        """Distinct BLOCK_M x BLOCK_K tiles of A the wave loads over its whole K loop."""
        return len(self.a_rows) * cdiv(self.K, block_k)

    def unique_bytes(self, elsize: int = 2) -> int:
        """Bytes of A and B the wave needs at least once (what L2 must hold for perfect reuse)."""
        return (len(self.a_rows) * self.block_m + len(self.b_cols) * self.block_n) * self.K * elsize

    def requested_bytes(self, elsize: int = 2) -> int:
        """Bytes the wave's programs load in total (each program reads its own A and B panels)."""
        return len(self.tiles) * (self.block_m + self.block_n) * self.K * elsize

    def summary(self) -> str:
        u, r = self.unique_bytes(), self.requested_bytes()
        return (f"GROUP_M={self.group_m:<3} 第一波 {len(self.tiles)} 个 program："
                f"{len(self.a_rows)} 条 A 行带 + {len(self.b_cols)} 条 B 列带 = "
                f"{len(self.a_rows) + len(self.b_cols)} 条，需要 {u / 2**20:.1f} MiB 不同的数据，共读 "
                f"{r / 2**20:.1f} MiB（fp16，K={self.K}）-> 每个字节平均被读 {r / u:.1f} 次")


def first_wave(M: int, N: int, K: int, block_m: int, block_n: int, group_m: int,
               programs: int = H200_SMS) -> Wave:
    num_pid_m, num_pid_n = cdiv(M, block_m), cdiv(N, block_n)
    n = min(programs, num_pid_m * num_pid_n)
    tiles = [grouped_pid(p, num_pid_m, num_pid_n, group_m) for p in range(n)]
    return Wave(M, N, K, block_m, block_n, group_m, programs, tiles,
                {t[0] for t in tiles}, {t[1] for t in tiles})


def draw_first_wave(wave: Wave, ax=None):
    """C tiles coloured by launch order inside the first wave (grey: later waves), with the A rows
    and B columns that wave reads marked on the left and top edges."""
    num_pid_m, num_pid_n = cdiv(wave.M, wave.block_m), cdiv(wave.N, wave.block_n)
    grid = np.full((num_pid_m, num_pid_n), np.nan)
    for i, t in enumerate(wave.tiles):
        grid[t] = i
    if ax is None:
        _, ax = plt.subplots(figsize=(5.2, 5.2))
    ax.set_facecolor("0.88")
    ax.imshow(np.ma.masked_invalid(grid), cmap="viridis", interpolation="nearest",
              extent=(0, num_pid_n, num_pid_m, 0), vmin=0, vmax=max(len(wave.tiles) - 1, 1))
    for r in wave.a_rows:
        ax.add_patch(Rectangle((-1.6, r), 1.2, 1, color="tab:red", clip_on=False))
    for c in wave.b_cols:
        ax.add_patch(Rectangle((c, -1.6), 1, 1.2, color="tab:blue", clip_on=False))
    ax.set_xlim(-1.8, num_pid_n)
    ax.set_ylim(num_pid_m, -1.8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"pid_n (0..{num_pid_n - 1})   blue: B column panels read")
    ax.set_ylabel(f"pid_m (0..{num_pid_m - 1})   red: A row panels read")
    ax.set_title(f"{wave.M}x{wave.N}, {wave.block_m}x{wave.block_n} tiles, GROUP_M={wave.group_m}\n"
                 f"first {len(wave.tiles)} programs: {len(wave.a_rows)} A + {len(wave.b_cols)} B panels",
                 fontsize=9)
    return ax


def draw_tile_walk(M: int, N: int, K: int, block_m: int, block_n: int, block_k: int,
                   pid_m: int = 0, pid_n: int = 0, k_iter: int = 0):
    """A (M x K), B (K x N), C (M x N) in element coordinates: the program's C tile, the A and B
    tiles of K-iteration ``k_iter``, and (hatched) the parts of those tiles the masks switch off."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), gridspec_kw={"width_ratios": [K, N, N]})
    m0, n0, k0 = pid_m * block_m, pid_n * block_n, k_iter * block_k
    panels = [("A", M, K, (m0, k0, block_m, block_k), (m0, 0, block_m, K)),
              ("B", K, N, (k0, n0, block_k, block_n), (0, n0, K, block_n)),
              ("C", M, N, (m0, n0, block_m, block_n), None)]
    for ax, (name, rows, cols, tile, strip) in zip(axes, panels):
        ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="0.95", edgecolor="k"))
        if strip:
            r, c, h, w = strip
            ax.add_patch(Rectangle((c, r), w, h, facecolor="tab:orange", alpha=0.25))
        r, c, h, w = tile
        ax.add_patch(Rectangle((c, r), w, h, facecolor="tab:red", alpha=0.6, edgecolor="tab:red"))
        # the part of the tile outside the matrix: lanes the mask turns off
        if r + h > rows or c + w > cols:
            ax.add_patch(Rectangle((c, r), w, h, fill=False, hatch="//", edgecolor="0.3", lw=0))
        ax.set_xlim(0, max(cols, c + w) + 1)
        ax.set_ylim(max(rows, r + h) + 1, 0)
        ax.set_aspect("equal")
        ax.set_title(f"{name}: {rows}x{cols}", fontsize=9)
        ax.tick_params(labelsize=7)
    n_k = cdiv(K, block_k)
    fig.suptitle(f"program (pid_m={pid_m}, pid_n={pid_n}), K iteration {k_iter}/{n_k - 1}: "
                 f"A[{m0}:{m0 + block_m}, {k0}:{k0 + block_k}] @ B[{k0}:{k0 + block_k}, {n0}:{n0 + block_n}] "
                 f"-> acc (C tile); hatched = masked off", fontsize=9)
    fig.tight_layout()
    return fig


def attention_tile_map(seq_len: int, block_m: int, block_n: int, causal: bool) -> np.ndarray:
    """``map[i, j]`` for Q tile i and K/V tile j: 0 skipped by the loop bound, 1 computed with no
    mask needed, 2 computed with some scores masked (causal diagonal or sequence tail)."""
    nq, nk = cdiv(seq_len, block_m), cdiv(seq_len, block_n)
    out = np.zeros((nq, nk), dtype=np.int64)
    for i in range(nq):
        q_lo = i * block_m
        hi = min(seq_len, (i + 1) * block_m) if causal else seq_len  # the kernel's loop bound
        for j in range(cdiv(hi, block_n)):
            k_hi = (j + 1) * block_n
            partial = k_hi > seq_len or (causal and k_hi - 1 > q_lo)
            out[i, j] = 2 if partial else 1
    return out


def draw_attention_tiles(seq_len: int, block_m: int, block_n: int, causal: bool, ax=None):
    m = attention_tile_map(seq_len, block_m, block_n, causal)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.8, 4.2))
    cmap = plt.matplotlib.colors.ListedColormap(["0.92", "tab:green", "tab:orange"])
    ax.imshow(m, cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
    ax.set_xlabel("K/V tile j (inner loop)")
    ax.set_ylabel("Q tile i (one program each)")
    done = int((m > 0).sum())
    ax.set_title(f"S={seq_len}, BLOCK_M={block_m}, BLOCK_N={block_n}, causal={causal}\n"
                 f"{done}/{m.size} tile pairs computed (green full, orange masked, grey skipped)", fontsize=9)
    return ax
