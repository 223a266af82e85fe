"""Pictures the chapters reuse (program coverage, masks, bandwidth sweeps) as browser scenes, and IR excerpts.

Scenes (``tcourse.webviz.Scene``) are drawn by the browser, so they redraw under a slider with no
kernel: in JupyterLab, VS Code, Colab and on the course's web pages alike.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np

from .webviz import TAB10, Chart, Scene

MASKED = -2  # the grid value panel.js draws as a grey hatched lane


def coverage_cells(n: int, block: int, max_cols: int = 64) -> tuple[np.ndarray, int]:
    """Row-major cells of the coverage picture and the number of columns.

    Element ``i`` belongs to program ``i // block``; the last program's lanes at or beyond ``n``
    exist (``tl.arange`` always makes ``block`` lanes) but ``mask = offsets < n`` turns them off.
    """
    programs = -(-n // block)
    lanes = programs * block
    cols = min(max_cols, lanes)
    idx = np.arange(lanes)
    cells = np.where(idx < n, idx // block, MASKED)
    return cells, cols


def coverage_scene(n: int, block: int, *, max_cols: int = 64, width: float = 640) -> Scene:
    """Which program owns which element; lanes the mask switches off are grey and hatched."""
    cells, cols = coverage_cells(n, block, max_cols)
    programs, masked = -(-n // block), int((cells == MASKED).sum())
    rows = -(-len(cells) // cols)
    cw = (width - 20) / cols
    ch = min(max(cw, 8.0), 16.0)
    s = Scene(width, 62 + rows * ch)
    s.text(10, 12, f"N={n}, BLOCK_SIZE={block}: grid=({programs},)，{masked} 条 lane 被 mask 关掉", size=13, bold=True)
    s.grid(10, 26, cw, ch, cols, cells, TAB10, gap=0.5 if cw > 3 else 0)
    y = 36 + rows * ch
    x = 10
    for i in range(min(programs, 4)):
        s.rect(x, y, 12, 12, fill=TAB10[i % 10])
        s.text(x + 16, y + 6, f"program {i}", size=11)
        x += 90
    if programs > 4:
        s.text(x, y + 6, f"… 共 {programs} 个（颜色循环）", size=11)
        x += 130
    if masked:
        s.rect(x, y, 12, 12, fill="#d9d9d9", hatch=True)
        s.text(x + 16, y + 6, "mask=False：不读不写", size=11)
    return s


def row_blocks_scene(n_rows: int, n_cols: int, block: int, *, width: float = 640) -> Scene:
    """Row-per-program layout: each row is one program's ``block`` lanes; lanes past ``n_cols`` are masked.

    Masked lanes load ``other=-inf`` so they add nothing to max/sum and are never stored.
    """
    s = Scene(width, 86 + 18 * n_rows)
    x0, plot_w = 60, width - 80
    s.text(10, 12, f"n_cols={n_cols} → BLOCK_SIZE={block}：每行 {block - n_cols} 条 lane 被 mask 关掉"
                   f"（{(block - n_cols) / block:.0%}，load other=-inf）", size=13, bold=True)
    live_w = plot_w * n_cols / block
    for r in range(n_rows):
        y = 38 + 18 * r
        s.text(x0 - 6, y + 8, f"pid {r}", size=11, anchor="end")
        s.rect(x0, y, live_w, 15, fill="#4c72b0")
        if n_cols < block:
            s.rect(x0 + live_w, y, plot_w - live_w, 15, fill="#d9d9d9", hatch=True)
    y = 46 + 18 * n_rows
    s.text(x0, y, "0", size=11)
    s.text(x0 + plot_w, y, str(block), size=11, anchor="end")
    if n_cols < block:  # n_cols above the bars, where it cannot collide with the block width below
        s.text(x0 + live_w, 29, f"n_cols={n_cols} ↓", size=11, anchor="end" if n_cols > block / 2 else "start")
    s.text(x0 + plot_w / 2, y + 18, "lane = tl.arange(0, BLOCK_SIZE)", size=11, anchor="middle")
    return s


def bandwidth_scene(rows: list[dict], *, x: str, xlabel: str, ceiling: float | None = None, title: str = "",
                    width: float = 620, height: float = 300) -> Scene:
    """GB/s over ``x`` from sweep rows: one line per ``num_warps``, torch dashed, the HBM ceiling.

    Each row needs ``x``, ``num_warps``, ``triton_gbs`` and ``torch_gbs``; torch does not depend
    on num_warps, so its line is the median of its measurements at each ``x``.
    """
    return _bandwidth(rows, x, xlabel, ceiling, title, width, height)[0]


def _bandwidth(rows, x, xlabel, ceiling, title, width, height):
    xs = sorted({r[x] for r in rows})
    warps = sorted({r["num_warps"] for r in rows})
    top = max([r["triton_gbs"] for r in rows] + [r["torch_gbs"] for r in rows] + [ceiling or 0])
    s = Scene(width, height)
    c = Chart(s, xs, top, title=title, xlabel=xlabel, ylabel="GB/s")
    for i, nw in enumerate(warps):
        by_x = {r[x]: r["triton_gbs"] for r in rows if r["num_warps"] == nw}
        c.series([by_x.get(v) for v in xs], f"num_warps={nw}", TAB10[i % 10])
    c.series([float(np.median([r["torch_gbs"] for r in rows if r[x] == v])) for v in xs], "torch", "#000", dash="6 3")
    if ceiling:
        c.hline(ceiling, f"HBM 上限 {ceiling:.0f}", "#d62728")
    return s, c, xs


def bandwidth_ring(rows: list[dict], *, x: str, chosen, num_warps: int, width: float = 620,
                   height: float = 300, ceiling: float | None = None) -> Scene:
    """A ring around the sweep point of (``chosen``, ``num_warps``), drawn over :func:`bandwidth_scene`."""
    _, c, xs = _bandwidth(rows, x, "", ceiling, "", width, height)
    s = Scene(width, height)
    hit = [r for r in rows if r[x] == chosen and r["num_warps"] == num_warps]
    if hit:
        r = hit[0]
        px, py = c.x(xs.index(chosen)), c.y(r["triton_gbs"])
        s.circle(px, py, 9, stroke="#d62728", sw=2.5, tip=f"{r['triton_gbs']:.0f} GB/s")
    return s


def bars_scene(labels: list[str], ours: list, ref: list, *, chosen: int | None = None, ours_label: str,
               ref_label: str, ylabel: str, title: str = "", width: float = 760, height: float = 300) -> Scene:
    """One bar per configuration (``None``: not run, marked ``--``), the reference as a black tick on
    it, and the ``chosen`` bar outlined in red (the slider's pick)."""
    s = Scene(width, height)
    top = max([v for v in ours + ref if v is not None] + [1])
    lines = max(str(x).count("\n") + 1 for x in labels)
    c = Chart(s, labels, top, title=title, ylabel=ylabel, bottom=24 + 13 * lines)
    half = (c.x(1) - c.x(0)) * 0.32 if len(labels) > 1 else 20
    for i, (o, r) in enumerate(zip(ours, ref)):
        if o is None:
            s.text(c.x(i), c.y0 - 10, "--", size=12, anchor="middle", color="#d62728" if i == chosen else "#888",
                   bold=i == chosen)
            continue
        s.rect(c.x(i) - half, c.y(o), 2 * half, c.y0 - c.y(o), fill="#4c72b0",
               stroke="#d62728" if i == chosen else None, sw=3 if i == chosen else None)
        if r is not None:
            s.line([(c.x(i) - half - 3, c.y(r)), (c.x(i) + half + 3, c.y(r))], color="#000", w=2.5)
    c.legend(ours_label, "#4c72b0")
    if any(r is not None for r in ref):
        c.legend(ref_label, "#000")
    return s


# Fonts with Simplified Chinese glyphs, most common first (Linux, Windows, macOS).
# (A .ttc collection shows matplotlib its first face: Debian's fonts-noto-cjk reads as "Noto Sans CJK JP",
# which has the common Han characters too.)
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Noto Sans CJK JP", "WenQuanYi Micro Hei",
                "WenQuanYi Zen Hei", "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Heiti SC",
                "Arial Unicode MS")
_CJK_FILES = re.compile(r"cjk|wqy|wenquanyi|notosanssc|sourcehansans|msyh|simhei|pingfang|hiragino|stheiti", re.I)


@functools.cache
def cjk_font() -> str | None:
    """Make matplotlib draw Chinese with the first installed CJK font; None when there is none."""
    from matplotlib import font_manager, rcParams

    def installed():
        have = {f.name for f in font_manager.fontManager.ttflist}
        return next((f for f in CJK_FAMILIES if f in have), None)

    family = installed()
    if family is None:  # matplotlib's font cache predates the font: add the system's CJK files
        for path in font_manager.findSystemFonts():
            if _CJK_FILES.search(Path(path).name):
                font_manager.fontManager.addfont(path)
        family = installed()
    if family:
        rcParams["font.sans-serif"] = [family, *rcParams["font.sans-serif"]]
        rcParams["axes.unicode_minus"] = False  # CJK fonts often lack U+2212
    return family


def label(zh: str, en: str) -> str:
    """A matplotlib label in Chinese where a CJK font is installed, else in English (never tofu boxes).

    Browser pictures (``webviz``) need no such care: the browser finds a font for every character.
    """
    return zh if cjk_font() else en


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
