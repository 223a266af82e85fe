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

from . import registry, safeio, source

MAX_CELL_CHARS = 200_000
MAX_NOTEBOOK_BYTES = 20 << 20


class Unusable(ValueError):
    """The input cannot be graded at all (exit code 2): not a notebook, unknown exercise, ..."""


@dataclass
class Submission:
    path: Path
    exercise: str
    solution_cells: dict[str, str]  # cell id -> source
    notes: list[str] = field(default_factory=list)
    declared: str | None = None     # metadata.tcourse.exercise as the notebook says it


def load(path: Path, exercise: str | None = None) -> Submission:
    """Read a submitted notebook without trusting it; raise :class:`Unusable` with a one-line reason."""
    try:
        raw = safeio.read_bytes(path, MAX_NOTEBOOK_BYTES)
        text = raw.decode("utf-8")
        safeio.check_depth(text)
        data = json.loads(text)
    except safeio.Untrusted as e:
        raise Unusable(f"{path.name}: {e}") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Unusable(f"{path.name} is not a notebook (not valid UTF-8 JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise Unusable(f"{path.name} is not a notebook (no 'cells' list)")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    tmeta = meta.get("tcourse") if isinstance(meta.get("tcourse"), dict) else {}
    ex = exercise or tmeta.get("exercise")
    mismatch = exercise and tmeta.get("exercise") not in (None, exercise)
    if not isinstance(ex, str) or not ex:
        raise Unusable(f"{path.name} has no metadata.tcourse.exercise: not a course exercise notebook (or pass --exercise)")
    if ex not in registry.exercises():
        raise Unusable(f"unknown exercise {str(ex)[:60]!r} in {path.name} (see: python -m grader list)")
    if registry.get(ex).written:
        raise Unusable(f"{ex} is a written exercise: it is not auto-graded (model answer in solutions/{ex}.ipynb)")
    wanted = {c.id for c in source.parse(source.SRC_DIR / f"{ex}.py") if c.role == "solution"}
    cells, notes = {}, []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("id"), str) or cell["id"] not in wanted:
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
        try:
            src.encode("utf-8")
        except UnicodeEncodeError:
            raise Unusable(f"{path.name}: answer cell {cid} is not valid Unicode text (a lone surrogate escape)") from None
        if cid in cells:
            notes.append(f"单元 {cid} 出现了不止一次，只用第一个")
            continue
        cells[cid] = src
    for cid in sorted(wanted - cells.keys()):
        notes.append(f"找不到答案单元 {cid}（被删除或改了 id？），用模板里的空白版本代替")
    declared = tmeta.get("exercise") if isinstance(tmeta.get("exercise"), str) else None
    if mismatch:
        notes.insert(0, f"练习不符：这个笔记本的元数据写的是 {str(declared)[:40]}，但它是按 --exercise {ex} 评分的"
                        "（答案单元按这个练习的单元 id 查找）")
    return Submission(path, ex, cells, notes, declared)


def template_names(exercise_id: str) -> set[str]:
    """Names the exercise's own setup and given cells bind (the answer cells may use them)."""
    import ast

    names = set()
    for c in source.parse(source.SRC_DIR / f"{exercise_id}.py"):
        if c.kind == "code" and c.role in ("setup", "given"):
            for n in ast.walk(ast.parse(source.render(c.text, False))):
                if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                    names.add(n.name)
                elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    names.add(n.id)
    return names


def spec_names(exercise_id: str) -> set[str]:
    """The functions the exercise's spec cells (``given`` cells whose id ends in ``-spec``) define."""
    import ast

    return {n.name for c in source.parse(source.SRC_DIR / f"{exercise_id}.py")
            if c.kind == "code" and c.role == "given" and c.id.endswith("-spec")
            for n in ast.walk(ast.parse(source.render(c.text, False))) if isinstance(n, ast.FunctionDef)}


def graded_notebook(sub: Submission, answers: dict[str, str], case_ids: list[str]) -> nbformat.NotebookNode:
    """Template cells, the learner's answers (as the policy let them run), one harness cell per case."""
    template = source.notebook(sub.exercise, solution=False)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cell in template.cells:
        role = cell.metadata.get("tcourse", {}).get("role")
        if cell.cell_type != "code" or role not in source.GRADED_ROLES:
            continue
        new = nbformat.v4.new_code_cell(answers.get(cell["id"], cell.source) if role == "solution" else cell.source)
        new["id"] = cell["id"]
        new.metadata["tcourse"] = {"role": role}
        nb.cells.append(new)
    for cid in case_ids:
        cell = nbformat.v4.new_code_cell(f"import grader.harness\ngrader.harness.run_case(globals(), {cid!r})")
        cell["id"] = f"harness-{cid}"
        cell.metadata["tcourse"] = {"role": "harness", "case": cid}
        nb.cells.append(cell)
    return nb


def answer_sources(sub: Submission, answers: dict[str, str]) -> list[str]:
    """The code of every answer cell in template order (the learner's where given, else the stub)."""
    out = []
    for cell in source.notebook(sub.exercise, solution=False).cells:
        if cell.metadata.get("tcourse", {}).get("role") == "solution":
            out.append(answers.get(cell["id"], cell.source))
    return out
