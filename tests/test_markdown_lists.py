"""A Markdown list right after a paragraph line is not a list to Pandoc (Quarto): it is run-on text.

Pandoc needs a blank line before a list that follows paragraph text (a heading, a table, an HTML
line or another list item may come right before it). This test reads every place the book's
Markdown comes from: chapter notebooks, generated exercises and solutions, the exercise sources'
markdown cells, and every .qmd/.md page of the site.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+\S")
FENCE = re.compile(r"^\s*(```|~~~)")
NOT_PARAGRAPH = re.compile(r"^\s*(#{1,6}\s|\||<|:::|---\s*$|\$\$)")


def list_without_blank_line(text: str) -> list[str]:
    """Lines that start a list directly under paragraph text (as Pandoc would run them together)."""
    bad, prev, in_list, after_blank, in_fence = [], "", False, True, False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            prev, after_blank = line, False
            continue
        if in_fence:
            continue
        if not line.strip():
            after_blank = True
            prev = ""
            continue
        item = LIST_ITEM.match(line)
        if item:
            if prev and not in_list and not NOT_PARAGRAPH.match(prev):
                bad.append(f"line {number}: {line.strip()[:60]!r} follows {prev.strip()[:40]!r}")
            in_list = True
        elif NOT_PARAGRAPH.match(line):
            in_list = False
        elif not line.startswith((" ", "\t")) and after_blank:
            in_list = False  # a paragraph after a blank line ends the list; without one it is a lazy continuation
        prev, after_blank = line, False
    return bad


def notebook_markdown(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "markdown":
            yield cell.get("id", "?"), "".join(cell["source"])


def exercise_source_markdown(path: Path):
    """Markdown cells of grader/exercise_src/*.py (`# %% [markdown] id=...` blocks of `# ` lines)."""
    cell_id, lines = None, []
    for line in path.read_text(encoding="utf-8").splitlines() + ["# %% end"]:
        if line.startswith("# %%"):
            if cell_id is not None:
                yield cell_id, "\n".join(lines)
            m = re.search(r"id=(\S+)", line)
            cell_id = (m.group(1) if m else "?") if "[markdown]" in line else None
            lines = []
        elif cell_id is not None:
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))


def sources():
    for nb in sorted([*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("exercises/*.ipynb"), *ROOT.glob("solutions/*.ipynb")]):
        for cell_id, text in notebook_markdown(nb):
            yield f"{nb.relative_to(ROOT)}#{cell_id}", text
    for src in sorted(ROOT.glob("grader/exercise_src/*.py")):
        for cell_id, text in exercise_source_markdown(src):
            yield f"{src.relative_to(ROOT)}#{cell_id}", text
    for page in sorted([*ROOT.glob("*.qmd"), *ROOT.glob("site-assets/*.md")]):
        yield str(page.relative_to(ROOT)), page.read_text(encoding="utf-8")


def test_every_markdown_list_is_preceded_by_a_blank_line():
    problems = [f"{where}: {p}" for where, text in sources() for p in list_without_blank_line(text)]
    assert not problems, "a list needs a blank line before it (Pandoc):\n" + "\n".join(problems)


@pytest.mark.parametrize("text, n_bad", [
    ("para\n- a\n- b", 1),                       # the bug: run-on text
    ("para\n\n- a\n- b", 0),
    ("## heading\n- a", 0),                      # a heading ends its block
    ("1. one\n   - sub\n2. two", 0),             # nested list under an item
    ("- a\n  continued\n- b", 0),
    ("- a\nlazy continuation\n- b", 0),
    ("- a\n\nnew paragraph\n- b", 1),            # the list ended at the paragraph
    ("**答**：\n1. x", 1),
    ("```\ntext\n- not markdown\n```", 0),
    ("| a |\n|---|\n- after a table", 0),
])
def test_detector(text, n_bad):
    assert len(list_without_blank_line(text)) == n_bad
