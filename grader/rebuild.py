"""Rebuild a submission: the trusted template plus only the source of the student's solution cells.

The submission's outputs, tags, metadata, extra cells and kernelspec are ignored. Solution cells are
matched by cell id; a missing one falls back to the template's stub (noted in the report). After the
template's graded cells come the grader's own harness cells, one per test case, so a hang in one
case costs that case only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import registry, source

MAX_CELL_CHARS = 200_000


class Unusable(ValueError):
    """The input cannot be graded at all (exit code 2): not a notebook, unknown exercise, ..."""


@dataclass
class Submission:
    path: Path
    exercise: str
    solution_cells: dict[str, str]  # cell id -> source
    notes: list[str] = field(default_factory=list)


def load(path: Path, exercise: str | None = None) -> Submission:
    """Read a submitted notebook without trusting it; raise :class:`Unusable` with a one-line reason."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise Unusable(f"cannot read {path}: {e.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Unusable(f"{path.name} is not a notebook (not valid UTF-8 JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise Unusable(f"{path.name} is not a notebook (no 'cells' list)")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    tmeta = meta.get("tcourse") if isinstance(meta.get("tcourse"), dict) else {}
    ex = exercise or tmeta.get("exercise")
    mismatch = exercise and tmeta.get("exercise") not in (None, exercise)
    if not isinstance(ex, str) or not ex:
        raise Unusable(f"{path.name} has no metadata.tcourse.exercise: not a course exercise notebook (or pass --exercise)")
    if ex not in registry.EXERCISES:
        raise Unusable(f"unknown exercise {ex!r} in {path.name} (see: python -m grader list)")
    if registry.EXERCISES[ex].written:
        raise Unusable(f"{ex} is a written exercise: it is not auto-graded (model answer in solutions/{ex}.ipynb)")
    wanted = {c.id for c in source.parse(source.SRC_DIR / f"{ex}.py") if c.role == "solution"}
    cells, notes = {}, []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("id") not in wanted:
            continue
        cid, src = cell["id"], cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            src = "".join(src)
        if cell.get("cell_type") != "code" or not isinstance(src, str):
            notes.append(f"单元 {cid} 不是代码单元或内容无效，用模板代替")
            continue
        if len(src) > MAX_CELL_CHARS:
            notes.append(f"单元 {cid} 超过 {MAX_CELL_CHARS} 个字符，用模板代替")
            continue
        if cid in cells:
            notes.append(f"单元 {cid} 出现了不止一次，只用第一个")
            continue
        cells[cid] = src
    for cid in sorted(wanted - cells.keys()):
        notes.append(f"找不到答案单元 {cid}（被删除或改了 id？），用模板里的空白版本代替")
    if mismatch:
        notes.insert(0, f"这个笔记本的元数据写的是 {str(tmeta.get('exercise'))[:40]}，按 --exercise {ex} 评分")
    return Submission(path, ex, cells, notes)


def graded_notebook(sub: Submission, case_ids: list[str], key_hex: str = "") -> nbformat.NotebookNode:
    """Template cells, the student's answers, one harness cell per case.

    Right before the first answer cell comes a trusted cell that imports the harness and arms it with
    the run's sealing key: it runs before any student code, so the key never appears in a cell the
    student's code could see or rewrite, and the harness binds its helpers before they can be patched.
    """
    template = source.notebook(sub.exercise, solution=False)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    armed = False
    for cell in template.cells:
        role = cell.metadata.get("tcourse", {}).get("role")
        if cell.cell_type != "code" or role not in source.GRADED_ROLES:
            continue
        if role == "solution" and not armed:
            arm = nbformat.v4.new_code_cell(f"import grader.harness\ngrader.harness.arm({key_hex!r})")
            arm["id"] = "harness-arm"
            arm.metadata["tcourse"] = {"role": "given"}
            nb.cells.append(arm)
            armed = True
        new = nbformat.v4.new_code_cell(sub.solution_cells.get(cell["id"], cell.source) if role == "solution"
                                        else cell.source)
        new["id"] = cell["id"]
        new.metadata["tcourse"] = {"role": role}
        nb.cells.append(new)
    for cid in case_ids:
        cell = nbformat.v4.new_code_cell(f"import grader.harness\ngrader.harness.run_case(globals(), {cid!r})")
        cell["id"] = f"harness-{cid}"
        cell.metadata["tcourse"] = {"role": "harness", "case": cid}
        nb.cells.append(cell)
    return nb
