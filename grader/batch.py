"""Grade many submissions: CSV gradebook, one JSON + feedback each, incremental by content hash.

Each submission is graded by its own worker process (see :mod:`grader.execute`); ``--workers N``
runs N of them at once from a thread pool here. A submission that hangs or crashes gets its
verdict and the batch goes on. ``OUT/.cache.json`` maps each output stem to the hash of
(submission bytes, grader code, device); unchanged submissions are not re-run unless ``--force``.
"""
from __future__ import annotations

import csv
import hashlib
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from . import grade, rebuild, report, safeio

GRADER_DIR = Path(__file__).resolve().parent


def collect(paths: list[str]) -> list[Path]:
    found = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        else:
            found.append(p)
    return found


def grader_hash() -> str:
    h = hashlib.sha256()
    for f in sorted(GRADER_DIR.rglob("*.py")):
        h.update(f.relative_to(GRADER_DIR).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def stem_for(path: Path) -> str:
    """A readable, unique output name: the file stem plus a short hash of its full path."""
    return f"{path.stem}-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]}"


class Progress:
    def __init__(self, total: int):
        self.total, self.done, self.lock = total, 0, threading.Lock()

    def step(self, label: str) -> None:
        with self.lock:
            self.done += 1
            bar = "#" * int(30 * self.done / max(self.total, 1))
            sys.stderr.write(f"\r[{bar:<30}] {self.done}/{self.total} {label[:40]:<40}")
            if self.done == self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _status(r: grade.Result, exercise: str | None) -> str:
    if exercise and r.declared not in (None, exercise):
        return f"exercise mismatch: the notebook says {str(r.declared)[:40]}"
    return "ok" if r.all_passed else "incomplete"


def grade_many(paths: list[str], out: Path, device: str, cell_timeout: float, workers: int, force: bool,
               exercise: str | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    files = collect(paths)
    cache_path = out / ".cache.json"
    try:
        cache = json.loads(cache_path.read_text(encoding="utf-8")) if cache_path.exists() else {}
    except ValueError:
        cache = {}
    ghash = grader_hash()
    rows: dict[str, dict] = {}
    progress = Progress(len(files))

    def one(path: Path) -> tuple[str, dict, str]:
        """(output stem, gradebook row, cache key; "" when the result must not be cached)."""
        stem = stem_for(path)
        try:
            key = hashlib.sha256(safeio.read_bytes(path, rebuild.MAX_NOTEBOOK_BYTES) + ghash.encode() + device.encode()
                                 + str(exercise).encode()).hexdigest()
        except (OSError, safeio.Untrusted):
            key = ""
        if not force and key and cache.get(stem, {}).get("key") == key and (out / f"{stem}.json").exists():
            progress.step(f"{path.name[:28]} (unchanged)")
            return stem, cache[stem]["row"], key
        try:
            r = grade.grade(path, device, cell_timeout, exercise=exercise)
            report.write_json(r, out / f"{stem}.json")
            (out / f"{stem}.feedback.txt").write_text(report.feedback(r) + "\n", encoding="utf-8")
            row = {"file": str(path), "exercise": r.exercise, "score": r.score, "max_score": r.max_score,
                   "passed": sum(t.status == "passed" for t in r.tests), "tests": len(r.tests),
                   "status": _status(r, exercise), "duration_s": round(r.duration_s, 1)}
        except rebuild.Unusable as e:
            (out / f"{stem}.feedback.txt").write_text(f"无法评分：{e}\n", encoding="utf-8")
            row = {"file": str(path), "exercise": "", "score": 0, "max_score": 0, "passed": 0, "tests": 0,
                   "status": f"unusable: {e}", "duration_s": 0}
        except Exception as e:  # a grader bug on one file must not lose the others' results
            row = {"file": str(path), "exercise": "", "score": 0, "max_score": 0, "passed": 0, "tests": 0,
                   "status": f"grader error: {type(e).__name__}: {e}", "duration_s": 0}
            key = ""
        progress.step(path.name)
        return stem, row, key

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, p) for p in files]
        for fut in as_completed(futures):
            stem, row, key = fut.result()
            rows[stem] = row
            if key:
                cache[stem] = {"row": row, "key": key}
            cache_path.write_text(json.dumps(cache, ensure_ascii=False, indent=1), encoding="utf-8")
    fields = ["file", "exercise", "score", "max_score", "passed", "tests", "status", "duration_s"]
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for stem in sorted(rows, key=lambda s: rows[s]["file"]):
            w.writerow({k: rows[stem][k] for k in fields})
    print(f"graded {len(files)} submission(s) -> {out / 'gradebook.csv'}")
    return 0
