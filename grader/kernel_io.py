"""Kernel-side output caps: what the sandboxed kernel can send the worker is bounded.

Run as the kernel's main module (``python -m grader.kernel_io -f CONNECTION_FILE``, see
:mod:`grader.sandbox`), in place of ``ipykernel_launcher``. Two caps:

- every message the kernel sends (display data, execution results, error messages with their
  traceback and ``evalue``, execute replies, comm messages) carries at most ``LIMIT_CHARS``
  characters of strings in its content and metadata and ``LIMIT_CHARS`` bytes of binary buffers
  (:class:`CappedSession`): ``display('x' * 300_000_000)`` or ``raise ValueError(huge)`` would
  otherwise reach the worker as one message of that size, parsed whole before it can be dropped;
- stdout and stderr keep at most ``LIMIT_CHARS`` each for the kernel's whole life
  (:class:`CappedOutStream`), which also keeps IPython from holding a printed flood in memory:

ipykernel's ``OutStream`` gathers everything written between two flushes (0.2 s apart) into one
buffer and publishes it as a single iopub message: a cell that prints 300 MB in a loop sends one
300 MB message, which the worker receives and parses whole before it can drop it (about 3 copies
in memory). The grader reads nothing from the outputs, so the kernel keeps only the first
``LIMIT_CHARS`` of each stream for its whole life, then writes one notice and drops the rest.

Installed when the kernel starts, before any cell runs, so it also covers what reaches file descriptors 1 and 2 (ipykernel's
fd watcher writes through the same stream object). The cap lives on the stream object; the
answer-cell policy forbids reassigning ``sys.stdout`` and touching private attributes.

IPython 9 also wraps ``sys.stdout.write`` around every cell (``InteractiveShell._tee``, by assigning
an instance attribute) to keep every string written, uncapped, in its output history for the
kernel's whole life: a 300 MB flood stays in the kernel. The stream ignores that assignment, so
nothing keeps what it drops (IPython's output history of streams stays empty; grading never reads it).
"""
from __future__ import annotations

import os
import sys
import threading

from ipykernel.iostream import OutStream
from ipykernel.kernelapp import IPKernelApp
from jupyter_client.session import Session
from traitlets import DottedObjectName

LIMIT_CHARS = 1 << 20
NOTICE = f" …[grader: message content beyond {LIMIT_CHARS} characters dropped]"


def _string_chars(obj) -> int:
    if isinstance(obj, str):
        return len(obj)
    if isinstance(obj, dict):
        return sum(_string_chars(k) + _string_chars(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return sum(_string_chars(v) for v in obj)
    return 0


def cap_strings(obj, state: dict):
    """A copy of ``obj`` whose strings hold at most ``state["room"]`` characters in all (list items in
    order, dict values smallest first); the first string cut gets :data:`NOTICE` appended."""
    if isinstance(obj, str):
        keep = obj[:max(state["room"], 0)]
        state["room"] -= len(keep)
        if len(keep) < len(obj) and not state["cut"]:
            state["cut"] = True
            return keep + NOTICE
        return keep
    if isinstance(obj, dict):  # small fields first: an error's ename survives its huge traceback
        capped = {k: cap_strings(obj[k], state) for k in sorted(obj, key=lambda k: _string_chars(obj[k]))}
        return {k: capped[k] for k in obj}
    if isinstance(obj, (list, tuple)):
        return [cap_strings(v, state) for v in obj]
    return obj


class CappedSession(Session):
    """A ``Session`` whose messages carry at most ``LIMIT_CHARS`` characters of strings in content and
    metadata (together) and ``LIMIT_CHARS`` bytes of buffers; the rest is dropped before sending."""

    def serialize(self, msg, ident=None):  # noqa: D102
        if _string_chars(msg.get("content")) + _string_chars(msg.get("metadata")) > LIMIT_CHARS:
            state = {"room": LIMIT_CHARS, "cut": False}
            msg = {**msg, "content": cap_strings(msg.get("content"), state),
                   "metadata": cap_strings(msg.get("metadata"), state)}
        return super().serialize(msg, ident)

    def send(self, stream, msg_or_type, content=None, parent=None, ident=None, buffers=None, **kwargs):  # noqa: D102
        if buffers and sum(memoryview(b).nbytes for b in buffers) > LIMIT_CHARS:
            buffers = []
        return super().send(stream, msg_or_type, content, parent, ident, buffers, **kwargs)


class CappedKernelApp(IPKernelApp):
    """ipykernel's app with :class:`CappedSession` and :class:`CappedOutStream`."""

    outstream_class = DottedObjectName("grader.kernel_io.CappedOutStream").tag(config=True)

    def _session_default(self):
        return CappedSession(parent=self)


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


if __name__ == "__main__":
    if sys.path and sys.path[0] in ("", os.getcwd()):  # as ipykernel_launcher: no imports from the work dir
        del sys.path[0]
    CappedKernelApp.launch_instance()
