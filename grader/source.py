"""Exercise sources (``grader/exercise_src/exNN_*.py``): one file -> student notebook and solution notebook.

A source is a Python file in the percent format::

    # %% [markdown] id=ex01-intro
    # 中文题目（每行前面是 "# "）
    # %% id=ex01-kernel role=solution
    @triton.jit
    def kernel(...):
        ### BEGIN SOLUTION
        ...the model answer...
        ### STUB
        # TODO: what the student writes here
        raise NotImplementedError("TODO: ...")
        ### END SOLUTION

Code cell roles (``metadata.tcourse.role``): ``setup`` (the tcourse setup cell), ``given`` (spec and
helpers the grader runs as written), ``solution`` (the student's cells: only these are taken from a
submission, matched by cell id), ``selfcheck`` and ``demo`` (run by the learner, left out of grading), ``grading`` (the exercise's
cases, tolerances and reference, run only by the grader's own process: never put into a notebook,
see :mod:`grader.spec`).
Between ``### BEGIN SOLUTION`` and ``### STUB`` is the answer, between ``### STUB`` and ``### END
SOLUTION`` what the student notebook shows instead (the markers keep their indentation).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

SRC_DIR = Path(__file__).resolve().parent / "exercise_src"
ROLES = ("setup", "given", "solution", "selfcheck", "demo", "grading")
GRADED_ROLES = ("setup", "given", "solution")
_ID = re.compile(r"^(ex|dr)\d\d_\w+$")  # exNN_* exercises, drNN_* drills
_HEADER = re.compile(r"^# %%(?: \[(markdown)\])?((?: \w+=[\w\-]+)*)\s*$")


class SourceError(ValueError):
    pass


@dataclass
class SrcCell:
    id: str
    kind: str  # markdown | code
    role: str  # "" for markdown
    text: str


def parse(path: Path) -> list[SrcCell]:
    cells: list[SrcCell] = []
    cur: SrcCell | None = None
    lines: list[str] = []

    def close():
        if cur is not None:
            body = "\n".join(lines).strip("\n")
            if cur.kind == "markdown":
                body = "\n".join(re.sub(r"^# ?", "", ln) for ln in body.splitlines())
            cur.text = body
            cells.append(cur)

    for ln in path.read_text(encoding="utf-8").splitlines():
        m = _HEADER.match(ln)
        if m:
            close()
            attrs = dict(a.split("=", 1) for a in m.group(2).split())
            kind = "markdown" if m.group(1) else "code"
            role = attrs.get("role", "" if kind == "markdown" else "given")
            if "id" not in attrs or (kind == "code" and role not in ROLES):
                raise SourceError(f"{path.name}: bad cell header {ln!r}")
            cur, lines = SrcCell(attrs["id"], kind, role, ""), []
        elif cur is not None:
            lines.append(ln)
        elif ln.strip():
            raise SourceError(f"{path.name}: text before the first '# %%' header")
    close()
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise SourceError(f"{path.name}: duplicate cell ids")
    return cells


def render(text: str, solution: bool) -> str:
    """Keep the answer (solution=True) or the stub between the markers; drop the marker lines."""
    out, state = [], "plain"
    for ln in text.splitlines():
        tag = ln.strip()
        if tag == "### BEGIN SOLUTION":
            state = "answer"
        elif tag == "### STUB" and state == "answer":
            state = "stub"
        elif tag == "### END SOLUTION" and state in ("answer", "stub"):
            state = "plain"
        elif state == "plain" or (state == "answer") == solution:
            out.append(ln)
    if state != "plain":
        raise SourceError("unterminated ### BEGIN SOLUTION")
    return "\n".join(out)


def notebook(exercise_id: str, solution: bool) -> nbformat.NotebookNode:
    """The student (or solution) notebook of an exercise, straight from its source."""
    path = SRC_DIR / f"{exercise_id}.py"
    nb = nbformat.v4.new_notebook()
    nb.metadata["tcourse"] = {"exercise": exercise_id, "kind": "solution" if solution else "exercise"}
    for c in parse(path):
        if c.role == "grading":
            continue
        if c.kind == "markdown":
            text = render(c.text, solution)
            if solution and not nb.cells and text.startswith("# "):  # the solution page's own title
                text = "# 参考答案 · " + text[2:]
            cell = nbformat.v4.new_markdown_cell(text)
        else:
            cell = nbformat.v4.new_code_cell(render(c.text, solution))
            cell.metadata["tcourse"] = {"role": c.role}
        cell["id"] = c.id
        nb.cells.append(cell)
    return nb


def exercise_ids() -> list[str]:
    return sorted(p.stem for p in SRC_DIR.glob("*.py") if _ID.match(p.stem))
