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


SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable, possibly in RAM: a throwaway user's files there count


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


def uid_pids(uid: int) -> list[int]:
    """PIDs of every process whose real user is ``uid`` (read from /proc)."""
    import os

    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status", encoding="ascii", errors="replace") as f:
                zombie = False
                for line in f:
                    if line.startswith("State:"):
                        zombie = "Z" in line.split()[1]
                    elif line.startswith("Uid:"):
                        if int(line.split()[1]) == uid and not zombie:
                            pids.append(int(d))
                        break
        except OSError:
            continue
    return pids


def kill_uid(uid: int, rounds: int = 20) -> int:
    """End every process of the throwaway user ``uid``: a child that becomes that user sends SIGKILL to
    all it may signal (``kill(-1)``), which are exactly that user's processes; repeated until none is
    left (a fork racing the first kill). Returns how many were found the first time."""
    import os
    import signal
    import time

    first = len(uid_pids(uid))
    for _ in range(rounds):
        if not uid_pids(uid):
            break
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.05)
    return first
