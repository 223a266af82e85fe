"""The Quarto book (_quarto.yml): everything that can be checked without Quarto, and a real render when
a ``quarto`` binary is on PATH.

Each ``check_*`` function returns a list of problems (empty when fine) and has a negative test on a
small synthetic input, so every check is known to be able to fail.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "_quarto.yml"

# Keys documented by Quarto 1.5-1.8 (quarto-cli src/resources/schema/project.yml, the book reference
# docs/reference/projects/book.json and the website options books share). Only documented keys pass.
PROJECT_KEYS = {"title", "type", "render", "execute-dir", "output-dir", "lib-dir", "resources", "preview",
                "pre-render", "post-render"}
BOOK_KEYS = {"title", "subtitle", "author", "date", "abstract", "description", "chapters", "references",
             "appendices", "output-file", "cover-image", "sharing", "downloads", "tools", "site-url", "site-path",
             "repo-url", "repo-subdir", "repo-branch", "repo-actions", "search", "navbar", "sidebar",
             "margin-header", "margin-footer", "page-navigation", "page-footer", "image", "open-graph",
             "twitter-card", "favicon", "reader-mode", "bread-crumbs", "back-to-top-navigation"}
TOP_KEYS = {"project", "book", "lang", "execute", "format", "crossref", "toc", "number-sections",
            "number-depth", "metadata-files", "editor", "bibliography", "profile"}
EXECUTE_KEYS = {"enabled", "echo", "eval", "output", "warning", "error", "include", "freeze", "cache"}
PAGE_SUFFIXES = (".qmd", ".ipynb", ".md")
CROSSREF_KINDS = ("fig", "sec", "tbl", "lst", "eq")


# ---------------------------------------------------------------------------------------------------
# _quarto.yml
# ---------------------------------------------------------------------------------------------------
def load_config(path: Path = CONFIG, profile: str | None = None) -> dict:
    """_quarto.yml merged with ``_quarto-<profile>.yml``; by default the profile Quarto activates when none
    is given (the first of each ``profile.group``, or ``profile.default``)."""
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(cfg, dict):
        return cfg
    prof = cfg.get("profile") or {}
    names = [profile] if profile else (
        [prof["default"]] if isinstance(prof.get("default"), str) else list(prof.get("default") or [])
        or [g[0] for g in prof.get("group") or [] if g])
    for name in names:
        extra = path.with_name(f"_quarto-{name}.yml")
        if extra.is_file():
            cfg = merge_profile(cfg, yaml.safe_load(extra.read_text(encoding="utf-8")) or {})
    return cfg


def merge_profile(base, extra):
    """Quarto's merge of a profile into _quarto.yml: mappings merged key by key, lists appended (without
    repeating an entry), anything else replaced (checked against quarto 1.8 in tests/test_class_profile.py)."""
    if isinstance(base, dict) and isinstance(extra, dict):
        return {**base, **{k: merge_profile(base[k], v) if k in base else v for k, v in extra.items()}}
    if isinstance(base, list) and isinstance(extra, list):
        return base + [x for x in extra if x not in base]
    return extra


def is_page(entry: str) -> bool:
    return entry.endswith(PAGE_SUFFIXES)


def entry_file(entry) -> str | None:
    """A chapter entry's page: the file itself, or the ``href`` of ``{href, text}`` (sidebar text of its own)."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and set(entry) == {"href", "text"} and isinstance(entry["href"], str):
        return entry["href"]
    return None


def book_pages(cfg: dict) -> list[str]:
    """Every page of the book in reading order: chapters, part pages (when a part is a file), appendices."""
    pages: list[str] = []
    for item in cfg.get("book", {}).get("chapters", []) or []:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, dict):
            part = item.get("part")
            if isinstance(part, str) and is_page(part):
                pages.append(part)
            pages += [entry_file(c) for c in item.get("chapters", []) or [] if entry_file(c)]
    pages += [a for a in cfg.get("book", {}).get("appendices", []) or [] if isinstance(a, str)]
    return pages


def check_config_shape(cfg) -> list[str]:
    """Book project shape, documented keys only, and the site's promises (zh, search, copy, no execution)."""
    if not isinstance(cfg, dict):
        return ["_quarto.yml is not a mapping"]
    p = [f"unknown top-level key {k!r}" for k in cfg if k not in TOP_KEYS]
    project, book = cfg.get("project"), cfg.get("book")
    if not isinstance(project, dict) or project.get("type") != "book":
        p.append("project.type must be 'book'")
        project = project if isinstance(project, dict) else {}
    p += [f"unknown project key {k!r}" for k in project if k not in PROJECT_KEYS]
    if "render" in project and not (isinstance(project["render"], list)
                                    and all(isinstance(x, str) for x in project["render"])):
        p.append("project.render must be a list of paths")
    if not isinstance(book, dict):
        return p + ["book: section missing"]
    p += [f"unknown book key {k!r}" for k in book if k not in BOOK_KEYS]
    if not isinstance(book.get("title"), str):
        p.append("book.title missing")
    chapters = book.get("chapters")
    if not isinstance(chapters, list) or not chapters:
        p.append("book.chapters must be a non-empty list")
        chapters = []
    elif chapters[0] != "index.qmd":
        p.append("the first chapter must be index.qmd (Quarto books require it)")
    for item in chapters:
        if isinstance(item, str):
            if not is_page(item):
                p.append(f"chapter {item!r} is not a .qmd/.ipynb/.md file")
        elif isinstance(item, dict):
            if set(item) != {"part", "chapters"}:
                p.append(f"a part takes exactly the keys 'part' and 'chapters', not {sorted(item)}")
            if not isinstance(item.get("part"), str):
                p.append("part: must be a title or a file")
            sub = item.get("chapters")
            if not isinstance(sub, list) or not sub or not all(entry_file(c) and is_page(entry_file(c)) for c in sub):
                p.append(f"part {item.get('part')!r}: chapters must be a non-empty list of page files")
        else:
            p.append(f"chapter entry {item!r} is neither a file nor a part")
    appendices = book.get("appendices", [])
    if not isinstance(appendices, list) or not all(isinstance(a, str) and is_page(a) for a in appendices):
        p.append("book.appendices must be a list of page files")
    pages = book_pages(cfg)
    dups = sorted({x for x in pages if pages.count(x) > 1})
    if dups:
        p.append(f"pages listed twice: {dups}")
    # the site's own promises
    if cfg.get("lang") != "zh":
        p.append("lang must be zh")
    execute = cfg.get("execute")
    if not isinstance(execute, dict) or execute.get("enabled") is not False:
        p.append("execute.enabled must be false: rendering never runs code")
    else:
        p += [f"unknown execute key {k!r}" for k in execute if k not in EXECUTE_KEYS]
    if book.get("search") is False:
        p.append("search must stay on")
    html = ((cfg.get("format") or {}).get("html") or {}) if isinstance(cfg.get("format"), dict) else {}
    if html.get("code-copy") not in (True, "hover"):
        p.append("format.html.code-copy must be on")
    return p


def check_render_list(cfg: dict) -> list[str]:
    """project.render keeps repo files (README, AUTHORING...) out of the site: it must equal the book's pages."""
    render = (cfg.get("project") or {}).get("render")
    if render is None:
        return ["project.render missing: Quarto would render every .md/.qmd/.ipynb in the repo"]
    pages = book_pages(cfg)
    p = [f"{x} is rendered but not in the book" for x in render if x not in pages]
    p += [f"{x} is in the book but not in project.render" for x in pages if x not in render]
    return p


def check_files_exist(root: Path, files: list[str]) -> list[str]:
    return [f"{f} is listed in _quarto.yml but does not exist" for f in files if not (root / f).is_file()]


# ---------------------------------------------------------------------------------------------------
# Page contents
# ---------------------------------------------------------------------------------------------------
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1", re.S)
INCLUDE = re.compile(r"\{\{<\s*include\s+(\S+)\s*>\}\}")
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---[ \t]*\n", re.S)


def strip_code(text: str) -> str:
    return INLINE_CODE.sub("", FENCE.sub("", text))


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def cell_text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def expand_includes(text: str, base: Path, seen: tuple = ()) -> str:
    """Inline ``{{< include f >}}`` (Quarto includes are textual, so paths inside stay relative to ``base``)."""
    def repl(m):
        target = (base / m.group(1)).resolve()
        if target in seen or not target.is_file():
            return m.group(0)
        return expand_includes(target.read_text(encoding="utf-8"), base, seen + (target,))
    return INCLUDE.sub(repl, text)


def markdown_of(path: Path) -> list[str]:
    """The markdown a page contributes: a .qmd/.md with includes expanded, or a notebook's markdown cells."""
    if path.suffix == ".ipynb":
        return [cell_text(c) for c in read_notebook(path).get("cells", []) if c.get("cell_type") == "markdown"]
    return [expand_includes(path.read_text(encoding="utf-8"), path.parent)]


def page_title(path: Path) -> str | None:
    """Front-matter/metadata title, or the first markdown's leading ``# `` heading."""
    if path.suffix == ".ipynb":
        nb = read_notebook(path)
        if isinstance(nb.get("metadata", {}).get("title"), str):
            return nb["metadata"]["title"]
        for c in nb.get("cells", []):
            text = cell_text(c).strip()
            if c.get("cell_type") == "raw" and (m := FRONT_MATTER.match(text + "\n")):
                t = (yaml.safe_load(m.group(1)) or {}).get("title")
                if isinstance(t, str) and t.strip():
                    return t
            if c.get("cell_type") == "markdown":
                first = text.splitlines()[0] if text else ""
                return first[2:].strip() or None if first.startswith("# ") else None
        return None
    text = path.read_text(encoding="utf-8")
    if m := FRONT_MATTER.match(text):
        t = (yaml.safe_load(m.group(1)) or {}).get("title")
        if isinstance(t, str) and t.strip():
            return t
        text = text[m.end():]
    for line in strip_code(text).splitlines():
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def check_titles(root: Path, files: list[str]) -> list[str]:
    return [f"{f} has no title (front matter title or a leading '# ' heading)"
            for f in files if (root / f).is_file() and not page_title(root / f)]


LINK_TARGET = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_SRC = re.compile(r"<(?:img|a|source)\b[^>]*?\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']", re.I)


def local_targets(markdown: str) -> list[str]:
    """Relative link and image targets (no scheme, no pure #anchor), without #fragment or ?query."""
    text = strip_code(markdown)
    out = []
    for t in LINK_TARGET.findall(text) + HTML_SRC.findall(text):
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t) or t.startswith(("#", "/")):
            continue
        t = unquote(t.split("#", 1)[0].split("?", 1)[0])
        if t:
            out.append(t)
    return out


HEADING = re.compile(r"^#{1,6}[ \t]+(.*?)[ \t]*$", re.M)
ANCHOR_LINK = re.compile(r"\]\(\s*#([^)\s]+)\s*\)")


def auto_id(heading: str) -> str:
    """Pandoc's auto_identifiers for a heading's text (explicit ``{#id}`` attributes are read separately)."""
    text = re.sub(r"\s*\{[^}]*\}\s*$", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).replace("`", "").replace("*", "")
    text = "".join(ch for ch in text.lower() if ch.isalnum() or ch in "_-. \t")
    text = re.sub(r"\s+", "-", text.strip())
    return re.sub(r"^[^a-z\u00c0-\U0010ffff]+", "", text) or "section"


def page_anchors(markdowns: list[str]) -> set[str]:
    anchors = set()
    for md in markdowns:
        text = FENCE.sub("", md)
        anchors |= set(re.findall(r"\{#([^\s}]+)", text))
        anchors |= {auto_id(h) for h in HEADING.findall(text)}
    return anchors


def check_links(root: Path, files: list[str]) -> list[str]:
    """Every image/link target exists; links to other pages point at pages of the book
    (Quarto cannot resolve a link to a page it does not render); ``(#id)`` links match an id on the page."""
    book = {(root / f).resolve() for f in files}
    problems = []
    for f in files:
        path = root / f
        if not path.is_file():
            continue
        markdowns = markdown_of(path)
        anchors = page_anchors(markdowns)
        for md in markdowns:
            problems += [f"{f}: #{a} matches no heading or id on the page"
                         for a in ANCHOR_LINK.findall(strip_code(md)) if a not in anchors]
            for t in local_targets(md):
                target = (path.parent / t).resolve()
                if not target.exists():
                    problems.append(f"{f}: {t} does not exist")
                elif target.suffix in PAGE_SUFFIXES and target not in book:
                    problems.append(f"{f}: links to {t}, which is not a page of the book")
    return problems


XREF_ID = re.compile(r"\{#((?:%s)-[^\s}]+)" % "|".join(CROSSREF_KINDS))
CELL_LABEL = re.compile(r"^#\|\s*label:\s*((?:%s)-\S+)\s*$" % "|".join(CROSSREF_KINDS), re.M)
# Pandoc citation keys: a letter or _, then word chars or internal punctuation followed by a word char.
CITE_USE = re.compile(r"(.?)@([^\W\d]\w*(?:[:.#$%&+?<>~/-]\w+)*)")
XREF_KEY = re.compile(r"^(?:%s)-" % "|".join(CROSSREF_KINDS))


def crossref_ids(root: Path, files: list[str]) -> list[str]:
    ids = []
    for f in files:
        path = root / f
        if not path.is_file():
            continue
        for md in markdown_of(path):
            ids += XREF_ID.findall(strip_code(md))
        if path.suffix == ".ipynb":
            for c in read_notebook(path).get("cells", []):
                if c.get("cell_type") == "code":
                    ids += CELL_LABEL.findall(cell_text(c))
        else:
            ids += CELL_LABEL.findall(path.read_text(encoding="utf-8"))
    return ids


def check_crossrefs(root: Path, files: list[str]) -> list[str]:
    """Every @fig-/@sec-/@tbl-/@lst-/@eq- reference has one target in the book, and Pandoc can parse it
    (a reference glued to a preceding word character, e.g. Chinese text, is not read as one).
    Any other ``@word`` outside code (``@triton.jit``) would be read as a citation that does not exist."""
    ids = crossref_ids(root, files)
    problems = [f"crossref id {i} is defined twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for f in files:
        path = root / f
        if not path.is_file():
            continue
        for md in markdown_of(path):
            for before, key in CITE_USE.findall(strip_code(md)):
                glued = bool(before) and re.match(r"\w", before) is not None
                if not XREF_KEY.match(key):
                    if not glued:
                        problems.append(f"{f}: @{key} is read as a citation: put it in backticks")
                elif glued:
                    problems.append(f"{f}: put a space before @{key} (Pandoc reads it as text otherwise)")
                elif key not in ids:
                    problems.append(f"{f}: @{key} has no target (ids end at a space: '@fig-x图' is key 'fig-x图')")
    return problems


# ---------------------------------------------------------------------------------------------------
# Notebook outputs: only labelled GPU recordings may be stored
# ---------------------------------------------------------------------------------------------------
def interpreter_markers() -> list[str]:
    """Text tcourse prints only on a CPU interpreter run, taken from tcourse.runtime itself."""
    from tcourse import runtime

    rt = runtime.Runtime("cpu", None, {"python": "-", "torch": "-", "triton": "-", "numpy": "-"})
    mode = next(line.split(None, 1)[1].strip() for line in rt.table().splitlines() if line.startswith("mode"))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rt.live_or_recorded("__test_site_no_such_recording__", lambda: None)
    prefix = re.match(r"^(\[[^\]]+\])", buf.getvalue()).group(1)
    return [mode, prefix]


def output_text(out: dict) -> str:
    parts = []
    if "text" in out:
        parts.append(cell_text({"source": out["text"]}))
    for mime, v in (out.get("data") or {}).items():
        if mime.startswith("text/"):
            parts.append(cell_text({"source": v}))
    parts += out.get("traceback", []) or []
    return "\n".join(parts)


def check_recorded_outputs(root: Path, files: list[str], markers: list[str]) -> list[str]:
    """Stored outputs must come from a GPU recording (scripts/record_gpu.py labels the notebook with
    metadata.tcourse.recorded) and must not contain interpreter output."""
    problems = []
    for f in files:
        path = root / f
        if path.suffix != ".ipynb" or not path.is_file():
            continue
        nb = read_notebook(path)
        outputs = [o for c in nb.get("cells", []) if c.get("cell_type") == "code" for o in c.get("outputs", [])]
        if not outputs:
            continue
        if not (nb.get("metadata", {}).get("tcourse") or {}).get("recorded"):
            problems.append(f"{f}: has outputs but no metadata.tcourse.recorded label (not a GPU recording)")
        for o in outputs:
            text = output_text(o)
            hit = next((m for m in markers if m in text), None)
            if hit:
                problems.append(f"{f}: stored output comes from an interpreter run ({hit!r})")
                break
    return problems


PANEL_CALL = re.compile(r"(?<!def )\bpanel\(")
STATIC_PLOT_HINTS = ("plot_sweep", "recorded", "live_or_recorded", "plt.", "viz.")


def check_panels_have_static_plot(root: Path, files: list[str]) -> list[str]:
    """A static page cannot run an ipywidgets panel: the code cell after each panel must draw the recorded
    sweep (AUTHORING.md, slider panels)."""
    problems = []
    for f in files:
        path = root / f
        if path.suffix != ".ipynb" or not path.is_file():
            continue
        code = [cell_text(c) for c in read_notebook(path).get("cells", []) if c.get("cell_type") == "code"]
        for i, src in enumerate(code):
            if not PANEL_CALL.search(src):
                continue
            nxt = code[i + 1] if i + 1 < len(code) else ""
            if PANEL_CALL.search(nxt) or not any(h in nxt for h in STATIC_PLOT_HINTS):
                problems.append(f"{f}: code cell {i} shows a slider panel, but the next code cell draws no "
                                "recorded sweep for the static site")
    return problems


# ---------------------------------------------------------------------------------------------------
# The appendix include
# ---------------------------------------------------------------------------------------------------
def load_build_appendix():
    spec = importlib.util.spec_from_file_location("build_appendix", ROOT / "scripts" / "build_appendix.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_appendix_in_sync(results_dir: Path, output: Path, root: Path) -> list[str]:
    ba = load_build_appendix()
    want = ba.render(results_dir, root)
    have = output.read_text(encoding="utf-8") if output.exists() else None
    return [] if have == want else [f"{output.name} is out of date: run python scripts/build_appendix.py"]


# ===================================================================================================
# The real site
# ===================================================================================================
@pytest.fixture(scope="module")
def cfg():
    return load_config()


@pytest.fixture(scope="module")
def pages(cfg):
    return book_pages(cfg)


def test_config_has_book_shape(cfg):
    assert check_config_shape(cfg) == []


def test_render_list_is_the_book(cfg):
    assert check_render_list(cfg) == []


def test_every_listed_file_exists(pages):
    assert check_files_exist(ROOT, pages) == []


def test_every_page_has_a_title(pages):
    assert check_titles(ROOT, pages) == []


def test_images_and_links_resolve(pages):
    assert check_links(ROOT, pages) == []


def test_crossrefs_resolve(pages):
    assert check_crossrefs(ROOT, pages) == []


def test_no_interpreter_outputs_in_book(pages):
    assert check_recorded_outputs(ROOT, pages, interpreter_markers()) == []


def test_slider_panels_have_static_plots(pages):
    assert check_panels_have_static_plot(ROOT, pages) == []


def test_six_seed_diagrams_are_shown(pages):
    stems = ["00_triton_learning_roadmap", "01_triton_programming_model", "02_triton_vector_add_softmax",
             "03_triton_matmul_tile_flow", "04_triton_autotune_debug_workflow", "05_triton_interview_map"]
    shown = {Path(t).stem for f in pages if (ROOT / f).is_file()
             for md in markdown_of(ROOT / f) for t in local_targets(md) if t.endswith(".svg")}
    assert [s for s in stems if s not in shown] == []


def test_appendix_include_in_sync():
    ba = load_build_appendix()
    assert check_appendix_in_sync(ba.RESULTS_DIR, ba.OUTPUT, ROOT) == []


RENDER_WARNING = re.compile(r"resolve|not found|missing|could not fetch|does not exist|crossref|no such file", re.I)


def render_problems(quarto: str, src: Path, out: Path, pages: list[str]) -> list[str]:
    """Run ``quarto render`` in ``src`` into ``out``; problems: failure, warnings about missing files or
    unresolved cross-references, pages that produced no HTML."""
    r = subprocess.run([quarto, "render", "--output-dir", str(out)], cwd=src, capture_output=True, text=True,
                       timeout=900)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        return [f"quarto render exited {r.returncode}:\n{log[-4000:]}"]
    problems = [line for line in log.splitlines() if "WARN" in line and RENDER_WARNING.search(line)]
    problems += [f"{f} was not rendered" for f in pages if not (out / Path(f).with_suffix(".html")).is_file()]
    return problems


def test_quarto_render(tmp_path, pages):
    # on PATH, or beside this interpreter (./course.sh runs .venv/bin/python without activating the venv)
    quarto = shutil.which("quarto") or shutil.which("quarto", path=str(Path(sys.executable).parent))
    if quarto is None:
        pytest.skip("no quarto binary on PATH (pip install -r requirements-site.txt to get one)")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "_book", "_book-class", ".quarto", "__pycache__",
                                                             "wheelhouse", "*.pyc"))
    assert render_problems(quarto, src, tmp_path / "out", pages) == []


def test_render_problems_catch_warnings_and_failures(tmp_path, monkeypatch):
    fake = tmp_path / "quarto"
    fake.write_text("#!/bin/sh\n"
                    "out=\"$3\"; mkdir -p \"$out\"; touch \"$out/index.html\"\n"
                    "echo 'WARNING (index.qmd) Unable to resolve crossref @fig-x' >&2\n"
                    "exit \"${FAKE_RC:-0}\"\n")
    fake.chmod(0o755)
    probs = render_problems(str(fake), tmp_path, tmp_path / "out", ["index.qmd", "a.ipynb"])
    assert any("Unable to resolve crossref" in p for p in probs) and "a.ipynb was not rendered" in probs
    monkeypatch.setenv("FAKE_RC", "1")
    assert render_problems(str(fake), tmp_path, tmp_path / "out", ["index.qmd"])[0].startswith(
        "quarto render exited 1")


TESTED_BLOCK = re.compile(r"^```\{\.python \.tested\}[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
TUTORIAL_CHECKS = """
torch.manual_seed(0)
x = torch.randn(1000)
torch.testing.assert_close(scale(x, 0.5), 0.5 * x)
a = torch.randn(37, 781)
torch.testing.assert_close(softmax(a), torch.softmax(a, dim=1))
torch.testing.assert_close(softmax(-a.abs() - 5), torch.softmax(-a.abs() - 5, dim=1))   # all-negative rows
for A in (torch.randn(65, 90), torch.randn(90, 65).t()):                                # contiguous and transposed
    B = torch.randn(90, 47)
    C = torch.empty(65, 47)
    grid = (triton.cdiv(65, 32), triton.cdiv(47, 32))
    matmul_kernel[grid](A, B, C, 65, 47, 90, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                        C.stride(0), C.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    torch.testing.assert_close(C, A @ B, atol=1e-4, rtol=1e-4)
print("TUTORIAL-OK")
"""


def tutorial_script(qmd_text: str) -> str:
    """The TUTORIAL's ``{.python .tested}`` blocks in order, under the interpreter, then the checks above."""
    blocks = TESTED_BLOCK.findall(qmd_text)
    head = ("import os\nos.environ['TRITON_INTERPRET'] = '1'\n"
            "import torch, triton, triton.language as tl\n")
    return head + "\n".join(blocks) + TUTORIAL_CHECKS


def test_tutorial_code_runs_on_cpu_interpreter(tmp_path):
    text = (ROOT / "TUTORIAL.qmd").read_text(encoding="utf-8")
    assert len(TESTED_BLOCK.findall(text)) >= 5, "the tutorial's kernels must stay tagged {.python .tested}"
    script = tmp_path / "tutorial_blocks.py"       # a real file: @triton.jit reads the source
    script.write_text(tutorial_script(text), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("TCOURSE_DEVICE", "TCOURSE_RECORD")}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "TUTORIAL-OK" in r.stdout, (r.stdout + r.stderr)[-3000:]


def test_tutorial_script_catches_a_broken_kernel(tmp_path):
    text = (ROOT / "TUTORIAL.qmd").read_text(encoding="utf-8").replace(
        'other=-float("inf"))', "other=0.0)")   # the mistake the tutorial warns about
    script = tmp_path / "broken.py"
    script.write_text(tutorial_script(text), encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in os.environ.items() if k not in ("TCOURSE_DEVICE", "TCOURSE_RECORD")})
    assert r.returncode != 0 and "TUTORIAL-OK" not in r.stdout


# ===================================================================================================
# Every check can fail: synthetic inputs
# ===================================================================================================
GOOD_CFG = {
    "project": {"type": "book", "render": ["index.qmd", "a.qmd", "part.qmd", "b.ipynb", "app.qmd"]},
    "book": {"title": "T", "search": True,
             "chapters": ["index.qmd", "a.qmd", {"part": "part.qmd", "chapters": ["b.ipynb"]}],
             "appendices": ["app.qmd"]},
    "lang": "zh", "execute": {"enabled": False}, "format": {"html": {"code-copy": True}},
}


def test_config_checks_accept_good_synthetic_config():
    assert check_config_shape(GOOD_CFG) == [] and check_render_list(GOOD_CFG) == []
    assert book_pages(GOOD_CFG) == ["index.qmd", "a.qmd", "part.qmd", "b.ipynb", "app.qmd"]


@pytest.mark.parametrize("mutate, expect", [
    (lambda c: c["project"].update(type="website"), "project.type"),
    (lambda c: c["project"].update(outdir="x"), "unknown project key"),
    (lambda c: c.update(unknown_key=1), "unknown top-level key"),
    (lambda c: c["book"].update(chapter=[]), "unknown book key"),
    (lambda c: c["book"]["chapters"].pop(0), "index.qmd"),
    (lambda c: c["book"]["chapters"].append({"part": "P", "chapters": []}), "non-empty list"),
    (lambda c: c["book"]["chapters"].append({"part": "P", "files": ["x.qmd"]}), "exactly the keys"),
    (lambda c: c["book"]["chapters"].append("notes.txt"), "not a .qmd"),
    (lambda c: c["book"]["chapters"].append("a.qmd"), "listed twice"),
    (lambda c: c.update(lang="en"), "lang"),
    (lambda c: c.update(execute={"enabled": True}), "execute.enabled"),
    (lambda c: c.pop("execute"), "execute.enabled"),
    (lambda c: c["book"].update(search=False), "search"),
    (lambda c: c.update(format={"html": {}}), "code-copy"),
])
def test_config_shape_rejects(mutate, expect):
    c = json.loads(json.dumps(GOOD_CFG))
    mutate(c)
    assert any(expect in p for p in check_config_shape(c)), check_config_shape(c)


def test_render_list_rejects_mismatch():
    c = json.loads(json.dumps(GOOD_CFG))
    c["project"]["render"] = ["index.qmd", "a.qmd", "README.md"]
    probs = check_render_list(c)
    assert any("README.md is rendered" in p for p in probs) and any("b.ipynb is in the book" in p for p in probs)
    del c["project"]["render"]
    assert check_render_list(c) != []


def write_nb(path: Path, cells: list[dict], metadata: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    full = []
    for c in cells:
        c = {"metadata": {}, **c}
        if c["cell_type"] == "code":
            c.setdefault("outputs", [])
            c.setdefault("execution_count", None)
        full.append(c)
    path.write_text(json.dumps({"cells": full, "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def md(text):
    return {"cell_type": "markdown", "source": text}


def code(text, outputs=None):
    return {"cell_type": "code", "source": text, "outputs": outputs or []}


def test_files_exist_rejects_missing(tmp_path):
    (tmp_path / "a.qmd").write_text("# A\n")
    assert check_files_exist(tmp_path, ["a.qmd"]) == []
    assert check_files_exist(tmp_path, ["a.qmd", "missing.ipynb"]) == [
        "missing.ipynb is listed in _quarto.yml but does not exist"]


def test_titles(tmp_path):
    (tmp_path / "fm.qmd").write_text("---\ntitle: \"有标题\"\n---\n\ntext\n")
    (tmp_path / "h1.qmd").write_text("```\n# not a title (code)\n```\n# 标题\n")
    (tmp_path / "none.qmd").write_text("## only a level-two heading\n\n```\n# comment in code\n```\n")
    write_nb(tmp_path / "good.ipynb", [md("# 第 1 章\n\n正文"), code("x = 1")])
    write_nb(tmp_path / "meta.ipynb", [code("x = 1")], {"title": "From metadata"})
    write_nb(tmp_path / "raw.ipynb", [{"cell_type": "raw", "source": "---\ntitle: Raw\n---"}, md("text")])
    write_nb(tmp_path / "bad.ipynb", [md("no heading here"), md("# too late")])
    write_nb(tmp_path / "code_only.ipynb", [code("# comment, not a heading")])
    ok = ["fm.qmd", "h1.qmd", "good.ipynb", "meta.ipynb", "raw.ipynb"]
    assert check_titles(tmp_path, ok) == []
    assert [p.split()[0] for p in check_titles(tmp_path, ["none.qmd", "bad.ipynb", "code_only.ipynb"])] == [
        "none.qmd", "bad.ipynb", "code_only.ipynb"]


def test_links(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "d.svg").write_text("<svg/>")
    (tmp_path / "other.qmd").write_text("# Other\n")
    (tmp_path / "outside.qmd").write_text("# Not in the book\n")
    (tmp_path / "_inc.md").write_text("![inc](img/missing-from-include.png)\n")
    (tmp_path / "page.qmd").write_text(
        "# P\n\n![图](img/d.svg){#fig-d}\n[ok](other.qmd#sec) [web](https://x.org/a.png) [anchor](#here)\n"
        "`![in code](img/nope.png)`\n```\n![fenced](img/nope.png)\n```\n"
        "1. a list item\n\n   ```bash\n   ![indented fence](img/nope.png)\n   ```\n"
        "![missing](img/gone.svg)\n<img src=\"img/gone2.png\">\n[page not in book](outside.qmd)\n"
        "{{< include _inc.md >}}\n\n## Here we go {.unnumbered}\n\n## 第二节 {#sec-two}\n\n"
        "[a](#here-we-go) [b](#sec-two) [c](#第二节-no) [d](#sec-three)\n")
    write_nb(tmp_path / "nb" / "c.ipynb", [md("# C\n![d](../img/d.svg) ![bad](img/d.svg)")])
    probs = check_links(tmp_path, ["page.qmd", "other.qmd", "nb/c.ipynb"])
    assert sorted(probs) == sorted([
        "page.qmd: img/gone.svg does not exist",
        "page.qmd: img/gone2.png does not exist",
        "page.qmd: links to outside.qmd, which is not a page of the book",
        "page.qmd: img/missing-from-include.png does not exist",
        "page.qmd: #here matches no heading or id on the page",
        "page.qmd: #第二节-no matches no heading or id on the page",
        "page.qmd: #sec-three matches no heading or id on the page",
        "nb/c.ipynb: img/d.svg does not exist",
    ])


def test_crossrefs(tmp_path):
    (tmp_path / "a.qmd").write_text(
        "# A\n\n## 节 {#sec-a}\n\n![x](x.svg){#fig-x width=\"50%\"}\n\n见 @fig-x 和 @sec-b 。`@fig-code` 不算。\n"
        "`@triton.jit` 在代码里不算；邮箱 a@b.org 也不算。\n")
    write_nb(tmp_path / "b.ipynb", [md("# B\n\n## 另一节 {#sec-b}\n\n如 @fig-plot 所示"),
                                    code("#| label: fig-plot\nplt.plot([1])")])
    assert check_crossrefs(tmp_path, ["a.qmd", "b.ipynb"]) == []
    (tmp_path / "c.qmd").write_text("# C\n\n见 @fig-missing ，另见@sec-a，以及 @fig-x图。\n\n## 重复 {#sec-a}\n\n"
                                    "装饰器 @triton.jit 写在函数上面。\n")
    probs = check_crossrefs(tmp_path, ["a.qmd", "b.ipynb", "c.qmd"])
    assert any("sec-a is defined twice" in p for p in probs)
    assert any("@fig-missing has no target" in p for p in probs)
    assert any("space before @sec-a" in p for p in probs)
    assert any("@fig-x图 has no target" in p for p in probs)
    assert any("@triton.jit is read as a citation" in p for p in probs)


def test_interpreter_markers_come_from_tcourse():
    m = interpreter_markers()
    assert "CPU interpreter (TRITON_INTERPRET=1)" in m and "[CPU]" in m


def test_recorded_outputs(tmp_path):
    markers = interpreter_markers()
    gpu_label = {"tcourse": {"recorded": {"device": "NVIDIA H200", "date": "2026-11-30"}}}
    stream = lambda t: {"output_type": "stream", "name": "stdout", "text": t}  # noqa: E731
    write_nb(tmp_path / "clean.ipynb", [md("# A"), code("x")])
    write_nb(tmp_path / "gpu.ipynb", [md("# B"), code("rt = tcourse.setup()", [stream("mode  GPU (compiled kernels)\n")])],
             gpu_label)
    write_nb(tmp_path / "cpu.ipynb", [md("# C"), code("rt = tcourse.setup()", [
        stream("mode  CPU interpreter (TRITON_INTERPRET=1)\n")])], gpu_label)
    write_nb(tmp_path / "cpu2.ipynb", [md("# D"), code("d = rt.live_or_recorded(...)", [
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/plain": ["[CPU] 带宽扫描需要 GPU\n"]}}])], gpu_label)
    write_nb(tmp_path / "unlabelled.ipynb", [md("# E"), code("1", [stream("1\n")])])
    assert check_recorded_outputs(tmp_path, ["clean.ipynb", "gpu.ipynb"], markers) == []
    probs = check_recorded_outputs(tmp_path, ["cpu.ipynb", "cpu2.ipynb", "unlabelled.ipynb"], markers)
    assert [p.split(":")[0] for p in probs] == ["cpu.ipynb", "cpu2.ipynb", "unlabelled.ipynb"]


def test_panels_need_static_plot(tmp_path):
    write_nb(tmp_path / "ok.ipynb", [md("# A"), code("tcourse.widgets.panel(render, B=choice([1, 2]))"),
                                     md("下面是 H200 的记录"), code("tcourse.viz.plot_sweep(data['x'], data['y'])")])
    write_nb(tmp_path / "last.ipynb", [md("# B"), code("panel(render, B=choice([1]))")])
    write_nb(tmp_path / "twice.ipynb", [md("# C"), code("panel(f, B=c)"), code("panel(g, B=c)"),
                                        code("plt.plot(recorded)")])
    write_nb(tmp_path / "nothing.ipynb", [md("# D"), code("widgets.panel(f, B=c)"), code("print('done')")])
    assert check_panels_have_static_plot(tmp_path, ["ok.ipynb"]) == []
    probs = check_panels_have_static_plot(tmp_path, ["last.ipynb", "twice.ipynb", "nothing.ipynb"])
    assert [p.split(":")[0] for p in probs] == ["last.ipynb", "twice.ipynb", "nothing.ipynb"]


def test_appendix_builder_and_sync(tmp_path):
    ba = load_build_appendix()
    results = tmp_path / "results" / "h200"
    results.mkdir(parents=True)
    out = tmp_path / "_h200_results.md"
    out.write_text(ba.render(results, tmp_path), encoding="utf-8")
    assert check_appendix_in_sync(results, out, tmp_path) == []
    assert "还没有录制的结果" in out.read_text(encoding="utf-8")
    (results / "ch02_axpy_sweep.json").write_text(json.dumps({
        "name": "ch02_axpy_sweep",
        "meta": {"device": "NVIDIA H200", "date": "2026-11-30", "torch": "2.11.0", "triton": "3.6.0", "driver": "580"},
        "data": {"256": {"ours": {"median_ms": 0.0123456}, "speedup": 1.5, "unit": "GB/s"},
                 "512": {"ours": {"median_ms": 0.02}, "speedup": 12345.6, "unit": "a|b"}}}))
    (results / "bench_suite.json").write_text(json.dumps({
        "device": "NVIDIA H200", "date": "2026-11-30",
        "results": [{"kernel": "axpy", "ours_gbps": 4300.5}, {"kernel": "softmax", "ours_gbps": 3611.0}]}))
    (results / "sweep.png").write_bytes(b"\x89PNG")
    assert check_appendix_in_sync(results, out, tmp_path) != []   # stale file is caught
    text = ba.render(results, tmp_path)
    assert "| NVIDIA H200 |" in text and "`bench_suite.json`" in text and "`ch02_axpy_sweep.json`" in text
    assert "| 256 | 0.01235 | 1.5 | GB/s |" in text          # dict of records -> one row per key, flattened
    assert "12346" in text and "a\\|b" in text                # big floats without exponent, pipes escaped
    assert "| axpy | 4300 |" in text and "| softmax | 3611 |" in text
    assert "![sweep](results/h200/sweep.png)" in text
    assert text == ba.render(results, tmp_path)                # deterministic
