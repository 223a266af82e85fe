"""Run a rebuilt notebook in its own worker process, with limits, a per-cell timeout and a whole-submission budget.

The grader never imports the student's code. It starts ``python -m grader.worker`` (which starts
the sandboxed Jupyter kernel through nbclient, see :mod:`grader.sandbox`) in a fresh session under
resource limits the kernel inherits: no core dumps, bounded files, CPU seconds, and on the CPU an
address-space limit (a CUDA context reserves far more address space than it uses, so on a GPU the
worker's resident-memory watchdog is the memory limit). After ``budget`` seconds the worker and
everything below it are killed; afterwards any process still carrying this run's marker in its
environment (a daemon that escaped the process tree) is killed too. What comes back is only the
worker's ``status.jsonl`` lines, validated here, and the files the harness wrote.
"""
from __future__ import annotations

import json
import os
import resource
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil

from . import procs as procs_mod
from . import sandbox

REPO = Path(__file__).resolve().parent.parent
CELL_STATUSES = ("ok", "error", "timeout", "dead")
MEM_LIMIT_MB = 6144          # resident memory of the kernel's process tree (watchdog, CPU and GPU)
CPU_AS_LIMIT = 12 << 30      # address space per process on the CPU: torch + the interpreter need ~3 GiB
FILE_LIMIT = 2 << 30         # largest file a process may write
REPLAY_LOG_CAP = 1 << 20     # the replay's own output kept in ctl/replay.log (a kernel's prints can flood it)
MARKER_ENV = "TCOURSE_GRADER_RUN"


@dataclass
class Execution:
    cells: dict[str, dict] = field(default_factory=dict)  # cell id -> status line
    # template/answer cells that did not finish when run again in a fresh kernel (after a case timed out or
    # crashed): the worker stopped there, so the cases after it have no line
    rerun_failures: list[dict] = field(default_factory=list)
    budget_exceeded: bool = False
    worker_rc: int | None = None
    worker_stderr: str = ""
    strays_killed: int = 0       # processes found by the marker after the worker ended
    kernel_peak_rss_mb: float = 0.0
    worker_peak_rss_mb: float = 0.0


def _limiter(device: str, budget: float):
    def limits():  # runs in the worker before exec; the kernel inherits them
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        cpu = int(budget) + 60
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        if device != "cuda":
            resource.setrlimit(resource.RLIMIT_AS, (CPU_AS_LIMIT, CPU_AS_LIMIT))
    return limits


def _kill_tree(pid: int) -> None:
    """The worker first (so it records nothing about the kernel dying under it), then all its descendants
    (orphans of the student's stay descendants: the worker is a subreaper)."""
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True)
        root.kill()
    except psutil.NoSuchProcess:
        return
    procs_mod.kill_all(procs)
    procs_mod.kill_descendants(root)


def kill_marked(marker: str) -> int:
    """Kill every process whose environment carries this run's marker; return how many there were."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(MARKER_ENV) == marker:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    procs_mod.kill_all(found)
    return len(found)


def _valid(line) -> bool:
    return (isinstance(line, dict) and isinstance(line.get("id"), str) and line.get("status") in CELL_STATUSES
            and isinstance(line.get("error"), str) and isinstance(line.get("role"), str))


def run(nb: nbformat.NotebookNode, root: Path, device: str, cell_timeout: float, budget: float,
        iso: sandbox.Isolation) -> Execution:
    """``root`` holds work/ (plan and inputs already written there); lib/, rt/ and ctl/ are made here."""
    workdir = root / "work"
    nbformat.write(nb, workdir / "notebook.ipynb")
    marker = secrets.token_hex(16)
    sandbox.prepare(root, device, marker, iso)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TCOURSE_", "TRITON_INTERPRET", "JUPYTER_"))}
    env.update({"JUPYTER_PATH": str(root / "ctl"), "JUPYTER_RUNTIME_DIR": str(root / "rt"),
                "JUPYTER_PLATFORM_DIRS": "1", "PYTHONDONTWRITEBYTECODE": "1", MARKER_ENV: marker,
                "PYTHONPATH": os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])})
    ex = Execution()
    with open(root / "ctl" / "worker.log", "wb") as errf:
        proc = subprocess.Popen([sys.executable, "-m", "grader.worker", str(root), str(cell_timeout), device,
                                 str(MEM_LIMIT_MB)], cwd=root / "ctl", env=env, stdin=subprocess.DEVNULL, stdout=errf,
                                stderr=errf, start_new_session=True, preexec_fn=_limiter(device, budget))
        try:
            ex.worker_rc = proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            ex.budget_exceeded = True
        _kill_tree(proc.pid)  # on time: a kernel or a child of the student's that outlived the worker
        proc.wait()
    ex.strays_killed = kill_marked(marker) + sandbox.kill_leftovers(iso)
    log = root / "ctl" / "worker.log"
    if log.exists():  # the tail only: the kernel's raw fd 1/2 bytes also land here (up to FILE_LIMIT)
        with open(log, "rb") as f:
            f.seek(max(0, log.stat().st_size - 4000))
            ex.worker_stderr = f.read().decode("utf-8", "replace")
    try:
        peak = json.loads((root / "ctl" / "worker_peak.json").read_text(encoding="utf-8"))
        ex.kernel_peak_rss_mb = float(peak["kernel_peak_rss_mb"])
        ex.worker_peak_rss_mb = float(peak["worker_peak_rss_mb"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    read_status(root / "ctl" / "status.jsonl", ex)
    return ex


def read_status(path: Path, ex: Execution) -> None:
    """The worker's status lines into ``ex``: a cell's line by its id; the lines of template/answer cells that failed
    when run again in a fresh kernel (``rerun``) kept apart, so that they do not hide how those cells ran first."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if not _valid(line):
                continue
            if line.get("rerun"):
                ex.rerun_failures.append(line)
            else:
                ex.cells[line["id"]] = line


@dataclass
class Replay:
    done: set[str] = field(default_factory=set)       # cases whose replay record was written
    timed_out: set[str] = field(default_factory=set)  # cases whose replay passed the per-case limit
    crashed: set[str] = field(default_factory=set)    # cases during which the replay process died
    fatal: str = ""                                   # the learner's kernels could not even be loaded
    broken: str = ""                                  # the replay process died before its first case
    rounds: dict = field(default_factory=dict)        # case -> the rounds it finished (fresh, interleaved)
    budget_exceeded: bool = False


def replay(root: Path, device: str, iso: sandbox.Isolation, case_ids: list[str], case_timeout: float,
           budget: float) -> Replay:
    """Run :mod:`grader.replay` over ``case_ids``; a case that passes ``case_timeout`` is recorded as timed
    out and the replay restarts after it, all within ``budget`` seconds."""
    import time

    env = sandbox.prepare_replay(root, device, iso)
    status = root / "replay" / "out" / "status.jsonl"
    rp = Replay()
    deadline = time.monotonic() + budget
    while True:
        todo = [c for c in case_ids if c not in rp.done | rp.timed_out | rp.crashed]
        if not todo or rp.fatal or rp.broken:
            break
        if time.monotonic() >= deadline:
            rp.budget_exceeded = True
            break
        lines_before = len(_status_lines(status))
        with open(root / "ctl" / "replay.log", "ab") as errf:
            proc = subprocess.Popen(sandbox.replay_argv(root, device, iso, todo), cwd=root / "replay", env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_limiter(device, budget))
            drain = threading.Thread(target=_drain, args=(proc.stdout, errf, REPLAY_LOG_CAP), daemon=True)
            drain.start()
            current, since, seen = None, time.monotonic(), lines_before
            while proc.poll() is None:
                time.sleep(0.05)
                lines = _status_lines(status)
                for line in lines[seen:]:
                    if line.get("event") == "start":
                        current, since = line.get("id"), time.monotonic()
                    elif line.get("event") == "end":
                        rp.done.add(str(line.get("id")))
                        current = None
                    elif line.get("event") == "round":
                        rp.rounds.setdefault(str(line.get("id")), set()).add(str(line.get("tag")))
                    elif line.get("event") == "fatal":
                        rp.fatal = str(line.get("error", ""))[:2000]
                seen = len(lines)
                now = time.monotonic()
                if (current is not None and now - since > case_timeout) or now >= deadline:
                    if current is not None and now - since > case_timeout:
                        rp.timed_out.add(str(current))
                    elif now >= deadline:
                        rp.budget_exceeded = True  # the case in flight was cut by the budget: not a crash
                    _kill_tree(proc.pid)
                    break
            _kill_tree(proc.pid)
            proc.wait()
            drain.join(timeout=10)
        sandbox.kill_leftovers(iso)
        if len(_status_lines(status)) == lines_before and proc.returncode and time.monotonic() < deadline:
            # it died before its first case (not killed for the budget): not the kernels' fault
            rp.broken = f"exit {proc.returncode}: {_tail(root / 'ctl' / 'replay.log')}"
            break
        for line in _status_lines(status)[seen:]:
            if line.get("event") == "end":
                rp.done.add(str(line.get("id")))
            elif line.get("event") == "fatal":
                rp.fatal = str(line.get("error", ""))[:2000]
        started = [str(ln.get("id")) for ln in _status_lines(status) if ln.get("event") == "start"]
        if not rp.budget_exceeded:
            rp.crashed.update(c for c in started[-1:] if c not in rp.done | rp.timed_out)  # not run again
    return rp


def _drain(pipe, out, cap: int) -> None:
    """Copy the replay's output into ``out`` up to ``cap`` bytes, then read and drop the rest (the replay
    never blocks on a full pipe, and a kernel that prints without end cannot fill the disk)."""
    kept = 0
    for chunk in iter(lambda: pipe.read(1 << 16), b""):
        if kept < cap:
            out.write(chunk[:cap - kept])
            kept += len(chunk)
            if kept >= cap:
                out.write(b"\n[replay output cut at 1 MiB]\n")
            out.flush()
    pipe.close()


def _tail(path: Path, n: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - n))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _status_lines(path: Path) -> list[dict]:
    from . import safeio

    try:
        text = safeio.read_bytes(path, 1 << 20).decode("utf-8", "replace")
    except safeio.Untrusted:
        return []
    out = []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict):
            out.append(line)
    return out
