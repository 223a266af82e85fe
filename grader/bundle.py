"""Autograder bundles: ``python -m grader autograder-bundle --platform gradescope DIR [--exercise EX]``.

Writes ``DIR/autograder.zip``, the zip Gradescope expects at its root: ``setup.sh`` (a venv with the
course's pinned requirements, CPU torch), ``run_autograder``, ``bundle.json`` (exercise, resources)
and the grader with the ``tcourse`` library it needs. Gradescope's default container (about half a
CPU, 768 MB) is the CPU interpreter tier: GPU-only tests are skipped and left out of the score, as
with ``check --device cpu``.

``run_autograder`` calls ``python -m grader.bundle AUTOGRADER_ROOT`` (:func:`run`): it grades the
notebook in ``ROOT/submission`` and writes ``ROOT/results/results.json`` in Gradescope's format
(:func:`grader.formats.gradescope`); the instructor's full table goes to stdout, which Gradescope shows
only to instructors. ``AUTOGRADER_ROOT`` defaults to ``/autograder``.
"""
from __future__ import annotations

import json
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MEMORY = REPO / "results" / "cpu" / "autograder_memory.json"  # written by scripts/grading_bench.py
GRADESCOPE_DEFAULT_MB = 768
CELL_TIMEOUT = 60.0

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, in /autograder/source, when it builds the autograder image.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap >/dev/null
python3 -m venv /autograder/venv
# CPU wheels of torch (the CUDA ones are gigabytes and no GPU is there); the rest from PyPI, pinned.
/autograder/venv/bin/pip install -q --disable-pip-version-check \\
    --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple \\
    -r requirements.txt -c requirements-lock.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this in /autograder for every submission. AUTOGRADER_ROOT/AUTOGRADER_PYTHON let a test
# run it against a fake /autograder layout.
set -uo pipefail
ROOT=${AUTOGRADER_ROOT:-/autograder}
PY=${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}
cd "$ROOT/source"
exec "$PY" -m grader.bundle "$ROOT"
"""


def memory_needed_mb() -> float | None:
    """Peak memory (MB) of grading one submission on CPU, as measured (PSS of the process tree: shared
    libraries counted once, as a container limit does); None before it is measured."""
    try:
        return json.loads(MEMORY.read_text(encoding="utf-8"))["peak_tree_pss_mib"] * 1.048576
    except (OSError, ValueError, KeyError):
        return None


def metadata(exercise: str | None) -> dict:
    need = memory_needed_mb()
    resources = {"device": "cpu", "cell_timeout_s": CELL_TIMEOUT,
                 "memory_needed_mb": round(need) if need else None,
                 "memory_measured_in": MEMORY.relative_to(REPO).as_posix() if need else None}
    if need and need > GRADESCOPE_DEFAULT_MB * 0.9:  # less than 10 % headroom in the default container
        resources["gradescope_memory_mb"] = 1536
        resources["note"] = (f"grading needs about {need:.0f} MB: choose a 1.5 GB (or larger) container in the "
                             "assignment's autograder settings")
    else:
        resources["gradescope_memory_mb"] = GRADESCOPE_DEFAULT_MB
        resources["note"] = "the default container (0.5 CPU, 768 MB) is enough"
    if need is None:
        resources["note"] = "memory not measured yet (run scripts/grading_bench.py --memory-only); 768 MB assumed"
    return {"platform": "gradescope", "exercise": exercise, "resources": resources,
            "built": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def build(out_dir: Path, exercise: str | None) -> Path:
    """Write ``out_dir/autograder.zip``; returns its path."""
    from . import registry

    if exercise is not None and (exercise not in registry.exercises() or registry.get(exercise).written):
        raise ValueError(f"--exercise {exercise}: not an auto-graded exercise ({', '.join(registry.exercises())})")
    out_dir.mkdir(parents=True, exist_ok=True)
    zpath = out_dir / "autograder.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text, mode in (("setup.sh", SETUP_SH, 0o755), ("run_autograder", RUN_AUTOGRADER, 0o755),
                                 ("bundle.json", json.dumps(metadata(exercise), indent=1) + "\n", 0o644)):
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, text)
        for req in ("requirements.txt", "requirements-lock.txt"):
            z.write(REPO / req, req)
        for pkg in ("grader", "tcourse"):
            for f in sorted((REPO / pkg).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                    z.write(f, f.relative_to(REPO).as_posix())
    return zpath


def run(root: Path) -> int:
    """Grade the upload in ``root/submission``; write ``root/results/results.json``."""
    from . import formats, grade, rebuild, report

    meta = json.loads((root / "source" / "bundle.json").read_text(encoding="utf-8"))
    (root / "results").mkdir(parents=True, exist_ok=True)
    found = sorted(p for p in (root / "submission").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    now = datetime.now(timezone.utc)
    if not found:
        doc = {"score": 0.0, "output": "没有找到 .ipynb 文件：请上传练习的 Notebook（.ipynb）。", "output_format": "text",
               "tests": []}
    else:
        try:
            r = grade.grade(found[0], "cpu", meta["resources"]["cell_timeout_s"], exercise=meta["exercise"])
            print(report.table(r))
            entry = formats.Entry(found[0].stem, str(found[0]), r.as_dict(report.versions()), "ok")
        except rebuild.Unusable as e:
            print(f"unusable: {e}")
            entry = formats.Entry(found[0].stem, str(found[0]), None, f"unusable: {e}")
        doc = formats.gradescope(entry, now)
        if len(found) > 1:
            doc["output"] += f"\n注意：上传了 {len(found)} 个 Notebook，只评了 {found[0].name}。"
    (root / "results" / "results.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n",
                                                   encoding="utf-8")
    return 0


def main(platform: str, out_dir: Path, exercise: str | None) -> int:
    try:
        zpath = build(out_dir, exercise)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    res = metadata(exercise)["resources"]
    print(f"{platform} autograder -> {zpath} ({zpath.stat().st_size / 2**20:.1f} MiB); {res['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
