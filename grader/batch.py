"""Grade many submissions: CSV gradebook, one JSON + feedback each, incremental by content hash.

Each submission is graded by its own worker process (see :mod:`grader.execute`). The submissions
that still need grading are split into chunks, and each chunk is one task for an executor
(:mod:`grader.executors`): ``--workers N`` threads here, or one Slurm array task per chunk. A task
runs :func:`grade_chunk`, which writes, per submission, ``<stem>.json``, ``<stem>.feedback.txt`` and
last a record ``.cache/<stem>.json`` with the hash of (submission bytes, grader code, device) and its
gradebook row. Those records are the cache: an unchanged submission with a record is not graded again
(unless ``--force``), so a run cut short (Ctrl-C, a task killed, a node lost) is completed by running
the same command again, which grades only what has no record yet.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from . import executors, formats, grade, rebuild, registry, report, safeio

GRADER_DIR = Path(__file__).resolve().parent
FIELDS = ["file", "exercise", "score", "max_score", "passed", "tests", "status", "duration_s"]


def collect(paths: list[str]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        else:
            found.append(p)
    return found


# Modules that only parse options, present, ship or schedule results: changing them does not change a
# verdict, so it does not make the whole class be graded again.
NOT_IN_HASH = {"class_report.py", "bundle.py", "formats.py", "executors.py", "cli.py"}


def grader_hash() -> str:
    h = hashlib.sha256()
    for f in sorted(f for f in GRADER_DIR.rglob("*.py") if f.relative_to(GRADER_DIR).as_posix() not in NOT_IN_HASH):
        h.update(f.relative_to(GRADER_DIR).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def shown(path: Path) -> str:
    """The path as text for the gradebook and the exports; bytes of a name that are not UTF-8 as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def stem_for(path: Path) -> str:
    """A readable, unique output name: the file stem plus a short hash of its full path."""
    return f"{Path(shown(path)).stem}-{hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:8]}"


def content_key(path: Path, ghash: str, device: str, exercise: str | None = None) -> str:
    """The cache key; "" when the file cannot be read as a plain, bounded file (then it is never cached)."""
    try:
        raw = safeio.read_bytes(path, rebuild.MAX_NOTEBOOK_BYTES)
    except safeio.Untrusted:
        return ""
    return hashlib.sha256(raw + ghash.encode() + device.encode() + str(exercise).encode()).hexdigest()


def _status(r: grade.Result, exercise: str | None) -> str:
    if exercise and r.declared not in (None, exercise):
        return f"exercise mismatch: the notebook says {str(r.declared)[:40]}"
    return "ok" if r.all_passed else "incomplete"


def _record_path(out: Path, stem: str) -> Path:
    return out / ".cache" / f"{stem}.json"


def load_record(out: Path, stem: str, key: str) -> dict | None:
    """The stored row of ``stem`` if it was graded with this key and its outputs are still there."""
    if not key:
        return None
    try:
        rec = json.loads(_record_path(out, stem).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if rec.get("key") != key:
        return None
    unusable = rec["row"]["status"].startswith("unusable")
    return rec if (out / f"{stem}.json").exists() or unusable else None


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def grade_one(path: Path, out: Path, stem: str, key: str, device: str, cell_timeout: float,
              exercise: str | None = None) -> dict:
    """Grade one file into ``out``; returns its record {"stem", "key", "row"} (key "" = not cached)."""
    try:
        r = grade.grade(path, device, cell_timeout, exercise=exercise)
        report.write_json(r, out / f"{stem}.json")
        (out / f"{stem}.feedback.txt").write_text(report.feedback(r) + "\n", encoding="utf-8")
        row = {"file": shown(path), "exercise": r.exercise, "score": r.score, "max_score": r.max_score,
               "passed": sum(t.status == "passed" for t in r.tests), "tests": len(r.tests),
               "status": _status(r, exercise), "duration_s": round(r.duration_s, 1)}
    except rebuild.Unusable as e:
        (out / f"{stem}.feedback.txt").write_text(f"无法评分：{e}\n", encoding="utf-8")
        row = _empty_row(path, f"unusable: {e}")
    except Exception as e:  # a grader bug on one file must not lose the others' results
        return {"stem": stem, "key": "", "row": _empty_row(path, f"grader error: {type(e).__name__}: {e}")}
    rec = {"stem": stem, "key": key, "row": row}
    if key:
        _atomic_write(_record_path(out, stem), json.dumps(rec, ensure_ascii=False))
    return rec


def _empty_row(path: Path, status: str) -> dict:
    return {"file": shown(path), "exercise": "", "score": 0, "max_score": 0, "passed": 0, "tests": 0,
            "status": status, "duration_s": 0}


def grade_chunk(items: list[tuple[str, str, str]], out: str, device: str, cell_timeout: float,
                exercise: str | None = None) -> list[dict]:
    """One executor task (a Slurm array task runs it on a node): grade each (path, stem, key) that has
    no record yet (another task may have finished it), return the records."""
    outp = Path(out)
    if device == "cuda":
        grade.resolve_device("cuda")  # a node without a usable GPU fails the task, with the reason
    return [load_record(outp, stem, key) or grade_one(Path(path), outp, stem, key, device, cell_timeout, exercise)
            for path, stem, key in items]


class Progress:
    """One status line on stderr: the executor's tasks and the submissions recorded so far (the records
    are looked for at most every few seconds, and only those not seen yet)."""

    def __init__(self, executor: str, out: Path, todo: list[tuple[str, str, str]], every_s: float = 3.0):
        self.executor, self.out, self.left, self.total = executor, out, list(todo), len(todo)
        self.every_s, self.scanned, self.last = every_s, 0.0, ""

    def __call__(self, counts: dict) -> None:
        finished = counts["pending"] == counts["running"] == 0
        if finished or time.monotonic() - self.scanned >= self.every_s:
            self.left = [t for t in self.left if load_record(self.out, t[1], t[2]) is None]
            self.scanned = time.monotonic()
        line = (f"[{self.executor}] tasks: {counts['pending']} pending, {counts['running']} running, "
                f"{counts['done']} done, {counts['failed']} failed | submissions {self.total - len(self.left)}/{self.total}")
        if line != self.last:
            end = "\r" if sys.stderr.isatty() else "\n"
            sys.stderr.write(line + end)
            sys.stderr.flush()
            self.last = line


def grade_many(paths: list[str], out: Path, device: str, cell_timeout: float, executor=None,
               force: bool = False, chunk: int = 1, format_names: list[str] = (), exercise: str | None = None) -> int:
    """Returns 0 when every file has a gradebook row, 1 when some could not be graded (re-run to finish)."""
    executor = executor or executors.Local()
    executor.check()
    out.mkdir(parents=True, exist_ok=True)
    (out / ".cache").mkdir(exist_ok=True)
    ghash = grader_hash()
    plan = [(p, stem_for(p), content_key(p, ghash, device, exercise)) for p in collect(paths)]
    rows: dict[str, dict] = {}
    todo = []
    for p, stem, key in plan:
        rec = None if force else load_record(out, stem, key)
        if shown(p) != str(p):  # written into the gradebook as it is, the name would stop the whole batch
            rows[stem] = _empty_row(p, "unusable: the file name is not valid UTF-8 (rename the file)")
        elif rec:
            rows[stem] = rec["row"]
        else:
            _record_path(out, stem).unlink(missing_ok=True)
            todo.append((str(p), stem, key))
    if len(todo) < len(plan):
        print(f"{len(plan) - len(todo)} unchanged submission(s) not graded again", file=sys.stderr)
    chunks = [todo[i:i + max(1, chunk)] for i in range(0, len(todo), max(1, chunk))]
    failures = []
    for outcome in executor.run(grade_chunk, [(c, str(out), device, cell_timeout, exercise) for c in chunks],
                                Progress(executor.name, out, todo)):
        if outcome.error:
            failures.append(outcome.error)
        else:
            rows.update((rec["stem"], rec["row"]) for rec in outcome.value if not rec["key"])
    if todo and sys.stderr.isatty():
        sys.stderr.write("\n")  # below the progress line
    for _, stem, key in todo:  # what the tasks recorded, those that failed included
        rec = load_record(out, stem, key)
        if rec:
            rows[stem] = rec["row"]
    missing = [(p, stem) for p, stem, _ in plan if stem not in rows]
    for p, stem in missing:
        rows[stem] = _empty_row(p, "not graded: its task failed (run the same command again)")
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for stem in sorted(rows, key=lambda s: rows[s]["file"]):
            w.writerow({k: formats.spreadsheet_safe(rows[stem][k]) for k in FIELDS})
    written = formats.write(list(format_names), out, [
        formats.Entry(stem, shown(p), _result(out, stem, rows[stem]), rows[stem]["status"]) for p, stem, _ in plan
    ]) if format_names else []
    for e in failures:
        print(f"error: {e}", file=sys.stderr)
    print(f"graded {len(plan) - len(missing)}/{len(plan)} submission(s) -> {out / 'gradebook.csv'}"
          + (f" (+{len(written)} file(s): {', '.join(format_names)})" if format_names else ""))
    if missing:
        print(f"{len(missing)} submission(s) not graded because their task failed; run the same command again "
              f"to grade only those", file=sys.stderr)
    return 1 if missing else 0


def _result(out: Path, stem: str, row: dict) -> dict | None:
    if row["status"].startswith(("unusable", "grader error", "not graded")):
        return None
    return json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))


def slurm_time_min(chunk: int, cell_timeout: float) -> int:
    """Slurm time limit of one task: its whole chunk at the largest per-submission budget."""
    worst = max(grade.budget_for(len(ex.cases_for("cuda", 0)), cell_timeout)
                for ex in registry.exercises().values() if not ex.written)
    return executors.task_minutes(chunk, worst)
