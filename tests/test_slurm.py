"""`grade --executor slurm` against a real single-node Slurm (tests/slurm_cluster.py), not a mock.

The cluster (slurmctld + slurmd + slurmdbd on MariaDB, munge) is started for this module and stopped
by PID afterwards; the module is skipped, with the reason, where it cannot start (not root, no apt-get,
no submitit). 12 small ex01 submissions (correct, wrong, one that kills its kernel, one that hangs,
one that is not a notebook) are graded as a job array; one array task is killed mid-run, the same
command is run again, and the gradebook must equal the local executor's on the same folder.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import class_submissions
import slurm_cluster
from grader import batch, cli, executors, grade, sandbox

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = "30"  # per cell: the hanging submission costs this once
MIX = {"correct": 5, "wrong-formula": 2, "no-store": 1, "torch-instead": 1, "crash": 1, "hang": 1, "unusable": 1}


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("submitit", reason="submitit is not installed (pip install -r requirements-dev.txt)")
    root = Path(tempfile.mkdtemp(prefix="tcourse-slurm-"))  # not under pytest's 0700 tmp: daemons run as other users
    c = slurm_cluster.Cluster(root)
    try:
        c.start()
    except slurm_cluster.Unavailable as e:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"cannot start a single-node Slurm here: {e}")
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)


def gradebook(out: Path) -> dict[str, dict]:
    """Rows by file name, without the timing column."""
    rows = csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))
    return {Path(r["file"]).name: {k: v for k, v in r.items() if k != "duration_s"} for r in rows}


def grade_cmd(subs: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grader", "grade", str(subs), "--out", str(out), "--device", "cpu",
            "--timeout", TIMEOUT, *extra]


def test_missing_sbatch_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "a.ipynb").write_text("{}", encoding="utf-8")
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--executor", "slurm", "--device", "cpu"]) == 2
    assert "`sbatch` is not on PATH" in capsys.readouterr().err


def test_gpu_grading_on_slurm_needs_gpus_per_task(tmp_path, capsys):
    (tmp_path / "a.ipynb").write_text("{}", encoding="utf-8")
    args = ["grade", str(tmp_path), "--out", str(tmp_path / "out"), "--executor", "slurm", "--device", "cuda"]
    assert cli.main(args) == 2
    assert "--device cuda with --executor slurm needs --gpus-per-task 1" in capsys.readouterr().err


def _boom(x):
    if x == 2:
        raise RuntimeError("task 2 broke")
    return x * 10


def test_local_executor_reports_each_task_and_its_progress():
    seen = []
    outcomes = sorted(executors.Local(2).run(_boom, [(1,), (2,), (3,)], seen.append), key=lambda o: o.index)
    assert [(o.value, o.error) for o in outcomes] == [(10, ""), (None, "RuntimeError: task 2 broke"), (30, "")]
    assert seen[-1] == {"pending": 0, "running": 0, "done": 2, "failed": 1}
    assert max(c["running"] for c in seen) <= 2 and all(sum(c.values()) <= 3 for c in seen)


def test_a_recorded_submission_is_not_graded_twice(tmp_path, monkeypatch):
    """A task that finds a submission already recorded (another task of a requeued array finished it)
    returns the record instead of grading it again."""
    sub = tmp_path / "s.ipynb"
    sub.write_text(class_submissions.submission("correct", "s"), encoding="utf-8")
    out = tmp_path / "out"
    (out / ".cache").mkdir(parents=True)
    stem, key = batch.stem_for(sub), batch.content_key(sub, batch.grader_hash(), "cpu")
    row = {"file": str(sub), "exercise": "ex01_axpy", "score": 9, "max_score": 9, "passed": 9, "tests": 12,
           "status": "ok", "duration_s": 5}
    (out / f"{stem}.json").write_text("{}", encoding="utf-8")
    (out / ".cache" / f"{stem}.json").write_text(json.dumps({"stem": stem, "key": key, "row": row}), encoding="utf-8")
    monkeypatch.setattr(grade, "grade", lambda *a, **k: pytest.fail("graded again"))
    assert batch.grade_chunk([(str(sub), stem, key)], str(out), "cpu", 30) == [{"stem": stem, "key": key, "row": row}]
    # a record made with another key (the file changed, or the grader) does not count
    other = batch.content_key(sub, "another grader", "cpu")
    assert batch.load_record(out, stem, other) is None


def test_unknown_partition_is_a_clear_error(cluster, tmp_path):
    (tmp_path / "a.ipynb").write_text("{}", encoding="utf-8")
    r = subprocess.run(grade_cmd(tmp_path, tmp_path / "out", "--executor", "slurm", "--partition", "gpu-h200"),
                       capture_output=True, text=True, env=cluster.env, timeout=120)
    assert r.returncode == 2
    assert "--partition gpu-h200: no such Slurm partition (this cluster has: debug)" in r.stderr


def test_job_array_survives_a_killed_task_and_matches_local(cluster, tmp_path):
    subs = tmp_path / "subs"
    kinds = class_submissions.make_class(subs, MIX)
    local, slurm = tmp_path / "local", tmp_path / "slurm"
    unsafe = [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]  # a laptop without bubblewrap
    assert subprocess.run(grade_cmd(subs, local, "--workers", "2", *unsafe), capture_output=True, env=cluster.env,
                          timeout=900).returncode == 0
    want = gradebook(local)
    assert {want[n]["status"].split(":")[0] for n, k in kinds.items() if k == "correct"} == {"ok"}
    assert want["student010_hang.ipynb"]["passed"] == "0" and want["student009_crash.ipynb"]["passed"] == "0"

    # first run: kill one array task as soon as it runs
    first = subprocess.Popen(grade_cmd(subs, slurm, "--executor", "slurm", "--chunk", "2"), env=cluster.env,
                             stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    killed, t0 = None, time.monotonic()
    while killed is None and first.poll() is None and time.monotonic() - t0 < 300:
        running = cluster.run("squeue", "-h", "-t", "R", "-o", "%i").stdout.split()
        if running:
            killed = running[0]
            assert cluster.run("scancel", killed).returncode == 0
        time.sleep(0.5)
    out, err = first.communicate(timeout=900)
    assert killed and re.fullmatch(r"\d+_\d+", killed), (killed, err)
    assert first.returncode == 1, err
    assert re.search(r"\[slurm\] tasks: \d+ pending, \d+ running, \d+ done", err)
    assert f"Slurm task {killed} CANCELLED" in err
    missing = [n for n, r in gradebook(slurm).items() if r["status"].startswith("not graded")]
    assert 1 <= len(missing) <= 2, missing  # the killed task's chunk
    state = cluster.run("sacct", "-n", "-X", "-j", killed, "-o", "State").stdout
    assert "CANCELLED" in state

    # second run: only the missing submissions are graded, nothing graded before is touched
    before = {p.name: p.stat().st_mtime_ns for p in slurm.glob("*.json")}
    second = subprocess.run(grade_cmd(subs, slurm, "--executor", "slurm", "--chunk", "2"), capture_output=True,
                            text=True, env=cluster.env, timeout=900)
    assert second.returncode == 0, second.stderr
    assert f"{len(kinds) - len(missing)} unchanged submission(s) not graded again" in second.stderr
    after = {p.name: p.stat().st_mtime_ns for p in slurm.glob("*.json")}
    assert {n: t for n, t in after.items() if n in before} == before
    assert len(after) - len(before) == sum(kinds[m] != "unusable" for m in missing)
    assert gradebook(slurm) == want
    for name in kinds:  # the same per-submission verdicts, test by test
        lj, sj = (next(d.glob(f"{Path(name).stem}-*.json"), None) for d in (local, slurm))
        if lj is not None:
            statuses = [[t["status"] for t in json.loads(j.read_text(encoding="utf-8"))["tests"]] for j in (lj, sj)]
            assert statuses[0] == statuses[1], name
    assert os.listdir(slurm / ".slurm")  # submitit's logs stay with the gradebook
