"""Command line: python -m grader check|grade|list|build|report|autograder-bundle.

Exit codes: 0 every test passed (or every file of the batch has its row), 1 some test did not pass (or
build --check found stale notebooks, or some files of the batch were not graded because their task
failed), 2 the input or an option is unusable (not a notebook, unknown exercise, corrupt JSON, unknown
--format, no sbatch or no such partition, no gradebook to report on).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _check(a) -> int:
    from . import grade, rebuild, report

    try:
        device = grade.resolve_device(a.device)
        r = grade.grade(Path(a.notebook), device, a.timeout, a.budget, a.seed, a.exercise)
    except (rebuild.Unusable, grade.NoDevice) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.table(r))
    fb = report.feedback(r)
    if not r.all_passed or r.notes:
        print()
        print(fb)
    if a.json:
        report.write_json(r, Path(a.json))
    return 0 if r.all_passed else 1


def _grade(a) -> int:
    from . import batch, executors, formats, grade

    try:
        names = formats.parse_formats(a.format)
        if a.executor == "slurm":  # the device is the nodes', not this login node's (a task checks it)
            device = "cuda" if a.device == "cuda" or (a.device == "auto" and a.gpus_per_task) else "cpu"
            if device == "cuda" and not a.gpus_per_task:
                raise ValueError("--device cuda with --executor slurm needs --gpus-per-task 1")
        else:
            device = grade.resolve_device(a.device)
    except (grade.NoDevice, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from . import registry, sandbox

    if a.exercise and a.exercise not in registry.exercises():
        print(f"error: unknown exercise {a.exercise!r} (see: python -m grader list)", file=sys.stderr)
        return 2
    if a.executor == "local" and not sandbox.choose().isolated and not a.unsafe_no_sandbox:
        print("error: no process isolation here (bubblewrap is missing and the grader is not root): one submission "
              "could read, forge or kill the others. Install bubblewrap, run as root (throwaway users), or pass "
              "--unsafe-no-sandbox to grade anyway.", file=sys.stderr)
        return 2
    out = Path(a.out)
    if a.executor == "slurm":
        ex = executors.Slurm(out / ".slurm", a.partition, a.gpus_per_task, a.array_parallelism,
                             time_min=batch.slurm_time_min(a.chunk, a.timeout))
    else:
        ex = executors.Local(a.workers)
    try:
        return batch.grade_many(a.paths, out, device, a.timeout, ex, a.force, a.chunk, names, a.exercise)
    except executors.Unavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _report(a) -> int:
    from . import class_report

    return class_report.main(Path(a.gradebook), Path(a.html) if a.html else None)


def _bundle(a) -> int:
    from . import bundle

    return bundle.main(a.platform, Path(a.dir), a.exercise)


def _list(a) -> int:
    from . import registry

    for ex in registry.exercises().values():
        if ex.written:
            print(f"{ex.id:<24} written answer, not auto-graded  {ex.title}")
            continue
        every = ex.cases_for("cuda", 0)
        cpu = [c for c in every if not c.gpu_only]
        gpu = [c for c in every if c.gpu_only]
        print(f"{ex.id:<24} {sum(c.points for c in cpu):g} points on CPU, +{sum(c.points for c in gpu):g} on GPU  {ex.title}")
        if a.verbose:
            for c in cpu + gpu:
                name = "(hidden: sizes drawn per run)" if c.hidden else c.name
                print(f"    {c.points:4g}  {'GPU ' if c.gpu_only else '    '}{name}")
    return 0


def _build(a) -> int:
    from . import build

    return build.build(a.check)


def main(argv=None) -> int:
    from .grade import DEFAULT_CELL_TIMEOUT

    p = argparse.ArgumentParser(prog="python -m grader", description="Grade Triton course exercises.")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="grade one notebook and print a table")
    c.add_argument("notebook")
    c.add_argument("--json", help="write the result as JSON to this file")
    g = sub.add_parser("grade", help="grade many notebooks (files or folders) into a gradebook")
    g.add_argument("paths", nargs="+")
    g.add_argument("--out", required=True, help="folder for gradebook.csv and per-submission JSON/feedback")
    g.add_argument("--workers", type=int, default=1, help="submissions graded at once")
    g.add_argument("--force", action="store_true", help="re-grade even unchanged submissions")
    g.add_argument("--exercise", help="grade every submission as this exercise; a notebook that says it is another "
                                      "exercise is reported as a mismatch")
    g.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="grade even where no process isolation is available (bubblewrap missing, not root)")
    g.add_argument("--format", action="append", metavar="NAMES",
                   help="also write csv (Canvas), gradescope, prairielearn, junit; comma-separated or repeated")
    g.add_argument("--executor", choices=["local", "slurm"], default="local",
                   help="local: --workers threads here; slurm: a job array through submitit")
    g.add_argument("--chunk", type=int, default=1, help="submissions per task (one Slurm array task each)")
    g.add_argument("--partition", help="Slurm partition (default: the cluster's default partition)")
    g.add_argument("--gpus-per-task", type=int, default=0, help="GPUs per Slurm task (GPU tests need 1)")
    g.add_argument("--array-parallelism", type=int, help="at most this many Slurm array tasks at once")
    for q in (c, g):
        q.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
        q.add_argument("--timeout", type=float, default=DEFAULT_CELL_TIMEOUT, help="per-cell timeout in seconds")
    c.add_argument("--budget", type=float, help="whole-submission budget in seconds (default: from the test count)")
    c.add_argument("--seed", type=int, help="input seed (default: fresh each run)")
    c.add_argument("--exercise", help="grade as this exercise even without notebook metadata")
    ls = sub.add_parser("list", help="exercises, points, GPU-only tests")
    ls.add_argument("-v", "--verbose", action="store_true", help="list every test")
    r = sub.add_parser("report", help="what the class got wrong: an offline HTML page from a gradebook folder")
    r.add_argument("gradebook", help="the --out folder of `grade`")
    r.add_argument("--html", help="write the page here (default: GRADEBOOK/report.html)")
    ab = sub.add_parser("autograder-bundle", help="the zip an autograder platform runs (Gradescope)")
    ab.add_argument("--platform", choices=["gradescope"], required=True)
    ab.add_argument("dir", help="folder to write the bundle into")
    ab.add_argument("--exercise", help="grade every upload as this exercise (default: from the notebook)")
    b = sub.add_parser("build", help="regenerate exercises/ and solutions/ from grader/exercise_src/")
    b.add_argument("--check", action="store_true", help="exit 1 if the notebooks are out of sync")
    a = p.parse_args(argv)
    return {"check": _check, "grade": _grade, "list": _list, "build": _build, "report": _report,
            "autograder-bundle": _bundle}[a.cmd](a)
