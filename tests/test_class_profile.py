"""The class edition of the book (`quarto render --profile class`): no solutions part, no link to it.

Checked over the profile configuration always, and over a real render where Quarto is available
(its file list, every link in every page, the search index).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_site import ROOT, book_pages, load_config, local_targets, markdown_of, merge_profile

SOLUTIONS = re.compile(r"(^|/)solutions(/|\.qmd$|\.html$)")
# a block shown only in the self-study book (Quarto drops it from the class render)
SELFSTUDY_BLOCK = re.compile(r"^:::+ *\{\.content-visible +when-profile=\"selfstudy\"\}.*?^:::+ *$", re.M | re.S)


def quarto() -> str | None:
    return (shutil.which("quarto") or shutil.which("quarto", path=str(Path(sys.executable).parent))
            or shutil.which("quarto", path=str(Path.home() / ".local" / "quarto-offline" / "bin")))


def solution_links(root: Path, pages: list[str]) -> list[str]:
    """Links to the solutions from what the class book shows of ``pages``."""
    problems = []
    for f in pages:
        for md in markdown_of(root / f):
            for t in local_targets(SELFSTUDY_BLOCK.sub("", md)):
                if SOLUTIONS.search(os.path.relpath((root / f).parent / t, root)):
                    problems.append(f"{f}: links to {t}")
    return problems


def test_class_profile_drops_the_solutions_part():
    cls, default = load_config(profile="class"), load_config()
    assert cls["project"]["output-dir"] == "_book-class"
    assert [p for p in book_pages(cls) if SOLUTIONS.search(p)] == []
    assert [p for p in cls["project"]["render"] if SOLUTIONS.search(p)] == []
    # the self-study book (what `quarto render` builds) keeps every solution, after the exercises
    sols = [p for p in book_pages(default) if SOLUTIONS.search(p)]
    assert sols[0] == "solutions.qmd"
    assert sorted(sols[1:]) == [f"solutions/{p.name}" for p in sorted((ROOT / "solutions").glob("*.ipynb"))]
    assert set(sols) <= set(default["project"]["render"])
    assert [p for p in book_pages(default) if not SOLUTIONS.search(p)] == book_pages(cls)


def test_class_pages_link_no_solution():
    assert solution_links(ROOT, book_pages(load_config(profile="class"))) == []


def test_solution_link_check_can_fail(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "ex01.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "a.qmd").write_text("# A\n\n[答案](solutions/ex01.ipynb)\n\n::: {.content-visible when-profile=\"selfstudy\"}\n"
                                    "[答案](solutions.qmd)\n:::\n", encoding="utf-8")
    assert solution_links(tmp_path, ["a.qmd"]) == ["a.qmd: links to solutions/ex01.ipynb"]


def test_profile_merge_is_quartos():
    q = quarto()
    if q is None:
        pytest.skip("no quarto binary: the merge is checked against Quarto's own where one is installed")
    for profile in (None, "class"):
        r = subprocess.run([q, "inspect"] + (["--profile", profile] if profile else []), cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        theirs = json.loads(r.stdout)["config"]
        ours = load_config(profile=profile)
        assert theirs["book"]["chapters"] == ours["book"]["chapters"], profile
        assert sorted(theirs["project"]["render"]) == sorted(ours["project"]["render"]), profile  # a set to Quarto
        assert theirs["project"]["output-dir"] == ours["project"]["output-dir"]
    assert merge_profile({"a": [1, 2], "b": {"c": 1}}, {"a": [2, 3], "b": {"d": 2}, "e": 0}) == \
        {"a": [1, 2, 3], "b": {"c": 1, "d": 2}, "e": 0}


def rendered_problems(out: Path) -> list[str]:
    """Solutions in a rendered book: pages, links in any page, entries of the search index."""
    problems = [f"{p.relative_to(out)} was rendered" for p in out.rglob("*") if SOLUTIONS.search(p.relative_to(out).as_posix())]
    for page in out.rglob("*.html"):
        for href in re.findall(r"""href=["']([^"'#]+)""", page.read_text(encoding="utf-8", errors="replace")):
            if not re.match(r"[a-z]+:", href) and SOLUTIONS.search(href.lstrip("./")):
                problems.append(f"{page.relative_to(out)} links to {href}")
    index = out / "search.json"
    if index.exists():
        problems += [f"search.json has {e['href']}" for e in json.loads(index.read_text(encoding="utf-8"))
                     if SOLUTIONS.search(e["href"].split("#")[0])]
    return problems


def test_rendered_problems_catch_a_solution(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "ex01.html").write_text("x", encoding="utf-8")
    (tmp_path / "index.html").write_text('<a href="./solutions.html">答案</a><a href="https://x.org/solutions/">ok</a>',
                                         encoding="utf-8")
    (tmp_path / "search.json").write_text(json.dumps([{"href": "solutions/ex01.html#a"}]), encoding="utf-8")
    assert rendered_problems(tmp_path) == ["solutions/ex01.html was rendered", "index.html links to ./solutions.html",
                                           "search.json has solutions/ex01.html#a"]


def test_class_render_has_no_solutions(tmp_path):
    q = quarto()
    if q is None:
        pytest.skip("no quarto binary (pip install -r requirements-site.txt); the profile config is checked above")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "_book", "_book-class", ".quarto",
                                                             "__pycache__", "wheelhouse", "*.pyc"))
    out = tmp_path / "class"
    r = subprocess.run([q, "render", "--profile", "class", "--output-dir", str(out)], cwd=src, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    pages = book_pages(load_config(profile="class"))
    assert [f for f in pages if not (out / Path(f).with_suffix(".html")).is_file()] == []
    assert rendered_problems(out) == []
    assert "课堂版" in (out / "index.html").read_text(encoding="utf-8")
