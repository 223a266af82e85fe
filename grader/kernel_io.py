"""Kernel-side output cap: the sandboxed kernel's stdout/stderr keep at most ``LIMIT_CHARS`` each.

ipykernel's ``OutStream`` gathers everything written between two flushes (0.2 s apart) into one
buffer and publishes it as a single iopub message: a cell that prints 300 MB in a loop sends one
300 MB message, which the worker receives and parses whole before it can drop it (about 3 copies
in memory). The grader reads nothing from the outputs, so the kernel keeps only the first
``LIMIT_CHARS`` of each stream for its whole life, then writes one notice and drops the rest.

Installed when the kernel starts (``--IPKernelApp.outstream_class``, see :mod:`grader.sandbox`),
before any cell runs, so it also covers what reaches file descriptors 1 and 2 (ipykernel's
fd watcher writes through the same stream object). The cap lives on the stream object; the
answer-cell policy forbids reassigning ``sys.stdout`` and touching private attributes.

IPython 9 also wraps ``sys.stdout.write`` around every cell (``InteractiveShell._tee``, by assigning
an instance attribute) to keep every string written, uncapped, in its output history for the
kernel's whole life: a 300 MB flood stays in the kernel. The stream ignores that assignment, so
nothing keeps what it drops (IPython's output history of streams stays empty; grading never reads it).
"""
from __future__ import annotations

import threading

from ipykernel.iostream import OutStream

LIMIT_CHARS = 1 << 20


class CappedOutStream(OutStream):
    """An ``OutStream`` that publishes at most ``LIMIT_CHARS`` characters, then drops (and counts) the rest."""

    def __init__(self, *args, **kwargs):
        self._cap_lock = threading.Lock()
        self._room = LIMIT_CHARS
        self.dropped_chars = 0
        super().__init__(*args, **kwargs)

    def __setattr__(self, name, value):
        if name != "write":  # IPython's per-cell tee would keep every string written
            super().__setattr__(name, value)

    def write(self, string):  # noqa: D102
        if not isinstance(string, str):
            return super().write(string)  # raises ipykernel's TypeError
        with self._cap_lock:
            keep = string[:self._room]
            first_drop = len(keep) < len(string) and self.dropped_chars == 0
            self._room -= len(keep)
            self.dropped_chars += len(string) - len(keep)
        if keep:
            super().write(keep)
        if first_drop:
            super().write(f"\n[grader] output beyond {LIMIT_CHARS} characters on {self.name} is dropped\n")
        return len(string)
