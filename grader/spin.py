"""Spin reads: a program that waits for another one repeats the same small read and reads the same values.

:mod:`grader.interleave` counts them to hand the turn to another program. :class:`InOrder` counts them in an
in-order interpreted launch, where Triton's interpreter runs the programs one after another: while a program
spins there, every program before it has ended and none after it has started, so nothing can change what it
reads. After :data:`ENDLESS` such reads in a row it raises :class:`EndlessWait` at once, instead of leaving the
case to run into its time limit (a flag nobody sets, a wait for a program that comes later).

Used by :mod:`grader.harness` (:func:`watch`, in the learner's kernel, where the cases first run) and by
:class:`grader.replay.Guard` (the replay's in-order round).
"""
from __future__ import annotations

from . import patching

SMALL = 128       # accesses of at most this many elements can be spin reads (a vector of flags, too)
RECENT = 256      # a spin loop cycles through a few accesses: the memory of one program's recent ones
ENDLESS = 10_000  # repeated reads in a row, nothing else running: the wait cannot end (about 1.5 s interpreted)


class EndlessWait(BaseException):
    """A program of an in-order interpreted launch waits for a value nothing will write. Not an ``Exception``:
    the interpreter would wrap it, and a learner's ``except Exception`` would take it for its own error."""


def access(kind: str, ptrs, result) -> tuple | None:
    """What identifies a small read (its kind, addresses and the values it read); None for a write or a large one."""
    if kind == "store" or ptrs.data.size > SMALL:
        return None
    return kind, hash(ptrs.data.tobytes()), hash(result.data.tobytes())


def repeated(recent: set, seen: tuple | None) -> bool:
    """Whether ``seen`` (an :func:`access`) repeats one the program made since it last got anywhere (a write or a
    new read is getting somewhere); ``recent`` is that program's memory, updated here."""
    if seen is not None and seen in recent:
        return True
    if seen is None or len(recent) >= RECENT:
        recent.clear()
    if seen is not None:
        recent.add(seen)
    return False


class InOrder:
    """The running program's spin reads in an in-order launch."""

    def __init__(self):
        self.program, self.recent, self.count = None, set(), 0

    def seen(self, program: tuple, kind: str, ptrs, result, where, poisoned: bool = False) -> None:
        """After each access of ``program``; ``where(address)`` names the tensor (and element) it read; ``poisoned``:
        the read had masked-off elements without ``other=``, filled with an undefined value (the replay's Guard)."""
        if program != self.program:
            self.program, self.count = program, 0
            self.recent.clear()
        if not repeated(self.recent, access(kind, ptrs, result)):
            self.count = 0
            return
        self.count += 1
        if self.count >= ENDLESS:
            values = result.data.ravel()[:4].tolist()
            undefined = ("（其中有 mask 关掉、又没给 other= 的元素：它们的值在 GPU 上没有定义，评分器填的是 NaN 或整数的最大值，"
                         "给这次读加上 other=）") if poisoned else ""
            raise EndlessWait(
                f"program {program} 连续 {self.count} 次读同样的位置（{where(int(ptrs.data.ravel()[0]))}），读到的一直是 "
                f"{values if result.data.size > 1 else values[0]}{undefined}：它在等别的 program 改这个值。CPU 解释器一个接一个地"
                "运行 program，这时排在它前面的都已结束、后面的还没开始，没有谁会再改它，这个等待不会结束。检查：等的标志"
                "是不是一定有 program 会写（下标、条件，写标志的那一步是否总会执行）；是不是在等编号更大的 program"
                "（GPU 也不保证它们在你等的时候运行，只等编号更小的）；读标志时 mask 关掉的元素有没有 other=")


def watch(where):
    """A ``with`` during whose body every access of an interpreted launch goes through an :class:`InOrder`;
    ``where`` as in :meth:`InOrder.seen`."""
    from triton.runtime import interpreter as I

    b = I.interpreter_builder
    order = InOrder()

    def counted(name: str, kind, ptr_at: int):
        original = getattr(b, name)

        def run(*args, **kwargs):
            result = original(*args, **kwargs)
            order.seen(tuple(int(v) for v in b.grid_idx), kind(args), args[ptr_at], result, where)
            return result
        return b, name, run

    return patching.patched([counted("create_masked_load", lambda a: "load", 0),
                             counted("create_masked_store", lambda a: "store", 0),
                             counted("create_atomic_rmw", lambda a: f"rmw{a[0]}", 1),
                             counted("create_atomic_cas", lambda a: "cas", 0)])
