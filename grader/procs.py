"""Killing the processes a submission may leave behind (shared by the grader and its worker)."""
from __future__ import annotations

import psutil


def kill_all(procs: list[psutil.Process]) -> None:
    """SIGKILL each process (already gone is fine) and reap them."""
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


def kill_descendants(root: psutil.Process, rounds: int = 5) -> None:
    """Kill everything below ``root``, again while new descendants appear (forks racing the kill)."""
    for _ in range(rounds):
        try:
            procs = root.children(recursive=True)
        except psutil.NoSuchProcess:
            return
        if not procs:
            return
        kill_all(procs)
