"""Keep notebooks normalized: stable cell ids, no stray metadata, deliberate outputs.

    python -m tcourse.nbtools normalize notebooks/*.ipynb   # rewrite in place
    python -m tcourse.nbtools check notebooks/*.ipynb       # exit 1 listing files that would change
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

NB_META_KEYS = {"kernelspec", "language_info", "tcourse"}  # tcourse: recording label, exercise identity
CELL_META_KEYS = {"tags", "tcourse"}
LANGUAGE_INFO = {"name": "python"}  # no version: it differs between machines (tcourse.labserver fills it in the lab)
_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


def normalize(nb: nbformat.NotebookNode, stem: str) -> nbformat.NotebookNode:
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {k: v for k, v in nb.metadata.items() if k in NB_META_KEYS}
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    seen = set()
    for i, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if not cid or not _ID.match(cid) or cid in seen:
            cid = f"{stem[:40]}-{i:02d}"
            n = 0
            while cid in seen:
                n += 1
                cid = f"{stem[:40]}-{i:02d}-{n}"
            cell["id"] = cid
        seen.add(cid)
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in CELL_META_KEYS}
        if isinstance(cell.source, list):
            cell.source = "".join(cell.source)
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                if "metadata" in out:  # display_data/execute_result carry a metadata dict; keep it empty
                    out["metadata"] = {}
        elif cell.cell_type == "markdown" and not cell.get("attachments"):
            cell.pop("attachments", None)
    return nb


def dumps(nb) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def normalized_text(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    return dumps(normalize(nb, path.stem))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("normalize", "check"):
        print(__doc__)
        return 2
    changed = []
    for name in argv[1:]:
        p = Path(name)
        text = normalized_text(p)
        if p.read_text(encoding="utf-8") != text:
            changed.append(p)
            if argv[0] == "normalize":
                p.write_text(text, encoding="utf-8")
    for p in changed:
        print(("normalized " if argv[0] == "normalize" else "not normalized: ") + str(p))
    return 1 if (changed and argv[0] == "check") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
