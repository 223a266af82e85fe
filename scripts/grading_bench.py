"""Grading a generated class: local executor vs a single-node Slurm job array, and the memory one grading needs.

    .venv/bin/python scripts/grading_bench.py                 # 100 submissions -> results/cpu/grading_100.json
    .venv/bin/python scripts/grading_bench.py --memory-only   # -> results/cpu/autograder_memory.json

The class is ex01_axpy edits (tests/class_submissions.py): correct, three kinds of wrong, kernels that
kill themselves, kernels that hang (each costs --timeout). Both runs grade the same folder from scratch
(--force); the Slurm run starts its own slurmctld/slurmd/slurmdbd (tests/slurm_cluster.py, needs root)
and stops them afterwards. The machine's load average is recorded: on a shared machine the numbers
measure the grader and its neighbours.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import class_submissions  # noqa: E402
import slurm_cluster  # noqa: E402

RESULTS = REPO / "results" / "cpu"


def machine() -> dict:
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return {"cpu": model, "cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(), "os": platform.platform()}


def mix_for(n: int) -> dict[str, int]:
    """30 % wrong (three kinds whose verdicts do not depend on the hidden shapes a run draws), 10 %
    crashing, 5 % hanging, the rest (55 %) correct."""
    mix = {"wrong-formula": n // 10, "no-store": n // 10, "torch-instead": n // 10, "crash": n // 10, "hang": n // 20}
    return {"correct": n - sum(mix.values()), **mix}


def grade(subs: Path, out: Path, extra: list[str], timeout: str, env: dict) -> float:
    cmd = [sys.executable, "-m", "grader", "grade", str(subs), "--out", str(out), "--device", "cpu",
           "--timeout", timeout, "--force", *extra]
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return wall


def rows(out: Path) -> dict[str, dict]:
    return {Path(r["file"]).name: r for r in csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))}


def run_stats(out: Path, wall: float) -> dict:
    durations = [float(r["duration_s"]) for r in rows(out).values() if r["status"] in ("ok", "incomplete")]
    return {"wall_s": round(wall, 1), "per_submission_median_s": round(statistics.median(durations), 2),
            "per_submission_p90_s": round(statistics.quantiles(durations, n=10)[-1], 2),
            "graded": len(durations), "sum_of_grading_s": round(sum(durations), 1)}


def peak_memory(path: Path) -> tuple[float, float]:
    """Peak memory (MiB) of the whole process tree of `grader check` on one submission: the sum of the
    processes' RSS (counts the shared torch libraries once per process) and of their PSS (shares them
    out: about what a container's memory limit charges)."""
    p = subprocess.Popen([sys.executable, "-m", "grader", "check", str(path), "--device", "cpu"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root, rss, pss = psutil.Process(p.pid), 0, 0
    while p.poll() is None:
        try:
            infos = [q.memory_full_info() for q in [root, *root.children(recursive=True)]]
            rss, pss = max(rss, sum(i.rss for i in infos)), max(pss, sum(i.pss for i in infos))
        except psutil.Error:
            pass
        time.sleep(0.02)
    return rss / 2**20, pss / 2**20


def load_sampler(samples: list[float], stop: threading.Event) -> None:
    while not stop.wait(5):
        samples.append(os.getloadavg()[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--timeout", default="30", help="per-cell timeout (a hanging submission costs it once)")
    ap.add_argument("--workers", default="2")
    ap.add_argument("--chunk", default="5", help="submissions per Slurm array task")
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--note", default="", help="what else ran on the machine (stored with the numbers)")
    a = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tcourse-bench-"))
    work.chmod(0o755)
    subs = work / "subs"
    class_submissions.make_class(subs, {"correct": 1})
    runs = [peak_memory(subs / "student000_correct.ipynb") for _ in range(2)]
    rss, pss = max(r for r, _ in runs), max(q for _, q in runs)
    (RESULTS / "autograder_memory.json").write_text(json.dumps({
        "what": "peak memory of `python -m grader check` (grader, worker, kernel: the whole process tree, "
                "sampled every 20 ms) grading one correct ex01_axpy submission on CPU, max of 2 runs; RSS counts "
                "shared libraries once per process, PSS shares them out (about what a container limit charges)",
        "peak_tree_rss_mib": round(rss), "peak_tree_pss_mib": round(pss),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine()}, indent=1) + "\n",
        encoding="utf-8")
    print(f"memory: RSS {rss:.0f} MiB, PSS {pss:.0f} MiB")
    if a.memory_only:
        shutil.rmtree(work, ignore_errors=True)
        return 0
    kinds = class_submissions.make_class(subs, mix_for(a.n))
    samples, stop = [os.getloadavg()[0]], threading.Event()
    threading.Thread(target=load_sampler, args=(samples, stop), daemon=True).start()
    local_wall = grade(subs, work / "local", ["--workers", a.workers], a.timeout, dict(os.environ))
    print(f"local: {local_wall:.0f} s ({work / 'local'})", flush=True)
    cluster = slurm_cluster.Cluster(work / "slurm-cluster").start()
    try:
        slurm_wall = grade(subs, work / "slurm", ["--executor", "slurm", "--chunk", a.chunk], a.timeout, cluster.env)
    finally:
        cluster.stop()
    stop.set()
    print(f"slurm: {slurm_wall:.0f} s")
    local, slurm = rows(work / "local"), rows(work / "slurm")
    differ = sorted(n for n in local if {k: v for k, v in local[n].items() if k != "duration_s"}
                    != {k: v for k, v in slurm.get(n, {}).items() if k != "duration_s"})
    doc = {
        "what": f"grading {a.n} generated ex01_axpy submissions on CPU (TRITON_INTERPRET), from scratch, "
                "with the local executor and with a single-node Slurm job array",
        "command": f"scripts/grading_bench.py --n {a.n} --timeout {a.timeout} --workers {a.workers} --chunk {a.chunk}",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
        "mix": {k: sum(v == k for v in kinds.values()) for k in dict.fromkeys(kinds.values())},
        "cell_timeout_s": float(a.timeout),
        "local": {"executor": f"local, --workers {a.workers}", **run_stats(work / "local", local_wall)},
        "slurm": {"executor": f"slurm job array, --chunk {a.chunk} ({-(-a.n // int(a.chunk))} tasks), "
                              f"1 CPU per task on a {os.cpu_count()}-CPU node, with accounting (slurmdbd)",
                  **run_stats(work / "slurm", slurm_wall)},
        "gradebooks_equal_except_duration": not differ, "differing_rows": differ,
        "load_average_1min": {"min": min(samples), "median": statistics.median(samples), "max": max(samples)},
        "note": a.note,
    }
    shutil.rmtree(work / "slurm-cluster", ignore_errors=True)
    out = RESULTS / f"grading_{a.n}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(doc, indent=1))
    print(f"gradebooks kept in {work}/local and {work}/slurm (python -m grader report {work}/local)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
