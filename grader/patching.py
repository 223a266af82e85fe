"""Replace attributes of Triton's and torch's objects for a while, and put back exactly what was there.

The grader watches a learner's kernel by wrapping functions it does not own (the interpreter's builder, ``run``
of the JIT classes, forbidden torch ops). Putting them back must restore the object as it was: an attribute the
object had itself is set again, one it only inherited or never had is deleted, so no wrapper is left behind.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable

_MISSING = object()


def patch(targets: Iterable[tuple[Any, str, Any]]) -> Callable[[], None]:
    """Set each ``(owner, attr, new)`` in order; returns the function that undoes them, last first."""
    saved = []
    try:
        for owner, attr, new in targets:
            old = vars(owner).get(attr, _MISSING)
            setattr(owner, attr, new)
            saved.append((owner, attr, old))
    except BaseException:
        _restore(saved)
        raise
    return lambda: _restore(saved)


def _restore(saved: list) -> None:
    for owner, attr, old in reversed(saved):
        if old is _MISSING:
            delattr(owner, attr)
        else:
            setattr(owner, attr, old)


@contextlib.contextmanager
def patched(targets: Iterable[tuple[Any, str, Any]]):
    """:func:`patch` for the body of a ``with``."""
    restore = patch(targets)
    try:
        yield
    finally:
        restore()
