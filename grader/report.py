"""Show a result: per-test table, JSON file, Chinese feedback text."""
from __future__ import annotations

import json
import platform
import unicodedata
from pathlib import Path

from tcourse import versions as tversions

from .grade import Result

MARK = {"passed": "通过", "failed": "未通过", "error": "出错", "timeout": "超时", "crashed": "崩溃", "skipped": "跳过"}


def versions() -> dict:
    v = tversions.installed(("torch", "triton", "numpy", "nbclient"))
    v["python"] = platform.python_version()
    return v


def _width(s: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


def _pad(s: str, n: int) -> str:
    return s + " " * max(0, n - _width(s))


def table(r: Result) -> str:
    w = max([_width(t.name) for t in r.tests] + [4])
    lines = [f"{r.exercise}  ({r.device}, {r.duration_s:.1f} s)"] + ([f"sandbox: {r.sandbox}"] if r.sandbox else [])
    for t in r.tests:
        lines.append(f"  {_pad(t.name, w)}  {_pad(t.status, 8)}{t.points:5.1f}/{t.max_points:<4.1f} {MARK[t.status]}")
    skipped = sum(t.max_points for t in r.tests if t.status == "skipped")
    tail = f"  (另有 {skipped:g} 分需要 GPU，未计入)" if skipped else ""
    lines.append(f"score {r.score:g} / {r.max_score:g}{tail}")
    return "\n".join(lines)


def feedback(r: Result) -> str:
    """The messages of every test that did not pass, plus notes about the submission itself."""
    out = [f"练习 {r.exercise}：得分 {r.score:g} / {r.max_score:g}（{r.device}）"]
    out += [f"注意：{n}" for n in r.notes]
    for t in r.tests:
        if t.status != "passed":
            out.append(f"[{MARK[t.status]}] {t.name}：{t.message}")
    if r.all_passed:
        out.append("全部通过。")
    return "\n".join(out)


def write_json(r: Result, path: Path) -> None:
    path.write_text(json.dumps(r.as_dict(versions()), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
