"""Pictures that redraw in the browser, with no kernel: the data of every slider position is computed
here, in Python, and ``web/panel.js`` (inlined into the output, no CDN, no server) draws it as SVG.

    p = webviz.Panel(BLOCK_SIZE=[256, 1024], num_warps=[4, 8], value={"BLOCK_SIZE": 1024})
    p.picture(coverage_scene, "BLOCK_SIZE")            # coverage_scene(BLOCK_SIZE) -> Scene
    p.picture(chart_scene, overlay=(ring_scene, "BLOCK_SIZE", "num_warps"))
    p.text(lambda BLOCK_SIZE, num_warps: "...", "BLOCK_SIZE", "num_warps")
    p                                                  # a text/html output; the same in the book

Each picture or text names the controls it depends on, so only those combinations are stored.
"""
from __future__ import annotations

import html
import itertools
import json
import math
import uuid
from pathlib import Path

JS = Path(__file__).with_name("web") / "panel.js"
TAB10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
         "#bcbd22", "#17becf"]


class Scene:
    """Shapes in pixel coordinates of a ``w x h`` SVG (y grows downwards)."""

    def __init__(self, w: float, h: float):
        self.w, self.h, self.items = w, h, []

    def rect(self, x, y, w, h, fill=None, stroke=None, sw=None, op=None, hatch=False, tip=None):
        self.items.append(_clean({"t": "r", "x": _r(x), "y": _r(y), "w": _r(w), "h": _r(h), "fill": fill,
                                  "stroke": stroke, "sw": sw, "op": op, "hatch": hatch or None, "tip": tip}))

    def text(self, x, y, s, size=12, anchor="start", color=None, bold=False, rot=None):
        self.items.append(_clean({"t": "t", "x": _r(x), "y": _r(y), "s": str(s), "size": size,
                                  "anchor": anchor, "color": color, "bold": bold or None, "rot": rot}))

    def line(self, pts, color=None, w=None, dash=None):
        self.items.append(_clean({"t": "l", "pts": [[_r(x), _r(y)] for x, y in pts], "color": color,
                                  "w": w, "dash": dash}))

    def circle(self, x, y, r, fill=None, stroke=None, sw=None, tip=None):
        self.items.append(_clean({"t": "c", "x": _r(x), "y": _r(y), "r": r, "fill": fill, "stroke": stroke,
                                  "sw": sw, "tip": tip}))

    def grid(self, x, y, cw, ch, cols, cells, pal, gap=0.5):
        """``cells`` row-major: ``v >= 0`` coloured ``pal[v % len(pal)]``, ``-2`` a masked lane, ``-1`` empty.

        Stored run-length encoded (``[value, count]`` pairs): a 256 x 256 tile map is a few runs per row.
        """
        runs: list[list[int]] = []
        for v in cells:
            v = int(v)
            if runs and runs[-1][0] == v:
                runs[-1][1] += 1
            else:
                runs.append([v, 1])
        self.items.append({"t": "g", "x": _r(x), "y": _r(y), "cw": cw, "ch": ch, "cols": cols, "runs": runs,
                           "pal": pal, "gap": gap})

    def frame(self) -> dict:
        return {"w": _r(self.w), "h": _r(self.h), "items": self.items}

    def __repr__(self) -> str:
        return f"webviz.Scene({self.w:g}x{self.h:g}, {len(self.items)} shapes)"

    def _repr_html_(self) -> str:  # a scene on its own: a panel without sliders
        return Panel().picture(lambda: self)._repr_html_()


def _r(v):
    return round(float(v), 1)


def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


def _key(indices) -> str:
    """The lookup key panel.js builds: the index of each dependency's chosen option, joined by '|'."""
    return "|".join(str(i) for i in indices)


class Panel:
    """Sliders (one per row) over pictures and text lines, all precomputed; ``_repr_html_`` shows it."""

    def __init__(self, *, value: dict | None = None, labels: dict | None = None, **controls):
        value, labels = value or {}, labels or {}
        self.controls = {}
        for name, options in controls.items():
            options = list(options)
            v = value.get(name, options[0])
            if v not in options:
                raise ValueError(f"{name}={v!r} is not one of {options}")
            self.controls[name] = {"name": name, "label": labels.get(name, name), "index": options.index(v),
                                   "shown": [str(o).replace("\n", " ") for o in options], "options": options}
        self.views: list[dict] = []

    def _table(self, fn, deps, convert) -> dict:
        unknown = [d for d in deps if d not in self.controls]
        if unknown:
            raise KeyError(f"no control named {unknown}")
        frames = {}
        options = [self.controls[d]["options"] for d in deps]
        for idx in itertools.product(*(range(len(o)) for o in options)):
            frames[_key(idx)] = convert(fn(**{d: o[i] for d, o, i in zip(deps, options, idx)}))
        return {"deps": list(deps), "frames": frames}

    def picture(self, fn, *deps: str, overlay: tuple = ()):
        """``fn(**deps) -> Scene``; ``overlay=(fn2, *deps2)`` draws ``fn2``'s shapes on top (same size)."""
        layers = [self._table(fn, deps, Scene.frame)]
        if overlay:
            layers.append(self._table(overlay[0], overlay[1:], Scene.frame))
        self.views.append({"kind": "svg", "layers": layers})
        return self

    def text(self, fn, *deps: str):
        """``fn(**deps) -> str``: a line (or a few) under the pictures."""
        self.views.append({"kind": "text", **self._table(fn, deps, str)})
        return self

    def __repr__(self) -> str:  # the text/plain of the output: stable, no object address
        return f"webviz.Panel({', '.join(self.controls) or 'no controls'}; {len(self.views)} views)"

    def spec(self) -> dict:
        """What panel.js gets: each control's shown labels and start index, each view's frames by index key."""
        used = {d for v in self.views for table in v.get("layers", [v]) for d in table["deps"]}
        idle = [name for name in self.controls if name not in used]
        if idle:
            raise ValueError(f"sliders {idle} change no picture or text of this panel: drop them or draw them")
        controls = [{k: c[k] for k in ("name", "label", "index", "shown")} for c in self.controls.values()]
        return {"controls": controls, "views": self.views}

    def _repr_html_(self) -> str:
        return page_fragment(self.spec())

    def show(self):
        from IPython.display import display

        display(self)


def page_fragment(spec: dict) -> str:
    """The HTML of one panel: a fallback line, the data as JSON and the drawing code, all inline."""
    pid = f"tcp-{uuid.uuid4().hex[:12]}"
    data = json.dumps(spec, ensure_ascii=False, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")
    return (f'<div class="tcourse-panel" id="{pid}">'
            f'<div class="tcp-fallback">{html.escape("交互图需要 JavaScript：在 JupyterLab 里运行本单元，或打开课程网页。")}</div>'
            f'<script type="application/json" class="tcp-data">{data}</script>'
            f"<script>{JS.read_text(encoding='utf-8')}\n"
            "(function (s) { var root = s.parentNode;"
            " window.tcoursePanel.mount(root, JSON.parse(root.querySelector('.tcp-data').textContent));"
            " })(document.currentScript);</script></div>")


# ----------------------------------------------------------------------------------------------------
# A small chart on a Scene: categorical x (equally spaced, so 1000 and 1024 never overlap), linear y.
# ----------------------------------------------------------------------------------------------------
def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = [first]
    while ticks[-1] < hi - step * 1e-9:  # the last tick is at or above hi, so nothing is drawn off the axis
        ticks.append(round(first + len(ticks) * step, 10))
    return ticks


class Chart:
    """Plot area inside a Scene; ``x(i)`` maps the i-th category, ``y(v)`` a value, in pixels."""

    def __init__(self, scene: Scene, cats: list, ymax: float, *, left=60, top=28, right=170, bottom=44,
                 title: str = "", xlabel: str = "", ylabel: str = ""):
        self.s, self.cats = scene, list(cats)
        self.x0, self.x1 = left, scene.w - right
        self.y0, self.y1 = scene.h - bottom, top
        self.ticks = nice_ticks(0, ymax * 1.05)
        self.ymax = self.ticks[-1]
        s = scene
        s.rect(self.x0, self.y1, self.x1 - self.x0, self.y0 - self.y1, fill="#fff", stroke="#999")
        for t in self.ticks:
            y = self.y(t)
            s.line([(self.x0, y), (self.x1, y)], color="#e5e5e5", w=1)
            s.text(self.x0 - 6, y, f"{t:g}", size=11, anchor="end", color="#444")
        lines = 1
        for i, c in enumerate(self.cats):  # a category label may have several lines ("128x256x64\nw8 s3")
            for k, part in enumerate(str(c).split("\n")):
                s.text(self.x(i), self.y0 + 14 + 13 * k, part, size=11, anchor="middle", color="#444")
                lines = max(lines, k + 1)
        s.text((self.x0 + self.x1) / 2, self.y0 + 19 + 13 * lines, xlabel, size=12, anchor="middle")
        s.text(16, (self.y0 + self.y1) / 2, ylabel, size=12, anchor="middle", rot=-90)
        s.text((self.x0 + self.x1) / 2, 12, title, size=12, anchor="middle", bold=True)
        self._legend = 0

    def x(self, i: float) -> float:
        n = len(self.cats)
        return self.x0 + (self.x1 - self.x0) * (i + 0.5) / n

    def y(self, v: float) -> float:
        return self.y0 - (self.y0 - self.y1) * v / self.ymax

    def series(self, ys, label: str, color: str, dash=None, marker=True):
        pts = [(self.x(i), self.y(v)) for i, v in enumerate(ys) if v is not None]
        self.s.line(pts, color=color, w=1.8, dash=dash)
        if marker:
            for (px, py), v in zip(pts, [v for v in ys if v is not None]):
                self.s.circle(px, py, 3, fill=color, tip=f"{label}: {v:.0f}")
        self.legend(label, color, dash)

    def hline(self, v: float, label: str, color: str):
        self.s.line([(self.x0, self.y(v)), (self.x1, self.y(v))], color=color, w=1.2, dash="5 3")
        self.legend(label, color, "5 3")

    def legend(self, label: str, color: str, dash=None):
        """Legend entries sit right of the plot area, so they never cover a curve."""
        y = self.y1 + 8 + 17 * self._legend
        self.s.line([(self.x1 + 10, y), (self.x1 + 32, y)], color=color, w=2, dash=dash)
        self.s.text(self.x1 + 37, y, label, size=11)
        self._legend += 1
