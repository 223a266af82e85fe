"""One interpreted launch with its programs interleaved, as a GPU may run them.

Triton's interpreter runs the programs of a grid one after another, each to its end. On a GPU they
run at the same time: a program can be overtaken between any two of its memory accesses. A kernel
that builds a read-modify-write out of two atomics, or reads a running total another program has not
added to yet, is right under the interpreter and wrong on the GPU. Here every program runs in a thread
of its own, only one thread runs at a time, and at each memory access (:meth:`Interleaving.point`,
called by :class:`grader.replay.Guard`) the running program hands over, with probability
``SWITCH``, to one picked at random among up to ``WINDOW`` started programs. Programs start in a
random order. A program that waits for another one (a lock, a flag) spins: it repeats the same small
access and reads the same values (:meth:`Interleaving.seen`). A spinning program hands over at each
access (it still gets turns: right after a flag is set, the waiter may run before the setter's next
store). When every started program spins and programs are left to start, the one a GPU would dispatch
first (the lowest linear id, x fastest) starts, since on a GPU a grid of these sizes is resident all at
once and the program waited for runs. When every program has started and all of them spin without
anything changing, no program can move: :class:`Deadlock`.

A steered launch (``launch(..., hot=...)``) is one with atomics whose in-order run found addresses that
several programs touch, one of them writing (``hot``). A program that reads one of them (an atomic reads
too) waits until another program touches it too, and then until that program has reached its next
shared access (:meth:`Interleaving.shared_access`); when every program waits, the one that waited last
goes on. So the program that came second to a shared address runs ahead of the first: a read-modify-write
made of two accesses (two atomics, or a load and a store outside a lock) is overtaken between its read and
its write, and a program that took a ticket (a block number, a slot) first is overtaken before it adds
what the later ones need; an atomic or locked update stays right. A case runs the random interleaving and,
where the in-order run found such addresses, the steered one (:mod:`grader.replay`).

The same launches then run once more, reversed (``launch(..., reverse=True)``): a program about to touch a
shared address (read or write, :meth:`Interleaving.before_shared`) waits until another program has touched it, and then until that program
has reached its next shared access; when every program waits, the waiting program with the highest id
goes on (and a program that spins looks again: what it waits for may have changed). So at each shared
address the programs come in the reverse of the in-order run's order, as far as their waits allow: a
program that reads what another one has not written yet (the program with the highest id summing the
others' partial results without waiting for them, a flag published before the value it guards) reads it
too early, and a plain store that a later program overwrote in order now lands last. The steered round
cannot do this: it lets a reader read first and overtakes it afterwards.

The launch mirrors ``GridExecutor.__call__`` of Triton's interpreter (3.6 to 3.9), with the loop
over the grid replaced.
"""
from __future__ import annotations

import inspect
import threading

from . import spin

WINDOW = 8
SWITCH = 0.5
SPIN = 32            # repeated accesses in a row: the program is waiting for another one
DEADLOCK = 4096      # hand-overs with every program spinning and none left to start
MAX_PROGRAMS = 8192  # larger launches run in order only (a thread per program would not fit the case's time)


class _Stop(BaseException):
    """Unwinds a program's thread after another program failed (not an ``Exception``: nothing in the
    interpreter catches it)."""


class Deadlock(RuntimeError):
    """Every program of the launch has started and waits for another one."""


class Interleaving:
    def __init__(self, rng, builder, reverse=False):
        self.rng, self.builder, self.reverse = rng, builder, reverse
        self.lock = threading.RLock()
        self.cv = threading.Condition(self.lock)  # the launching thread waits on it (a program ended)
        self.waits: dict = {}       # program -> its condition (same lock): only the program given the turn wakes
        self.turn = None            # the program (x, y, z) that may run
        self.live: list = []        # started, not finished
        self.pending: list = []     # not started
        self.error: BaseException | None = None
        self.body = None
        self.threads: list = []
        self.spins: dict = {}       # program -> repeated accesses in a row
        self.recent: dict = {}      # program -> the small accesses it made since it last got anywhere
        self.stuck = 0              # hand-overs in a row with every program spinning, none left to start
        self.urged = False          # hand over at the next access
        self.parked: dict = {}      # program -> shared addresses it read (reversed: is about to touch), waiting for
                                    # another program to touch them
        self.deferred: dict = {}    # program -> the parked programs it overtook, to go on at its next shared access
        self.spin_on: dict = {}     # reversed: program -> the shared addresses it last spun on

    def run(self, programs: list, body) -> None:
        """Run ``body(program)`` for every program; re-raises the first program's error."""
        self.body = body
        order = [programs[i] for i in self.rng.permutation(len(programs))]
        with self.cv:
            self.pending = order
            while self.pending and len(self.live) < WINDOW:
                self._start()
            self._pass_turn()
            while self.live:
                self.cv.wait()
                while self.pending and len(self.live) < WINDOW and self.error is None:
                    self._start()
                if self.turn is None and self.live:
                    self._pass_turn()
        for t in self.threads:
            t.join()
        if self.error is not None:
            raise self.error

    def before_shared(self, addrs: set) -> None:
        """The running program is about to touch addresses another program of the launch also touches, one of
        them writing (known from the in-order run of a steered launch). Reversed: the programs it overtook at its
        previous shared access go on, and it parks until another program touches them (or nothing else can run);
        a program that spins does not park again, its addresses are kept for :meth:`shared_access` to wake it."""
        if not self.reverse:
            return
        me = self.turn
        self._release(me)
        if self.spins.get(me, 0):
            self.spin_on[me] = addrs
        else:
            self._park(me, addrs)

    def shared_access(self, addrs: set, read: bool, wrote: bool) -> None:
        """The running program touched such addresses. Programs parked on any of them go on once this one reaches
        its next shared access (or ends). Steered: after a read (an atomic reads too), the reader parks until
        another program touches them too (or nothing else can run); a read the program repeats (a spin on a
        lock or a flag) does not park it again. Reversed: a write wakes the programs spinning on them."""
        me = self.turn
        spinning = self.spins.get(me, 0)
        if not self.reverse:
            self._release(me)
        elif wrote and not spinning:  # what they wait for may have changed: they look again
            for p, held in self.spin_on.items():
                if p != me and held & addrs:
                    self.spins[p] = 0
        overtaken = [(p, held) for p, held in self.parked.items() if p != me and held & addrs]
        if overtaken:
            self.deferred[me] = overtaken
        if read and not self.reverse and not spinning:
            self._park(me, addrs)

    def _park(self, me, addrs: set) -> None:
        self.parked.pop(me, None)
        self.parked[me] = addrs  # last in the order: the first to go on when every program waits (steered)
        self.urged = True

    def _release(self, program) -> None:
        """The programs ``program`` overtook at its previous shared access go on (if still parked there)."""
        for p, held in self.deferred.pop(program, ()):
            if self.parked.get(p) is held:
                del self.parked[p]

    def _blocked(self, p) -> bool:
        return p in self.parked or self.spins.get(p, 0) >= SPIN

    def point(self) -> None:
        """Called by the running program before each memory access."""
        urged, self.urged = self.urged, False
        if not urged and self.spins.get(self.turn, 0) < SPIN and self.rng.random() >= SWITCH:
            return
        with self.cv:
            me = self.turn
            if self.live and all(self._blocked(p) for p in self.live):
                if self.parked:  # the one that waited last goes on (reversed: the highest id); the others may still be overtaken
                    del self.parked[max(self.parked, key=lambda p: p[::-1]) if self.reverse else next(reversed(self.parked))]
                elif self.pending:
                    self.stuck = 0
                    self._start(min(self.pending, key=lambda p: p[::-1]))
                else:
                    self.stuck += 1
                    if self.stuck >= DEADLOCK:
                        self.error = Deadlock(
                            f"grid 的 program 都已经开始，还没跑完的 {len(self.live)} 个（例如 program "
                            f"{min(self.live, key=lambda p: p[::-1])}）都在反复读同样的值、等别的 program 写：没有 program "
                            "能往下走，死锁了")
                        self._wake_all()
                        raise _Stop
            self._pass_turn()
            while self.turn != me and self.error is None:
                self.waits[me].wait()
            if self.error is not None:
                raise _Stop
        self.builder.grid_idx = me

    def seen(self, access) -> None:
        """Called by the running program after each memory access: ``access`` is a :func:`grader.spin.access`;
        a small access the program already made since it last got anywhere counts as spinning."""
        me = self.turn
        if spin.repeated(self.recent.setdefault(me, set()), access):
            self.spins[me] = self.spins.get(me, 0) + 1
            return
        self.spins[me] = 0
        self.stuck = 0

    # --- under self.cv ---
    def _start(self, program=None) -> None:
        if program is None:
            program = self.pending.pop(0)
        else:
            self.pending.remove(program)
        self.live.append(program)
        self.waits[program] = threading.Condition(self.lock)
        t = threading.Thread(target=self._program, args=(program,), daemon=True)
        t.start()
        self.threads.append(t)

    def _pass_turn(self) -> None:
        free = [p for p in self.live if p not in self.parked] or self.live
        self.turn = free[int(self.rng.integers(len(free)))] if free else None
        if self.turn is not None:
            self.waits[self.turn].notify()

    def _wake_all(self) -> None:
        self.cv.notify_all()
        for w in self.waits.values():
            w.notify_all()

    def _program(self, program) -> None:
        with self.cv:
            while self.turn != program and self.error is None:
                self.waits[program].wait()
            stopped = self.error is not None
        try:
            if not stopped:
                self.builder.set_grid_idx(*program)
                self.body(program)
        except _Stop:
            pass
        except BaseException as e:  # the kernel's error is the launch's error
            with self.cv:
                if self.error is None:
                    self.error = e
        finally:
            with self.cv:
                self.live.remove(program)
                self.parked.pop(program, None)
                self._release(program)
                if self.error is not None:
                    self.pending = []
                self.turn = None
                self._wake_all()


def launch(kernel, grid, args: list, kwargs: dict, rng, guard, hot=None, reverse=False) -> None:
    """``kernel[grid](*args, **kwargs)`` under the interpreter, the programs interleaved at the memory
    accesses ``guard`` (an installed :class:`grader.replay.Guard`) sees; steered to the sorted addresses
    ``hot`` when given (``reverse``: reversed at them)."""
    from triton.runtime import interpreter as I

    ex = I.GridExecutor(kernel.rewrite(), kernel.arg_names, grid, kernel.pre_run_hooks)  # what kernel[grid] runs
    fn = ex.fn
    spec = inspect.getfullargspec(fn)
    kwargs = {k: v for k, v in kwargs.items() if k in spec.args or k in spec.kwonlyargs}
    args_hst, kwargs_hst = ex._init_args_hst(args, kwargs)
    for hook in ex.pre_run_hooks:
        hook(*args_hst, **kwargs_hst)
    scope = I._patch_lang(fn)
    try:
        call = inspect.getcallargs(fn, *args_hst, **kwargs_hst)
        call = {n: a if n in ex.constexprs else I._implicit_cvt(a) for n, a in call.items()}
        g = ex.grid(call) if callable(ex.grid) else ex.grid
        g = tuple(g) + (1,) * (3 - len(g))
        I.interpreter_builder.set_grid_dim(*g)
        programs = [(x, y, z) for x in range(g[0]) for y in range(g[1]) for z in range(g[2])]
        guard.interleaving, guard.hot = Interleaving(rng, I.interpreter_builder, reverse), hot
        guard.interleaving.run(programs, lambda _: fn(**call))
    finally:
        guard.interleaving, guard.hot = None, None
        scope.restore()
    ex._restore_args_dev(args, args_hst, kwargs, kwargs_hst)
