#!/usr/bin/env python3
"""生成课程的 Excalidraw 图（diagrams/*.excalidraw）。

Every diagram is a declarative list of nodes (Text / Box / Card / Zone) and
edges (Arrow).  The builder below turns that description into Excalidraw JSON:

* labels are text elements bound to their container (containerId <-> boundElements),
* arrows are bound to shapes at both ends (startBinding/endBinding <-> boundElements),
* a card (title strip + body) is one group, so it moves as one piece,
* ids, seeds and nonces derive from the element names, so output is byte-identical
  for the same input.

Usage:
    python diagrams/generate_diagrams.py           # write all .excalidraw files
    python diagrams/generate_diagrams.py --check   # exit 1 and list files that differ

Python 3.11 standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tcourse.indexing import grouped_pid  # noqa: E402  (the same mapping the kernels use)

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------
# Style
# ---------------------------------------------------------------------------
FONT_HAND = 5  # Excalifont: the only family Excalidraw draws CJK with (Xiaolai fallback)
FONT_CODE = 3  # Cascadia: monospace, used only for pure-ASCII code blocks
LINE_HEIGHT = {FONT_HAND: 1.25, FONT_CODE: 1.2}
BOUND_TEXT_PADDING = 5  # Excalidraw's own padding for text inside a container
INNER_PAD_X = 14  # what we keep free on each side of a label (>= BOUND_TEXT_PADDING)
INNER_PAD_Y = 10

# stroke, strong fill (card title strip), light fill (body)
PALETTE = {
    "blue": ("#1971c2", "#a5d8ff", "#e7f5ff"),
    "green": ("#2f9e44", "#b2f2bb", "#ebfbee"),
    "orange": ("#e8590c", "#ffd8a8", "#fff4e6"),
    "violet": ("#6741d9", "#d0bfff", "#f3f0ff"),
    "red": ("#e03131", "#ffc9c9", "#fff5f5"),
    "yellow": ("#f08c00", "#ffec99", "#fff9db"),
    "teal": ("#0c8599", "#99e9f2", "#e3fafc"),
    "gray": ("#495057", "#dee2e6", "#f8f9fa"),
}
INK = "#1e1e1e"
MUTED = "#868e96"
TIMESTAMP = 1767225600000  # fixed "updated" value (2026-01-01) keeps output deterministic


def is_wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def text_width(line: str, size: float, font: int) -> float:
    """Generous estimate of a rendered line width (CJK ~1.0em, Latin ~0.62em)."""
    w = 0.0
    for ch in line:
        if is_wide(ch):
            w += 1.0 * size
        elif font == FONT_CODE:
            w += 0.62 * size
        elif ch == " ":
            w += 0.4 * size
        elif ch.isupper() or ch in "mwMW@%&":
            w += 0.72 * size
        else:
            w += 0.6 * size
    return w


def measure(text: str, size: float, font: int) -> tuple[float, float]:
    lines = text.split("\n")
    width = max(text_width(line, size, font) for line in lines)
    height = len(lines) * size * LINE_HEIGHT[font]
    return width, height


def num(v: float) -> float | int:
    v = round(float(v), 2)
    return int(v) if v == int(v) else v


def stable_int(*parts: str) -> int:
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return int(h[:8], 16) % 2_000_000_000 + 1


# ---------------------------------------------------------------------------
# Declarative node types
# ---------------------------------------------------------------------------
@dataclass
class Text:
    """Free-standing text (titles, notes). x/y is the top-left corner, or the centre top if center=True."""

    id: str
    x: float
    y: float
    text: str
    size: int = 16
    color: str = INK
    center: bool = False
    font: int = FONT_HAND


@dataclass
class Box:
    """A shape with one bound label. h=None sizes the box to its label."""

    id: str
    x: float
    y: float
    w: float
    text: str
    color: str = "blue"
    h: float | None = None
    size: int = 16
    shape: str = "rectangle"
    fill: str = "light"  # light | strong | white
    font: int = FONT_HAND
    dashed: bool = False
    group: str | None = None
    align: str = "center"


@dataclass
class Card:
    """Title strip + body box, grouped. Arrows attach to the body (id) or title (id + '.title')."""

    id: str
    x: float
    y: float
    w: float
    title: str
    body: str
    color: str = "blue"
    h: float | None = None  # body height; None = fit the text
    size: int = 16
    title_size: int = 18
    font: int = FONT_HAND
    align: str = "center"  # body label alignment; "left" suits code


@dataclass
class Zone:
    """A large background area with its title written in the top-left corner."""

    id: str
    x: float
    y: float
    w: float
    h: float
    title: str
    color: str = "gray"
    size: int = 20
    dashed: bool = True


@dataclass
class Arrow:
    """Arrow bound to two shapes. side: None = choose from geometry, or 'right'/'left'/'down'/'up'."""

    src: str
    dst: str
    side: str | None = None
    dashed: bool = False
    both: bool = False
    color: str = INK


@dataclass
class Diagram:
    stem: str
    title: str
    subtitle: str
    footer: str
    width: int
    nodes: list = field(default_factory=list)
    edges: list = field(default_factory=list)


# ---------------------------------------------------------------------------
# Builder: declarative description -> Excalidraw elements
# ---------------------------------------------------------------------------
class LayoutError(ValueError):
    pass


class Builder:
    def __init__(self, stem: str):
        self.stem = stem
        self.elements: list[dict] = []
        self.by_id: dict[str, dict] = {}

    def _eid(self, name: str) -> str:
        return f"{self.stem[:2]}-{name}"

    def _base(self, name: str, etype: str, x, y, w, h, stroke, bg, **extra) -> dict:
        eid = self._eid(name)
        if eid in self.by_id:
            raise LayoutError(f"{self.stem}: duplicate id {eid}")
        el = {
            "id": eid,
            "type": etype,
            "x": num(x),
            "y": num(y),
            "width": num(w),
            "height": num(h),
            "angle": 0,
            "strokeColor": stroke,
            "backgroundColor": bg,
            "fillStyle": "solid",
            "strokeWidth": 2,
            "strokeStyle": "solid",
            "roughness": 1,
            "opacity": 100,
            "groupIds": [],
            "frameId": None,
            "roundness": None,
            "seed": stable_int(self.stem, eid, "seed"),
            "version": 1,
            "versionNonce": stable_int(self.stem, eid, "nonce"),
            "isDeleted": False,
            "boundElements": [],
            "updated": TIMESTAMP,
            "link": None,
            "locked": False,
        }
        el.update(extra)
        self.elements.append(el)
        self.by_id[eid] = el
        return el

    def text_el(self, name, x, y, text, size, color, font, align="left", container=None, valign="top"):
        w, h = measure(text, size, font)
        return self._base(
            name, "text", x, y, w, h, color, "transparent",
                        text=text,
            fontSize=size,
            fontFamily=font,
            textAlign=align,
            verticalAlign=valign,
            containerId=container["id"] if container else None,
            originalText=text,
            autoResize=True,
            lineHeight=LINE_HEIGHT[font],
        )

    def shape(self, name, x, y, w, h, text, color, fill, size, font, shape="rectangle",
              dashed=False, groups=(), text_color=INK, align="center"):
        stroke, strong, light = PALETTE[color]
        bg = {"light": light, "strong": strong, "white": "#ffffff", "none": "transparent"}[fill]
        tw, th = measure(text, size, font) if text else (0, 0)
        if h is None:
            h = th + 2 * INNER_PAD_Y + 6
        # usable area inside the shape (a diamond/ellipse only offers its inner rectangle)
        inner_w, inner_h = (w, h) if shape == "rectangle" else (w / 2 ** 0.5, h / 2 ** 0.5)
        if text and (tw + 2 * INNER_PAD_X > inner_w or th + 2 * BOUND_TEXT_PADDING > inner_h):
            raise LayoutError(
                f"{self.stem}: label of {name!r} needs {tw + 2 * INNER_PAD_X:.0f}x"
                f"{th + 2 * BOUND_TEXT_PADDING:.0f}, box inner area is {inner_w:.0f}x{inner_h:.0f}")
        el = self._base(
            name, shape, x, y, w, h, stroke, bg,
            strokeStyle="dashed" if dashed else "solid",
            groupIds=list(groups),
            roundness={"type": 3} if shape == "rectangle" else {"type": 2},
        )
        if text:
            # same placement Excalidraw computes for bound text, so nothing jumps on first edit
            tx = x + (w - tw) / 2 if align == "center" else x + BOUND_TEXT_PADDING
            t = self.text_el(name + ".label", tx, y + (h - th) / 2, text, size,
                             text_color, font, align=align, container=el, valign="middle")
            t["groupIds"] = list(groups)
            el["boundElements"].append({"id": t["id"], "type": "text"})
        return el

    # -- node kinds ---------------------------------------------------------
    def add(self, node):
        if isinstance(node, Text):
            w, _ = measure(node.text, node.size, node.font)
            x = node.x - w / 2 if node.center else node.x
            self.text_el(node.id, x, node.y, node.text, node.size, node.color, node.font,
                         align="center" if node.center else "left")
        elif isinstance(node, Box):
            groups = [self._eid("g." + node.group)] if node.group else []
            self.shape(node.id, node.x, node.y, node.w, node.h, node.text, node.color, node.fill,
                       node.size, node.font, node.shape, node.dashed, groups, align=node.align)
        elif isinstance(node, Card):
            group = [self._eid("g." + node.id)]
            _, th = measure(node.title, node.title_size, FONT_HAND)
            head_h = th + 2 * INNER_PAD_Y
            self.shape(node.id + ".title", node.x, node.y, node.w, head_h, node.title, node.color,
                       "strong", node.title_size, FONT_HAND, groups=group)
            self.shape(node.id, node.x, node.y + head_h, node.w, node.h, node.body, node.color,
                       "light", node.size, node.font, groups=group, align=node.align)
        elif isinstance(node, Zone):
            stroke, _, light = PALETTE[node.color]
            zone = self._base(node.id, "rectangle", node.x, node.y, node.w, node.h, stroke, light,
                              strokeStyle="dashed" if node.dashed else "solid",
                              strokeWidth=1, roundness={"type": 3}, opacity=100)
            zone["groupIds"] = []
            self.text_el(node.id + ".title", node.x + 16, node.y + 12, node.title, node.size,
                         stroke, FONT_HAND)
        else:  # pragma: no cover - description error
            raise LayoutError(f"unknown node {node!r}")

    def arrow(self, edge: Arrow, index: int):
        a = self.by_id[self._eid(edge.src)]
        b = self.by_id[self._eid(edge.dst)]
        gap = 6
        ax0, ay0, ax1, ay1 = a["x"], a["y"], a["x"] + a["width"], a["y"] + a["height"]
        bx0, by0, bx1, by1 = b["x"], b["y"], b["x"] + b["width"], b["y"] + b["height"]
        side = edge.side
        if side is None:
            if bx0 >= ax1:
                side = "right"
            elif bx1 <= ax0:
                side = "left"
            elif by0 >= ay1:
                side = "down"
            elif by1 <= ay0:
                side = "up"
            else:
                raise LayoutError(f"{self.stem}: {edge.src} and {edge.dst} overlap")

        def mid(lo0, hi0, lo1, hi1):
            lo, hi = max(lo0, lo1), min(hi0, hi1)
            c = ((lo0 + hi0) / 2 + (lo1 + hi1) / 2) / 2
            return min(max(c, lo + 10), hi - 10) if lo + 20 <= hi else None

        if side in ("right", "left"):
            y = mid(ay0, ay1, by0, by1)
            sy, ey = (y, y) if y is not None else ((ay0 + ay1) / 2, (by0 + by1) / 2)
            sx, ex = (ax1 + gap, bx0 - gap) if side == "right" else (ax0 - gap, bx1 + gap)
        else:
            x = mid(ax0, ax1, bx0, bx1)
            sx, ex = (x, x) if x is not None else ((ax0 + ax1) / 2, (bx0 + bx1) / 2)
            sy, ey = (ay1 + gap, by0 - gap) if side == "down" else (ay0 - gap, by1 + gap)
        name = f"arrow{index:02d}.{edge.src}-{edge.dst}"
        el = self._base(
            name, "arrow", sx, sy, abs(ex - sx), abs(ey - sy), edge.color, "transparent",
            strokeStyle="dashed" if edge.dashed else "solid",
            roundness={"type": 2},
                        points=[[0, 0], [num(ex - sx), num(ey - sy)]],
            lastCommittedPoint=None,
            startBinding={"elementId": a["id"], "focus": 0, "gap": gap},
            endBinding={"elementId": b["id"], "focus": 0, "gap": gap},
            startArrowhead="arrow" if edge.both else None,
            endArrowhead="arrow",
            elbowed=False,
        )
        a["boundElements"].append({"id": el["id"], "type": "arrow"})
        b["boundElements"].append({"id": el["id"], "type": "arrow"})

    def check_no_overlap(self):
        texts = [e for e in self.elements if e["type"] == "text"]
        for i, s in enumerate(texts):
            for t in texts[i + 1:]:
                if (s["x"] < t["x"] + t["width"] and t["x"] < s["x"] + s["width"]
                        and s["y"] < t["y"] + t["height"] and t["y"] < s["y"] + s["height"]):
                    raise LayoutError(f"{self.stem}: labels overlap: {s['id']} / {t['id']}")


def build(d: Diagram) -> dict:
    b = Builder(d.stem)
    b.add(Text("title", d.width / 2, 24, d.title, size=36, center=True))
    b.add(Text("subtitle", d.width / 2, 78, d.subtitle, size=20, color=MUTED, center=True))
    for node in d.nodes:
        b.add(node)
    for i, edge in enumerate(d.edges):
        b.arrow(edge, i)
    bottom = max(e["y"] + e["height"] for e in b.elements)
    b.add(Text("footer", d.width / 2, bottom + 28, d.footer, size=14, color=MUTED, center=True))
    b.check_no_overlap()
    return {
        "type": "excalidraw",
        "version": 2,
        "source": "triton-course/diagrams/generate_diagrams.py",
        "elements": b.elements,
        "appState": {"gridSize": 20, "viewBackgroundColor": "#ffffff"},
        "files": {},
    }


def dump(doc: dict) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"


# ---------------------------------------------------------------------------
# The diagrams
# ---------------------------------------------------------------------------
def roadmap() -> Diagram:
    stages = [
        ("阶段 1 · GPU 基础", "复习 CUDA block warp\n理解 GPU memory hierarchy", "gray"),
        ("阶段 2 · 环境", "pip install triton\n确认 PyTorch CUDA 环境", "teal"),
        ("阶段 3 · Vector Add", "program_id arange mask\n掌握 launch grid", "blue"),
        ("阶段 4 · Softmax", "一行一个 program\n用 tl.max tl.sum 减少访存", "green"),
        ("阶段 5 · Matmul", "BLOCK_M/N/K tl.dot\nprogram 分组和 L2 复用", "orange"),
        ("阶段 6 · Attention", "QK softmax PV 分块\n理解 FlashAttention 风格", "violet"),
    ]
    nodes, edges = [], []
    y = 140
    for i, (title, body, color) in enumerate(stages):
        nodes.append(Card(f"stage{i}", 60, y, 420, title, body, color, h=72))
        if i:
            edges.append(Arrow(f"stage{i - 1}", f"stage{i}.title"))
        y += 36 + 72 + 40
    checks = [
        "会从 PyTorch wrapper 调用 kernel",
        "能解释 grid lambda 和 meta-parameters",
        "会画 program 对应的数据 block",
        "知道 mask 防越界和 constexpr 的作用",
        "会用 triton.testing.do_bench 或 profiler",
        "比较 baseline、Triton、torch 结果",
    ]
    zone_h = 60 + len(checks) * 92 + 10
    nodes.append(Zone("accept", 580, 140, 560, zone_h, "学习验收标准", "yellow", size=22, dashed=False))
    for i, c in enumerate(checks):
        nodes.append(Box(f"check{i}", 610, 200 + i * 92, 500, c, "yellow",
                         h=64, fill="white"))
    nodes.append(Text("accept.note", 600, 140 + zone_h + 14,
                      "每完成一个阶段，回到这里逐条自查", size=16, color=MUTED))
    return Diagram("00_triton_learning_roadmap", "Triton 入门学习路线",
                   "从第一个 @triton.jit 到能解释 matmul、softmax、attention kernel",
                   "学习路线 · Excalidraw 源文件", 1200, nodes, edges)


def programming_model() -> Diagram:
    nodes = [
        Zone("host", 40, 140, 440, 470, "Host 侧", "blue", size=24),
        Box("wrapper", 80, 200, 360, "Python wrapper\n准备 torch tensors\n计算 grid", "blue", h=100),
        Box("launch", 80, 360, 360, "kernel[grid](args,\nBLOCK_SIZE=..., num_warps=...)", "blue",
            h=90, fill="strong"),
        Zone("kernel", 540, 140, 820, 470, "Kernel 侧", "green", size=24),
        Box("jit", 580, 200, 330, "@triton.jit\n函数被 JIT 编译为 GPU kernel", "green", h=100, fill="strong"),
        Box("lowering", 950, 200, 380, "compiler lowering\nTTIR -> TTGIR -> LLVM/PTX/AMDGPU", "gray", h=100),
        Box("pid", 580, 360, 330, "tl.program_id(axis)\n当前 program 在 grid 中的位置", "green", h=90),
        Box("arange", 950, 360, 380, "tl.arange / pointer arithmetic\n构造 block 内 offsets", "green", h=90),
        Box("data", 950, 490, 380, "数据与计算\ntl.load / tl.store\nmask + other 处理边界", "teal", h=100),
        Box("dot", 580, 490, 330, "tl.dot / reductions / math ops\n在 block tensor 上表达计算", "teal", h=100),
        Zone("cuda", 40, 650, 1320, 230, "和 CUDA 的映射", "orange", size=24),
        Card("cthread", 80, 710, 340, "CUDA thread", "细粒度线程\n显式 threadIdx/blockIdx", "gray", h=90),
        Card("tprog", 500, 710, 360, "Triton program", "一个 block-level 程序\n一次处理向量或矩阵 tile",
             "orange", h=90),
        Card("meta", 940, 710, 380, "meta-parameters", "BLOCK_M/N/K num_warps num_stages\n决定编译特化和性能",
             "violet", h=90),
    ]
    edges = [
        Arrow("wrapper", "launch"),
        Arrow("launch", "pid", side="right"),
        Arrow("jit", "lowering"),
        Arrow("jit", "pid"),
        Arrow("pid", "arange"),
        Arrow("arange", "data"),
        Arrow("data", "dot"),
        Arrow("cthread", "tprog", both=True, dashed=True),
        Arrow("meta", "tprog"),
    ]
    return Diagram("01_triton_programming_model", "Triton 编程模型",
                   "Triton program 是比 CUDA thread 更粗的 block-level 单元",
                   "编程模型 · Excalidraw 源文件", 1400, nodes, edges)


def vector_add_softmax() -> Diagram:
    lx, rx, w = 60, 720, 520
    nodes = [
        Card("vadd", lx, 140, w, "Vector Add", "grid = ceildiv(N, BLOCK_SIZE)\n每个 program 处理一段连续元素",
             "blue", h=70, title_size=22),
        Box("offs", lx, 290, w, "offsets = pid * BLOCK_SIZE + arange", "blue", h=56, fill="white"),
        Box("mask", lx, 386, w, "mask = offsets < N", "blue", h=56, fill="white"),
        Box("loadxy", lx, 482, w, "tl.load x y", "blue", h=56, fill="white"),
        Box("add", lx, 578, w, "z = x + y", "blue", h=56, fill="white"),
        Box("store", lx, 674, w, "tl.store mask", "blue", h=56, fill="white"),
        Card("smax", rx, 140, w, "Fused Softmax", "一个 program 处理一行\nBLOCK_SIZE 取 next_power_of_2",
             "green", h=70, title_size=22),
        Box("loadrow", rx, 290, w, "load row\n(mask = cols < n_cols, other=-inf)", "green", h=72, fill="white"),
        Box("submax", rx, 402, w, "x - max(x)", "green", h=56, fill="white"),
        Box("norm", rx, 498, w, "exp / sum / normalize", "green", h=56, fill="white"),
        Box("fused", rx, 594, w, "只读写一次 global memory\n比 PyTorch 多 op 路径更省 HBM", "green", h=80,
            fill="strong"),
        Card("common", 300, 800, 700, "共同检查点",
             "program_id 是否映射到正确数据块\nBLOCK_SIZE 是否影响 occupancy 和寄存器", "orange", h=80,
             title_size=22),
    ]
    edges = [
        Arrow("vadd", "offs"), Arrow("offs", "mask"), Arrow("mask", "loadxy"),
        Arrow("loadxy", "add"), Arrow("add", "store"),
        Arrow("smax", "loadrow"), Arrow("loadrow", "submax"), Arrow("submax", "norm"),
        Arrow("norm", "fused"),
        Arrow("store", "common.title", side="down", dashed=True),
        Arrow("fused", "common.title", side="down", dashed=True),
    ]
    return Diagram("02_triton_vector_add_softmax", "Vector Add 与 Fused Softmax",
                   "先用两个基础 kernel 建立 block tensor 和 mask 心智模型",
                   "Vector Add 与 Softmax · Excalidraw 源文件", 1300, nodes, edges)


def matmul_tile_flow() -> Diagram:
    kloop = ("for k in range(0, K, BLOCK_K):\n"
             "  a = tl.load(a_ptrs, mask=...)\n"
             "  b = tl.load(b_ptrs, mask=...)\n"
             "  acc += tl.dot(a, b)\n"
             "  a_ptrs += BLOCK_K * stride_ak\n"
             "  b_ptrs += BLOCK_K * stride_bk")
    nodes = [
        Card("groupm", 40, 140, 320, "GROUP_M", "让相邻 program 复用 B tile\n改善 L2 locality", "violet", h=80),
        Card("math", 440, 140, 1080, "一个 program 算一个 C tile",
             "grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)，每个 program 只写自己的 C tile\n"
             "acc 沿 K 维做 cdiv(K, BLOCK_K) 次 tl.dot 累加，最后一次性写回", "gray", h=70),
        Card("pid", 40, 330, 320, "pid_m, pid_n", "决定 A/B/C 的指针偏移", "gray", h=60),
        Card("bblk", 440, 330, 340, "B block", "BLOCK_K x BLOCK_N", "teal", h=60),
        Card("ablk", 40, 520, 320, "A block", "BLOCK_M x BLOCK_K", "blue", h=140),
        Card("kloop", 440, 520, 340, "K 维循环", kloop, "orange", h=140, size=15, font=FONT_CODE, align="left"),
        Card("acc", 860, 520, 260, "accumulator", "BLOCK_M x BLOCK_N\nfloat32", "green", h=140),
        Card("ctile", 1200, 520, 320, "输出 tile", "program_id 映射到 C 的\nBLOCK_M x BLOCK_N tile\ntl.store(c_ptrs, mask=...)",
             "red", h=140),
        Zone("qa", 40, 760, 1480, 220, "常见面试追问", "yellow", size=22),
    ]
    qa = [
        ("为什么 accumulator 用 fp32", "减少 K 维累加误差"),
        ("为什么要分组 program order", "提高 L2 cache 复用"),
        ("BLOCK_K 过大或过小分别怎样", "寄存器压力 vs 复用不足"),
        ("mask 在非整除 M/N/K 时如何保护", "load/store 都要考虑"),
    ]
    for i, (q, a) in enumerate(qa):
        nodes.append(Card(f"qa{i}", 70 + i * 362, 820, 336, q, a, "yellow", h=60, title_size=17))
    edges = [
        Arrow("groupm", "pid.title"),
        Arrow("pid", "bblk"),
        Arrow("pid", "ablk.title"),
        Arrow("bblk", "kloop.title"),
        Arrow("ablk", "kloop"),
        Arrow("kloop", "acc"),
        Arrow("acc", "ctile"),
    ]
    return Diagram("03_triton_matmul_tile_flow", "Triton Matmul Tile 数据流",
                   "理解 BLOCK_M/N/K、tl.dot、program grouping 和 L2 复用",
                   "Matmul tile 数据流 · Excalidraw 源文件", 1560, nodes, edges)


def autotune_debug() -> Diagram:
    w, h = 340, 70
    nodes = [
        Card("ref", 60, 150, w, "1 正确性", "torch reference\n小 shape assert_close", "green", h=h),
        Card("bench", 480, 150, w, "2 benchmark", "triton.testing.do_bench\nwarmup + repeat", "blue", h=h),
        Card("tune", 900, 150, w, "3 autotune", "triton.Config\nkey 决定何时重新搜索", "orange", h=h),
        Card("prof", 900, 380, w, "4 profile", "Nsight/Proton\n看内存、寄存器、occupancy", "violet", h=h),
        Card("dbg", 60, 380, w, "5 debug", "static_print device_print\nTriton interpreter", "teal", h=h),
        Text("loop.note", 650, 300, "证据闭环：\n每次改 kernel 都回到 1，\n用数字说话", size=18, color=MUTED,
             center=True),
        Zone("dont", 60, 560, 1180, 210, "不要犯的错", "red", size=22, dashed=False),
    ]
    donts = [
        ("只测整除 shape", "尾部 mask 没覆盖"),
        ("autotune kernel 有副作用", "没有 reset_to_zero 或 restore_value"),
        ("只看平均耗时", "忽略 p95、冷启动、cache 状态"),
    ]
    for i, (t, b) in enumerate(donts):
        nodes.append(Card(f"dont{i}", 90 + i * 380, 620, 360, t, b, "red", h=60))
    edges = [
        Arrow("ref", "bench"), Arrow("bench", "tune"), Arrow("tune", "prof.title"),
        Arrow("prof", "dbg", side="left"), Arrow("dbg.title", "ref", side="up"),
    ]
    return Diagram("04_triton_autotune_debug_workflow", "Triton Autotune 与 Debug 工作流",
                   "正确性、benchmark、autotune、profile 要按证据闭环",
                   "Autotune、debug、profile · Excalidraw 源文件", 1300, nodes, edges)


def interview_map() -> Diagram:
    nodes = [
        Zone("define", 40, 140, 640, 330, "一句话定义", "blue", size=24),
        Box("def0", 70, 200, 580, "Triton 是 Python-based GPU kernel DSL 和 compiler", "blue", h=70,
            fill="strong", size=17),
        Box("def1", 70, 290, 580, "让用户用 block-level program 写 DNN 自定义算子", "blue", h=70,
            fill="white", size=17),
        Box("def2", 70, 380, 580, "常用于 PyTorch 生态中的 fusion 和 matmul/attention 优化", "blue", h=70,
            fill="white", size=17),
        Zone("mech", 720, 140, 700, 330, "必须讲清的机制", "green", size=24),
        Card("m0", 750, 200, 310, "program_id 和 grid", "决定数据块映射", "green", h=56),
        Card("m1", 1080, 200, 310, "mask 和 pointer arithmetic", "决定边界安全", "green", h=56),
        Card("m2", 750, 330, 310, "meta-parameters", "决定编译特化和搜索空间", "green", h=56),
        Card("m3", 1080, 330, 310, "tl.dot / reductions", "决定 block tensor 计算", "green", h=56),
        Zone("cmp", 40, 510, 640, 470, "常见比较题", "orange", size=24),
        Card("c0", 70, 570, 580, "vs CUDA", "Triton 更少样板 更适合块级 DNN kernel\nCUDA 控制更细", "orange", h=70),
        Card("c1", 70, 700, 580, "vs TileLang", "Triton 生态更成熟\nTileLang 更强调 tiled dataflow + TVM 衔接",
             "orange", h=70),
        Card("c2", 70, 830, 580, "vs torch.compile", "Inductor 可生成 Triton\n手写 Triton 用于更可控的热点 kernel",
             "orange", h=70),
        Zone("tmpl", 720, 510, 700, 470, "回答模板", "violet", size=24),
    ]
    steps = ["先画数据块", "再讲 program/grid", "再讲 tl.load/tl.store/tl.dot", "最后讲调优证据和边界条件"]
    for i, s in enumerate(steps):
        nodes.append(Box(f"t{i}", 820, 570 + i * 100, 500, s, "violet", h=60, fill="white" if i else "strong"))
    edges = [Arrow(f"t{i}", f"t{i + 1}") for i in range(3)]
    return Diagram("05_triton_interview_map", "Triton 面试速查图", "把 Triton 学习收束成可讲述的题目框架",
                   "面试速查 · Excalidraw 源文件", 1460, nodes, edges)


def groupm_order() -> Diagram:
    M = N = 6
    G = 3
    wave = 9  # programs that run at the same time in this toy example
    cell = 60
    nodes, edges = [], []

    def grid(prefix, x0, y0, order, color, title):
        nodes.append(Text(f"{prefix}.head", x0 + N * cell / 2, y0 - 96, title, size=22, center=True))
        # B column blocks above the grid, A row blocks left of it
        loaded_a = {order[p][0] for p in range(wave)}
        loaded_b = {order[p][1] for p in range(wave)}
        for n in range(N):
            nodes.append(Box(f"{prefix}.b{n}", x0 + n * cell + 4, y0 - 52, cell - 8, f"B{n}", "teal", h=40,
                             fill="strong" if n in loaded_b else "white", size=14))
        for m in range(M):
            nodes.append(Box(f"{prefix}.a{m}", x0 - 62, y0 + m * cell + 4, 52, f"A{m}", "blue", h=cell - 8,
                             fill="strong" if m in loaded_a else "white", size=14))
        pos = {mn: p for p, mn in order.items()}
        for m in range(M):
            for n in range(N):
                p = pos[(m, n)]
                nodes.append(Box(f"{prefix}.c{m}{n}", x0 + n * cell, y0 + m * cell, cell, str(p), color, h=cell,
                                 fill="strong" if p < wave else "white", size=18))
        return len(loaded_a), len(loaded_b)

    row_major = {p: (p // N, p % N) for p in range(M * N)}
    grouped = {p: grouped_pid(p, M, N, G) for p in range(M * N)}
    y0 = 260
    ra, rb = grid("rm", 140, y0, row_major, "orange", "行优先顺序（不分组）")
    ga, gb = grid("gm", 700, y0, grouped, "green", f"GROUP_M = {G} 分组顺序")
    ny = y0 + M * cell + 30
    nodes.append(Box("rm.cost", 60, ny, 520,
                     f"前 {wave} 个 program 读 A 行块 {ra} 个 + B 列块 {rb} 个\n= {ra + rb} 块", "orange", h=70))
    nodes.append(Box("gm.cost", 620, ny, 520,
                     f"前 {wave} 个 program 读 A 行块 {ga} 个 + B 列块 {gb} 个\n= {ga + gb} 块，更多复用留在 L2",
                     "green", h=70))
    code = ("num_pid_in_group = GROUP_M * num_pid_n\n"
            "group_id = pid // num_pid_in_group\n"
            "first_pid_m = group_id * GROUP_M\n"
            "group_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n"
            "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m\n"
            "pid_n = (pid % num_pid_in_group) // group_size_m")
    nodes.append(Card("code", 280, ny + 110, 640, "pid -> (pid_m, pid_n) 的分组映射", code, "gray", size=16,
                      font=FONT_CODE, align="left"))
    nodes.append(Text("legend", 60, 130,
                      f"C 被切成 {M} x {N} 个 tile，格子里的数字是 pid（launch 顺序）；"
                      f"深色 = 同时在跑的前 {wave} 个 program 及其读取的 A/B 块", size=16, color=MUTED))
    return Diagram("06_triton_groupm_program_order", "GROUP_M：program 顺序与 L2 复用",
                   "同样的 tile，换一种 pid 顺序，同一批 program 读到的 A/B 块更少",
                   "GROUP_M program 顺序 · Excalidraw 源文件", 1200, nodes, edges)


def flash_attention_loop() -> Diagram:
    nodes = [
        Card("prog", 40, 150, 460, "一个 program", "负责一个 Q block：BLOCK_M 行 x d\n"
             "grid = (cdiv(N_CTX, BLOCK_M), batch * heads)", "blue", h=80),
        Card("hbm", 700, 150, 600, "为什么省 HBM：QK、softmax、PV 在同一个 kernel 里分块完成",
             "s、p 只在片上，不写回 HBM\n不会出现 N_CTX x N_CTX 矩阵", "violet", h=80),
        Box("loadq", 40, 360, 460, "q = tl.load(Q block)\n只读一次，整个循环留在片上", "blue", h=100),
        Card("state", 40, 560, 460, "片上状态（fp32）", "m_i = -inf（行最大值）\nl_i = 0（行和）\n"
             "acc = 0（BLOCK_M x d）", "gray", h=100),
        Zone("loop", 540, 300, 900, 430, "for start_n in range(0, N_CTX, BLOCK_N)：按 K/V block 循环", "orange",
             size=20),
        Box("loadkv", 580, 360, 380, "k, v = tl.load(K/V block)\nBLOCK_N 行 x d", "orange", h=100),
        Box("qk", 1020, 360, 380, "s = tl.dot(q, tl.trans(k)) * scale\ncausal 时用 mask 置 -inf", "orange",
            h=100),
        Box("online", 1020, 540, 380, "online softmax\nm_new = max(m_i, rowmax(s))\n"
            "p = exp(s - m_new)\nalpha = exp(m_i - m_new)", "red", h=150),
        Box("pv", 580, 540, 380, "l_i = l_i * alpha + rowsum(p)\nacc = acc * alpha + tl.dot(p, v)\nm_i = m_new",
            "green", h=150),
        Box("out", 580, 790, 380, "循环结束：o = acc / l_i\ntl.store(O block)", "violet", h=80, fill="strong"),
    ]
    edges = [
        Arrow("prog", "loadq"), Arrow("loadq", "loadkv"), Arrow("state", "pv", both=True, dashed=True),
        Arrow("loadkv", "qk"), Arrow("qk", "online"), Arrow("online", "pv"), Arrow("pv", "loadkv", side="up"),
        Arrow("pv", "out", side="down"),
    ]
    return Diagram("07_triton_flash_attention_loop", "FlashAttention 风格的 block 循环",
                   "一个 program 持有一个 Q block，逐块扫过 K/V，用 online softmax 累加输出",
                   "FlashAttention block 循环 · Excalidraw 源文件", 1480, nodes, edges)


DIAGRAMS = [roadmap, programming_model, vector_add_softmax, matmul_tile_flow, autotune_debug,
            interview_map, groupm_order, flash_attention_loop]


def render_all() -> dict[str, str]:
    out = {}
    for make in DIAGRAMS:
        d = make()
        out[d.stem + ".excalidraw"] = dump(build(d))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: diagrams/)")
    args = ap.parse_args(argv)
    files = render_all()
    if args.check:
        stale = [n for n, text in files.items()
                 if not (args.out / n).is_file() or (args.out / n).read_text(encoding="utf-8") != text]
        for n in stale:
            print(f"out of date: {args.out / n}", file=sys.stderr)
        if stale:
            print("run: python diagrams/generate_diagrams.py", file=sys.stderr)
            return 1
        print(f"{len(files)} diagrams up to date")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for n, text in files.items():
        (args.out / n).write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {args.out / n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
