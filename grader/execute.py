"""Run a rebuilt notebook in its own worker process, with a per-cell timeout and a whole-submission budget.

The grader never imports the student's code. It starts ``python -m grader.worker`` (which starts
the Jupyter kernel through nbclient) in a fresh session, waits at most ``budget`` seconds, then
kills the worker and every process below it (the kernel included). What comes back is only the
worker's ``status.jsonl`` lines, validated here, and the files the harness wrote.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil

from .harness import WORKDIR_ENV

REPO = Path(__file__).resolve().parent.parent
CELL_STATUSES = ("ok", "error", "timeout", "dead")


@dataclass
class Execution:
    cells: dict[str, dict] = field(default_factory=dict)  # cell id -> status line
    budget_exceeded: bool = False
    worker_rc: int | None = None
    worker_stderr: str = ""


def _limits():  # runs in the worker before exec: no core dumps, bounded files (inherited by the kernel)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 30, 2 << 30))


def _kill_tree(pid: int) -> None:
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _valid(line) -> bool:
    return (isinstance(line, dict) and isinstance(line.get("id"), str) and line.get("status") in CELL_STATUSES
            and isinstance(line.get("error"), str) and isinstance(line.get("role"), str))


def run(nb: nbformat.NotebookNode, workdir: Path, device: str, cell_timeout: float, budget: float) -> Execution:
    nbformat.write(nb, workdir / "notebook.ipynb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TCOURSE_", "TRITON_INTERPRET"))}
    env.update({"TCOURSE_DEVICE": device, WORKDIR_ENV: str(workdir), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
                "MPLBACKEND": "Agg"})
    with open(workdir / "worker.log", "wb") as errf:
        proc = subprocess.Popen([sys.executable, "-m", "grader.worker", str(workdir), str(cell_timeout)],
                                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                start_new_session=True, preexec_fn=_limits)
        ex = Execution()
        try:
            ex.worker_rc = proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            ex.budget_exceeded = True
            _kill_tree(proc.pid)
            proc.wait()
        else:
            _kill_tree(proc.pid)  # a kernel or a child of the student's that outlived the worker
    log = workdir / "worker.log"
    ex.worker_stderr = log.read_bytes()[-4000:].decode("utf-8", "replace") if log.exists() else ""
    status = workdir / "status.jsonl"
    if status.exists():
        with open(status, encoding="utf-8", errors="replace") as f:
            for raw in f:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if _valid(line):
                    ex.cells[line["id"]] = line
    return ex
