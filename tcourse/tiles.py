"""Tile pictures and counts for chapters 4 and 6: which tiles a program touches, and in what order.

Everything here is plain Python/numpy (no Triton): the same index arithmetic a kernel does, so a
CPU can draw a 8192x8192 problem's first wave instantly while the interpreter could never run it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .indexing import cdiv, grouped_pid  # noqa: F401  (re-exported for the chapters)
from .webviz import Scene

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


def first_wave_scene(wave: Wave, *, size: float = 420) -> Scene:
    """C tiles coloured by launch order inside the first wave (grey: later waves), with the A rows
    and B columns that wave reads marked on the left (red) and top (blue) edges."""
    num_pid_m, num_pid_n = cdiv(wave.M, wave.block_m), cdiv(wave.N, wave.block_n)
    cell = size / max(num_pid_m, num_pid_n)
    x0, y0 = 34, 58
    s = Scene(x0 + num_pid_n * cell + 16, y0 + num_pid_m * cell + 40)
    s.text(4, 10, f"{wave.M}×{wave.N}，{wave.block_m}×{wave.block_n} tile，GROUP_M={wave.group_m}", size=13, bold=True)
    s.text(4, 28, f"第一波 {len(wave.tiles)} 个 program：读 {len(wave.a_rows)} 条 A 行带 + {len(wave.b_cols)} 条 B 列带",
           size=12)
    s.rect(x0, y0, num_pid_n * cell, num_pid_m * cell, fill="#e0e0e0")
    order = np.full(num_pid_m * num_pid_n, -1)
    steps = 24  # launch order in colour steps: dark (first program) to yellow (last of the wave)
    for i, (pm, pn) in enumerate(wave.tiles):
        order[pm * num_pid_n + pn] = i * steps // len(wave.tiles)
    s.grid(x0, y0, cell, cell, num_pid_n, order, [_viridis(k / (steps - 1)) for k in range(steps)],
           gap=0.5 if cell > 5 else 0)
    for r in wave.a_rows:
        s.rect(x0 - 14, y0 + r * cell, 10, cell, fill="#d62728")
    for c in wave.b_cols:
        s.rect(x0 + c * cell, y0 - 14, cell, 10, fill="#1f77b4")
    s.text(x0, y0 + num_pid_m * cell + 14, f"pid_n 0..{num_pid_n - 1}（上边蓝色：读到的 B 列带）", size=11)
    s.text(x0, y0 + num_pid_m * cell + 30, f"pid_m 0..{num_pid_m - 1}（左边红色：读到的 A 行带）；灰色：后面几波",
           size=11)
    return s


def _viridis(f: float) -> str:
    stops = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
    f = min(max(f, 0.0), 1.0) * (len(stops) - 1)
    i = min(int(f), len(stops) - 2)
    t = f - i
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(stops[i], stops[i + 1]))


def tile_walk_scene(M: int, N: int, K: int, block_m: int, block_n: int, block_k: int,
                    pid_m: int = 0, pid_n: int = 0, k_iter: int = 0, *, height: float = 200) -> Scene:
    """A (M x K), B (K x N), C (M x N) to scale: the program's C tile, the A and B tiles of
    K-iteration ``k_iter``, the strips its whole K loop walks (orange), and (hatched) the parts of
    those tiles the masks switch off."""
    n_k = cdiv(K, block_k)
    m0, n0, k0 = pid_m * block_m, pid_n * block_n, k_iter * block_k
    scale = height / max(M, K, cdiv(M, block_m) * block_m, cdiv(K, block_k) * block_k)
    panels = [("A", M, K, (m0, k0, block_m, block_k), (m0, 0, block_m, K)),
              ("B", K, N, (k0, n0, block_k, block_n), (0, n0, K, block_n)),
              ("C", M, N, (m0, n0, block_m, block_n), None)]
    widths = [(max(cols, cdiv(cols, b) * b) * scale) for (_, _, cols, _, _), b in zip(panels, (block_k, block_n, block_n))]
    s = Scene(sum(widths) + 40 * 3 + 20, height + 80)
    s.text(10, 12, f"program (pid_m={pid_m}, pid_n={pid_n})，K 迭代 {k_iter}/{n_k - 1}："
                   f"A[{m0}:{m0 + block_m}, {k0}:{k0 + block_k}] @ B[{k0}:{k0 + block_k}, {n0}:{n0 + block_n}] → acc",
           size=13, bold=True)
    x = 20
    for (name, rows, cols, tile, strip), w in zip(panels, widths):
        y0 = 44
        s.text(x, 32, f"{name}：{rows}×{cols}", size=12)
        s.rect(x, y0, cols * scale, rows * scale, fill="#f2f2f2", stroke="#333")
        if strip:
            r, c, h, ww = strip
            s.rect(x + c * scale, y0 + r * scale, ww * scale, h * scale, fill="#ff7f0e", op=0.3)
        r, c, h, ww = tile
        s.rect(x + c * scale, y0 + r * scale, ww * scale, h * scale, fill="#d62728", op=0.65, stroke="#d62728")
        # the parts of the tile outside the matrix: lanes the mask turns off
        if c + ww > cols:
            s.rect(x + cols * scale, y0 + r * scale, (c + ww - cols) * scale, h * scale, hatch=True)
        if r + h > rows:
            s.rect(x + c * scale, y0 + rows * scale, (min(c + ww, cols) - c) * scale, (r + h - rows) * scale, hatch=True)
        x += w + 40
    s.text(10, height + 66, "橙色：这个 program 的整个 K 循环要走过的 A 行带 / B 列带；红色：这一步的 tile；"
                            "斜线：落在矩阵外、被 mask 关掉", size=11)
    return s



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


def attention_scene(seq_len: int, block_m: int, block_n: int, causal: bool, *, size: float = 360) -> Scene:
    """Every (Q tile, K/V tile) pair: grey skipped by the loop bound, green computed with no mask,
    orange computed with some scores masked (causal diagonal or sequence tail)."""
    m = attention_tile_map(seq_len, block_m, block_n, causal)
    nq, nk = m.shape
    cw, ch = size / max(nq, nk), size / max(nq, nk)
    x0, y0 = 64, 58
    s = Scene(x0 + nk * cw + 20, y0 + nq * ch + 46)
    done = int((m > 0).sum())
    s.text(4, 10, f"S={seq_len}, BLOCK_M={block_m}, BLOCK_N={block_n}, causal={causal}", size=13, bold=True)
    s.text(4, 28, f"计算 {done}/{m.size} 个 tile 对（绿：整块计算，橙：部分分数被 mask，灰：跳过）", size=12)
    s.grid(x0, y0, cw, ch, nk, [(-1 if v == 0 else v - 1) for v in m.flat], ["#2ca02c", "#ff7f0e"],
           gap=0.5 if cw > 4 else 0)
    for i in sorted({0, nq - 1}):  # integer tile indices at both ends (no 0.0, 2.5, 5.0 axis)
        s.text(x0 - 6, y0 + i * ch + ch / 2, str(i), size=11, anchor="end")
    for j in sorted({0, nk - 1}):
        s.text(x0 + j * cw + cw / 2, y0 - 8, str(j), size=11, anchor="middle")
    s.rect(x0, y0, nk * cw, nq * ch, stroke="#999")
    s.text(x0 + nk * cw / 2, y0 + nq * ch + 16, "K/V tile j（内层循环）", size=11, anchor="middle")
    s.text(14, y0 + nq * ch / 2, "Q tile i（每个一个 program）", size=11, anchor="middle", rot=-90)
    return s

