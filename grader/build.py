"""Regenerate exercises/ and solutions/ from grader/exercise_src/ (never edit those notebooks by hand).

    python -m grader build            # write both folders
    python -m grader build --check    # exit 1 listing notebooks that are out of sync
"""
from __future__ import annotations

from pathlib import Path

from tcourse import nbtools

from . import source

REPO = Path(__file__).resolve().parent.parent
FOLDERS = {"exercises": False, "solutions": True}  # folder -> with the model answers


def expected() -> dict[Path, str]:
    out = {}
    for ex in source.exercise_ids():
        for folder, solution in FOLDERS.items():
            nb = nbtools.normalize(source.notebook(ex, solution), ex)
            out[REPO / folder / f"{ex}.ipynb"] = nbtools.dumps(nb)
    return out


def build(check: bool) -> int:
    stale = []
    want = expected()
    for path, text in want.items():
        have = path.read_text(encoding="utf-8") if path.exists() else None
        if have != text:
            stale.append(path)
            if not check:
                path.write_text(text, encoding="utf-8")
    for folder in FOLDERS:
        for extra in sorted((REPO / folder).glob("*.ipynb")):
            if source._ID.match(extra.stem) and extra not in want:
                stale.append(extra)
                if not check:
                    extra.unlink()
    for p in stale:
        print(("out of sync: " if check else "rebuilt: ") + str(p.relative_to(REPO)))
    if check and stale:
        print("run: python -m grader build")
    return 1 if (check and stale) else 0


if __name__ == "__main__":  # `python -m grader.build [--check]`, as AUTHORING.md spells it
    import sys

    sys.exit(build("--check" in sys.argv[1:]))
