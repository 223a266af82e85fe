"""What the class got wrong: ``python -m grader report GRADEBOOK_DIR [--html OUT.html]``.

Reads the folder ``grade --out`` wrote (gradebook.csv and one result JSON per submission) and writes
one static HTML page (plots embedded as PNG, no scripts, readable offline) for the instructor: per
exercise the score distribution, each test's failure rate, the most common failure messages grouped
by cause, the submissions that crashed or timed out; and the grading time per submission. Hidden
tests are shown in full (the page is the instructor's).
"""
from __future__ import annotations

import base64
import csv
import html
import io
import json
import re
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from . import batch

# (label, test statuses it applies to, substring of the message or None); the first match wins
CAUSES = [
    ("timeout", ("timeout",), None),
    ("crashed: the kernel process died", ("crashed",), None),
    ("stub left in place (NotImplementedError)", ("error",), "还没有实现"),
    ("exception in the student's code", ("error",), None),
    ("refused before running (policy)", ("failed",), "答案单元里有评分时不允许"),
    ("out-of-bounds write (tl.store without mask)", ("failed",), "越界写"),
    ("read memory nothing wrote (output or torch.empty scratch)", ("failed",), "还没有定义的内存"),
    ("NaN left in the output (unwritten tail, grid too small, unmasked load)", ("failed",), "NaN"),
    ("outside tolerance", ("failed",), "超出容差"),
    ("overflow / inf", ("failed",), "溢出"),
    ("an input was modified", ("failed",), "被修改"),
    ("torch op instead of the Triton kernel", ("failed",), "不能用 torch"),
    ("result not produced by the kernel (replay differs)", ("failed",), "重放"),
    ("out already held the result before the launch", ("failed",), "第一次启动 Triton kernel 之前"),
    ("result written after the return / from another thread", ("failed",), "另一个"),
    ("index mapping wrong or row not written", ("failed",), "映射错了"),
    ("index mapping wrong or row not written", ("failed",), "没有被写"),
    ("performance not scored (correctness failed)", ("failed",), "正确性测试没有全部通过"),
    ("slower than the reference", ("failed",), "倍"),
]
CJK_FONTS = ["Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Serif CJK SC", "WenQuanYi Zen Hei", "Droid Sans Fallback"]


def cause(test: dict) -> str:
    for label, statuses, needle in CAUSES:
        if test["status"] in statuses and (needle is None or needle in test["message"]):
            return label
    return "other: " + re.sub(r"\d+(\.\d+)?", "#", test["message"])[:60]


def load(folder: Path) -> tuple[list[dict], dict[str, dict]]:
    """(gradebook rows, result JSON by file) of a ``grade --out`` folder."""
    rows = list(csv.DictReader(open(folder / "gradebook.csv", encoding="utf-8")))
    results = {}
    for r in rows:
        p = folder / f"{batch.stem_for(Path(r['file']))}.json"
        if r["status"] in ("ok", "incomplete") and p.exists():
            results[r["file"]] = json.loads(p.read_text(encoding="utf-8"))
    return rows, results


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _cjk_fallback() -> list[str]:
    """Font families that draw the Chinese in test names: known to matplotlib, or found by fontconfig
    (matplotlib's font cache may predate the fonts)."""
    from matplotlib import font_manager

    def known():
        names = {f.name for f in font_manager.fontManager.ttflist}
        return [n for n in CJK_FONTS if n in names]

    if not known():
        try:
            found = subprocess.run(["fc-list", ":lang=zh", "file"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            found = ""
        for line in found.splitlines():
            font_manager.fontManager.addfont(line.strip().rstrip(":"))
    return known()


def _figure(w: float, h: float):
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["font.family"] = ["DejaVu Sans"] + _cjk_fallback()  # a list: per-glyph fallback
    return Figure(figsize=(w, h))


def score_plot(fractions: list[float], title: str) -> str:
    fig = _figure(5.2, 2.6)
    ax = fig.subplots()
    ax.hist([100 * f for f in fractions], bins=[0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100.001], color="#4c72b0",
            edgecolor="white")
    ax.set(xlabel="score (% of the points possible on the grading device)", ylabel="submissions", title=title, xlim=(0, 100))
    return _png(fig)


STATUS_COLORS = {"failed": "#c44e52", "error": "#dd8452", "timeout": "#8172b3", "crashed": "#222222"}


def failure_plot(names: list[str], shares: dict[str, list[float]]) -> str:
    """One bar per test: the share of submissions that did not pass it, split by status."""
    fig = _figure(5.6, 0.3 * len(names) + 1.1)
    ax = fig.subplots()
    left = [0.0] * len(names)
    for status, color in STATUS_COLORS.items():
        ax.barh(range(len(names)), [100 * v for v in shares[status]], left=left, color=color, label=status)
        left = [a + 100 * b for a, b in zip(left, shares[status])]
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set(xlabel="submissions that did not pass (%)", xlim=(0, 100))
    ax.legend(loc="lower right", fontsize="small", frameon=False)
    return _png(fig)


def time_plot(durations: list[float]) -> str:
    fig = _figure(5.2, 2.4)
    ax = fig.subplots()
    ax.hist(durations, bins=20, color="#55a868", edgecolor="white")
    ax.set(xlabel="grading time per submission (s)", ylabel="submissions")
    return _png(fig)


def _table(head: list[str], rows: list[list]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def row_name(test: dict) -> str:
    """A test's row in the failure table: hidden tests are drawn afresh for every run (other sizes, other
    names), so they are counted together per shape of name, numbers left out."""
    if test.get("visibility") != "hidden":
        return test["name"]
    return re.sub(r"(?<![A-Za-z\d])\d+", "#", test["name"]) + " (hidden, every size)"  # float32 stays


def exercise_section(ex: str, results: list[tuple[str, dict]]) -> str:
    fracs = [r["score"] / r["max_score"] if r["max_score"] else 0.0 for _, r in results]
    full = sum(f >= 1.0 for f in fracs)
    out = [f"<h2 id='{html.escape(ex)}'>{html.escape(ex)}</h2>",
           f"<p>{len(results)} graded submission(s); median score {100 * statistics.median(fracs):.0f}%, "
           f"{full} with full marks ({100 * full / len(results):.0f}%).</p>",
           score_plot(fracs, f"{ex}: score distribution")]
    order, counts = [], defaultdict(Counter)
    for _, r in results:
        for t in r["tests"]:
            key = row_name(t)
            if key not in counts:
                order.append(key)
            counts[key][t["status"]] += 1
    ran = {n: sum(v for s, v in counts[n].items() if s != "skipped") for n in order}
    graded = [n for n in order if ran[n]]
    rates = [1 - counts[n]["passed"] / ran[n] for n in graded]
    shares = {s: [counts[n][s] / ran[n] for n in graded] for s in STATUS_COLORS}
    out.append("<h3>Failure rate per test</h3>")
    out.append(failure_plot(graded, shares) if graded else "<p>No test ran on the grading device.</p>")
    out.append(_table(["test", "did not pass", "passed", "failed", "error", "timeout", "crashed", "skipped"],
                      [[n, f"{100 * rate:.0f}%"]
                       + [counts[n][s] for s in ("passed", "failed", "error", "timeout", "crashed", "skipped")]
                       for n, rate in zip(graded, rates)]))
    groups: dict[str, dict] = {}
    for f, r in results:
        for t in r["tests"]:
            if t["status"] in ("passed", "skipped"):
                continue
            g = groups.setdefault(cause(t), {"tests": 0, "subs": set(), "names": Counter(), "example": t["message"]})
            g["tests"] += 1
            g["subs"].add(f)
            g["names"][t["name"]] += 1
    out.append("<h3>Most common failures, grouped by cause</h3>")
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]["subs"]), kv[0]))
    out.append(_table(["cause", "submissions", "failed tests", "most affected tests", "example message"],
                      [[label, len(g["subs"]), g["tests"], ", ".join(n for n, _ in g["names"].most_common(3)),
                        g["example"][:220]] for label, g in ranked]) if ranked else "<p>Every test passed.</p>")
    return "\n".join(out)


def page(rows: list[dict], results: dict[str, dict], title: str) -> str:
    by_ex = defaultdict(list)
    for f, r in results.items():
        by_ex[r["exercise"]].append((f, r))
    durations = [float(r["duration_s"]) for r in rows if r["status"] in ("ok", "incomplete")]
    bad = []
    for f, r in sorted(results.items()):
        kinds = Counter(t["status"] for t in r["tests"] if t["status"] in ("crashed", "timeout"))
        if kinds:
            bad.append([Path(f).name, r["exercise"], ", ".join(f"{k} ×{n}" for k, n in sorted(kinds.items())),
                        f"{r['score']:g}/{r['max_score']:g}", f"{r['duration_s']:.1f}"])
    unusable = [[Path(r["file"]).name, r["status"]] for r in rows if r["status"] not in ("ok", "incomplete")]
    slow = sorted(((float(r["duration_s"]), Path(r["file"]).name) for r in rows if r["status"] in ("ok", "incomplete")),
                  reverse=True)[:10]
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>{len(rows)} file(s): {len(results)} graded, {len(unusable)} not gradable or not graded. Exercises: "
            + ", ".join(f"<a href='#{html.escape(x)}'>{html.escape(x)}</a> ({len(v)})" for x, v in sorted(by_ex.items()))
            + ".</p>"]
    body += [exercise_section(x, v) for x, v in sorted(by_ex.items())]
    body.append("<h2>Submissions that crashed or timed out</h2>")
    body.append(_table(["file", "exercise", "tests", "score", "grading time (s)"], bad) if bad else "<p>None.</p>")
    body.append("<h2>Files that could not be graded</h2>")
    body.append(_table(["file", "status"], unusable) if unusable else "<p>None.</p>")
    body.append("<h2>Grading time per submission</h2>")
    if durations:
        q = statistics.quantiles(durations, n=10) if len(durations) > 1 else durations * 9
        body.append(f"<p>median {statistics.median(durations):.1f} s, 90th percentile {q[-1]:.1f} s, "
                    f"max {max(durations):.1f} s, total {sum(durations) / 60:.1f} min of grading.</p>")
        body.append(time_plot(durations))
        body.append(_table(["slowest", "grading time (s)"], [[n, f"{d:.1f}"] for d, n in slow]))
    css = ("body{font-family:'Noto Sans CJK SC','PingFang SC','Microsoft YaHei',sans-serif;max-width:62em;margin:2em auto;"
           "padding:0 1em;color:#222}table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.9em}"
           "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#f3f3f3}"
           "img{max-width:100%}h2{border-bottom:1px solid #ddd;margin-top:2em}")
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def main(folder: Path, out: Path | None) -> int:
    if not (folder / "gradebook.csv").is_file():
        print(f"error: {folder} has no gradebook.csv (give the --out folder of `python -m grader grade`)", file=sys.stderr)
        return 2
    rows, results = load(folder)
    out = out or folder / "report.html"
    out.write_text(page(rows, results, f"Class report: {folder.resolve().name}"), encoding="utf-8")
    print(f"report of {len(rows)} file(s) -> {out}")
    return 0
