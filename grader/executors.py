"""Where the batch's tasks run: a local thread pool, or a Slurm job array through submitit.

Both take the same module-level task function and a list of argument tuples, and yield one
:class:`Outcome` per task as tasks finish, calling ``progress`` with the task counts while they run.
:mod:`grader.batch` is the only caller: one batch path, the executor behind it.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

Progress = Callable[[dict], None]  # {"pending": n, "running": n, "done": n, "failed": n}


@dataclass
class Outcome:
    index: int           # position of the task in the list given to run()
    value: object = None  # what the task function returned
    error: str = ""      # why the task did not finish ("" when it did)


class Unavailable(RuntimeError):
    """The executor cannot run here (no sbatch, unknown partition, submitit missing)."""


class Local:
    name = "local"

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)

    def check(self) -> None:
        pass

    def run(self, fn: Callable, tasks: list[tuple], progress: Progress) -> Iterator[Outcome]:
        counts = {"pending": len(tasks), "running": 0, "done": 0, "failed": 0}
        lock = threading.Lock()

        def call(args):
            with lock:
                counts["pending"] -= 1
                counts["running"] += 1
                progress(dict(counts))
            try:
                return fn(*args)
            finally:
                with lock:
                    counts["running"] -= 1

        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = {pool.submit(call, args): i for i, args in enumerate(tasks)}
            for fut in as_completed(futures):
                try:
                    outcome = Outcome(futures[fut], fut.result())
                except Exception as e:  # the task function's own failure: reported, the others go on
                    outcome = Outcome(futures[fut], error=f"{type(e).__name__}: {e}")
                with lock:
                    counts["failed" if outcome.error else "done"] += 1
                    progress(dict(counts))
                yield outcome


class Slurm:
    """One job array (one array task per argument tuple), submitted and watched through submitit.

    submitit sees a task that died hard (killed, out of memory, node lost) as failed only through
    ``sacct``, so the cluster needs Slurm accounting; without it such a task would look pending forever.
    """
    name = "slurm"
    FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE")

    def __init__(self, folder: Path, partition: str | None = None, gpus_per_task: int = 0,
                 array_parallelism: int | None = None, cpus_per_task: int = 1, time_min: int = 60,
                 poll_s: float = 2.0):
        self.folder, self.partition, self.gpus_per_task = Path(folder), partition, gpus_per_task
        self.array_parallelism, self.cpus_per_task, self.time_min, self.poll_s = (
            array_parallelism, cpus_per_task, time_min, poll_s)

    def check(self) -> None:
        if shutil.which("sbatch") is None:
            raise Unavailable("--executor slurm: `sbatch` is not on PATH; run the grader on a Slurm login node "
                              "(or install the Slurm client tools)")
        try:
            import submitit  # noqa: F401
        except ImportError:
            raise Unavailable("--executor slurm needs submitit in this Python: pip install 'submitit>=1.5,<1.6'") from None
        if self.partition:
            r = subprocess.run(["scontrol", "show", "partition", self.partition], capture_output=True, text=True)
            if r.returncode != 0:
                known = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()
                raise Unavailable(f"--partition {self.partition}: no such Slurm partition"
                                  f" (this cluster has: {', '.join(sorted(set(known))) or 'none visible'})")

    def run(self, fn: Callable, tasks: list[tuple], progress: Progress) -> Iterator[Outcome]:
        import submitit

        if not tasks:
            return
        ex = submitit.SlurmExecutor(folder=self.folder / "%A", max_num_timeout=0)
        params = {"time": self.time_min, "cpus_per_task": self.cpus_per_task, "job_name": "tcourse-grade",
                  "array_parallelism": self.array_parallelism or len(tasks)}
        if self.partition:
            params["partition"] = self.partition
        if self.gpus_per_task:
            params["gpus_per_task"] = self.gpus_per_task
        ex.update_parameters(**params)
        try:
            jobs = ex.map_array(fn, *zip(*tasks))
        except Exception as e:  # sbatch's own refusal (no default partition, account, limits...)
            raise Unavailable(f"sbatch refused the job array: {str(e).strip()[-500:]}") from None
        sys.stderr.write(f"[slurm] submitted job array {jobs[0].job_id.split('_')[0]} ({len(jobs)} task(s)); "
                         f"logs in {self.folder}\n")
        left, failed = dict(enumerate(jobs)), 0
        try:
            while left:
                counts = {"pending": 0, "running": 0}
                for i, job in list(left.items()):
                    state = job.state.split()[0] if job.state else "UNKNOWN"
                    if job.done() or state in self.FINISHED:
                        del left[i]
                        outcome = _outcome(i, job, state)
                        failed += bool(outcome.error)
                        yield outcome
                    else:
                        counts["running" if state in ("RUNNING", "COMPLETING") else "pending"] += 1
                progress({**counts, "done": len(jobs) - len(left) - failed, "failed": failed})
                if left:
                    time.sleep(self.poll_s)
        except BaseException:  # Ctrl-C or an error here: do not leave tasks running for nobody
            for job in left.values():
                job.cancel(check=False)
            raise


def _outcome(i: int, job, state: str) -> Outcome:
    try:
        return Outcome(i, job.result())
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return Outcome(i, error=f"Slurm task {job.job_id} {state}: {first[:300]}")


def task_minutes(chunk: int, per_submission_s: float) -> int:
    """A task's Slurm time limit: every submission of its chunk at its whole budget, plus start-up."""
    return math.ceil(chunk * per_submission_s / 60) + 5
