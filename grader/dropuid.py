"""Start a program as a throwaway unprivileged user: ``python -m grader.dropuid UID -- PROGRAM ARGS...``.

Used by :mod:`grader.sandbox` where bubblewrap is missing and the grader runs as root (GPU nodes,
containers). Before ``exec`` it asks to be killed with its parent (``PR_SET_PDEATHSIG``), enters a
new network namespace with no interface up (``unshare(CLONE_NEWNET)``, refused only where the
kernel forbids it: then it says so on stderr and goes on), starts a new session, drops every
supplementary group and becomes ``UID:UID``. A process of that user cannot change user again, read
the grader's files (mode 0700) or signal the grader's processes; :func:`grader.procs.kill_uid`
later ends every process of that user, however it was forked or renamed.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
CLONE_NEWNET = 0x40000000


def drop(uid: int) -> list[str]:
    """Become ``uid`` in a new session and network namespace; returns notes about what was refused."""
    notes = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        notes.append(f"unshare(CLONE_NEWNET) refused (errno {ctypes.get_errno()}): network not isolated")
    try:
        os.setsid()
    except OSError:
        pass
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("grader.dropuid: could not drop privileges")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after setuid: a change of user clears it
    return notes


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python -m grader.dropuid UID -- PROGRAM [ARGS...]")
    for note in drop(int(argv[0])):
        print(f"grader.dropuid: {note}", file=sys.stderr)
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
