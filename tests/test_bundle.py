"""`python -m grader autograder-bundle --platform gradescope DIR`: the zip's layout, and its
run_autograder run against a fake /autograder layout in a temporary folder."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import class_submissions
import platform_schemas as schema
from grader import bundle, cli

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def zpath(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle")
    assert cli.main(["autograder-bundle", "--platform", "gradescope", str(out), "--exercise", "ex01_axpy"]) == 0
    return out / "autograder.zip"


def test_zip_has_what_gradescope_expects(zpath):
    z = zipfile.ZipFile(zpath)
    names = set(z.namelist())
    assert {"setup.sh", "run_autograder", "bundle.json", "requirements.txt", "requirements-lock.txt"} <= names
    assert {"grader/cli.py", "grader/harness.py", "grader/exercise_src/ex01_axpy.py", "tcourse/__init__.py"} <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    for exe in ("setup.sh", "run_autograder"):
        assert stat.S_IMODE(z.getinfo(exe).external_attr >> 16) & 0o111, f"{exe} is not executable"
        assert z.read(exe).startswith(b"#!/usr/bin/env bash\n")
    meta = json.loads(z.read("bundle.json"))
    assert meta["platform"] == "gradescope" and meta["exercise"] == "ex01_axpy"
    assert meta["resources"]["gradescope_memory_mb"] >= 768
    measured = bundle.memory_needed_mb()
    assert meta["resources"]["memory_needed_mb"] == (round(measured) if measured else None)
    setup = z.read("setup.sh").decode()
    assert "-r requirements.txt -c requirements-lock.txt" in setup and "whl/cpu" in setup
    r = subprocess.run(["bash", "-n", "-c", setup], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_unknown_exercise_is_refused(tmp_path, capsys):
    assert cli.main(["autograder-bundle", "--platform", "gradescope", str(tmp_path), "--exercise", "ex99"]) == 2
    assert "not an auto-graded exercise" in capsys.readouterr().err


def fake_autograder(tmp_path: Path, zpath: Path, upload: dict[str, str]) -> Path:
    """/autograder as Gradescope lays it out: source/ (the zip), run_autograder, submission/."""
    root = tmp_path / "autograder"
    zipfile.ZipFile(zpath).extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    for name, text in upload.items():
        (root / "submission" / name).write_text(text, encoding="utf-8")
    return root


def run_autograder(root: Path) -> tuple[dict, str]:
    # the venv setup.sh would make is this interpreter; without the repo on its path (the .pth file)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    env.pop("PYTHONSAFEPATH", None)  # the bundle's own grader/ must come first on the path (the cwd)
    r = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8")), r.stdout


def test_run_autograder_grades_from_the_bundle(tmp_path, zpath):
    root = fake_autograder(tmp_path, zpath, {"my_axpy.ipynb": class_submissions.submission("no-mask", "s1")})
    used = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"], cwd=root / "source",
                          capture_output=True, text=True).stdout.strip()
    assert Path(used).is_relative_to(root / "source"), f"the bundle's grader is not the one imported: {used}"
    doc, stdout = run_autograder(root)
    assert schema.check_gradescope(doc) == []
    assert doc["score"] < sum(t["max_score"] for t in doc["tests"])  # shapes that are not a multiple of BLOCK_SIZE fail
    assert any("越界写" in t["output"] for t in doc["tests"] if t.get("status") == "failed")
    assert "score" in stdout  # the instructor's table, on stdout


def test_run_autograder_full_marks_and_bad_uploads(tmp_path, zpath):
    root = fake_autograder(tmp_path / "a", zpath, {"axpy.ipynb": class_submissions.submission("correct", "s2"),
                                                   "notes.txt": "my notes"})
    doc, _ = run_autograder(root)
    assert schema.check_gradescope(doc) == [] and doc["score"] == sum(t["max_score"] for t in doc["tests"]) > 0
    root = fake_autograder(tmp_path / "b", zpath, {"axpy.ipynb": "not json"})
    doc, _ = run_autograder(root)
    assert schema.check_gradescope(doc) == [] and doc["score"] == 0 and doc["output"].startswith("无法评分")
    root = fake_autograder(tmp_path / "c", zpath, {"axpy.py": "print(1)"})
    doc, _ = run_autograder(root)
    assert schema.check_gradescope(doc) == [] and doc["score"] == 0 and "没有找到 .ipynb" in doc["output"]
