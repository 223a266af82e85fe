"""Which accesses of one launch the GPU's memory model orders between programs (happens-before).

The interpreter, and the grader's interleaved rounds, make every write visible to every program at once. On a
GPU a program's plain stores reach another program in no set order, and may not have arrived when a flag it
raised is seen: programs of one launch pass data only through a release and an acquire. The writer stores its
data and then makes an atomic access with release semantics (``sem="release"``, or ``"acq_rel"``, the default of
``tl.atomic_*``); the reader makes an atomic access with acquire semantics (``"acquire"``, ``"acq_rel"``; the
default of ``tl.atomic_load``) that reads that atomic's value (or a later read-modify-write's on the same
address), and only then reads the data. ``sem="relaxed"``, a ``volatile=True`` load and ``scope="cta"`` order
nothing between programs. A lock is the same pattern: releasing it is a release, taking it an acquire.

:func:`first_unordered` reads one launch's accesses in the order they ran (``events``, see below), finds pairs of
accesses by two programs to one address, one of them a write and not both atomic (a plain access against any
write; two atomics never race), and reports the first such pair that no chain of release and acquire orders.
Each plain access is checked against the last write before it, each atomic against the last plain write before
it, each read against the next write after it: pairs further apart are ordered through those. A read that the
same program repeats later (on the same address) is left out: a spin loop that reads the data on every turn, before
its flag is seen, throws those values away and uses the last, which is checked. The check cannot tell which values
are used: an early read whose value is used and then read again is missed here (the interleaved rounds, which
give it the older value, may still catch it in the results). Launches without atomics are
:meth:`grader.replay.Guard.race`'s: there any access to what another program wrote is a race.

Releases and acquires are counted per program: a program's release publishes everything it accessed before it.
Per thread, as on a GPU, a release publishes only what its own thread (or, after ``tl.debug_barrier()``, the
program) did; :mod:`grader.lanes` reports a release that follows other elements' stores without a barrier,
but not an acquire by some elements followed by loads by others.

An event is ``(kind, addresses, program, sem, scope)``: kind ``"r"``/``"w"`` for a plain load/store, ``"ar"``,
``"aw"``, ``"arw"`` for an atomic read (``tl.atomic_load``; ``"vr"``: a volatile load, relaxed), write
(``tl.atomic_store``) or read-modify-write (``tl.atomic_add``/``xchg``/``cas``...); ``sem`` and ``scope`` are the
names of Triton's IR enums (``"ACQUIRE_RELEASE"``, ``"GPU"``...), None for plain accesses.
"""
from __future__ import annotations

import bisect
import itertools

import numpy as np

ACQUIRES = ("ACQUIRE", "ACQUIRE_RELEASE")
RELEASES = ("RELEASE", "ACQUIRE_RELEASE")
READS = ("r", "ar", "vr", "arw")
WRITES = ("w", "aw", "arw")
ATOMIC = ("ar", "vr", "aw", "arw")  # a volatile load ("vr") counts as a relaxed atomic read


def first_unordered(events: list, label) -> str | None:
    """The first pair of conflicting accesses by two programs that no release/acquire orders, as a sentence
    (``label(address)`` names an address), or None."""
    pairs = _conflicting_pairs(events)
    if pairs is None:
        return None
    first, second, addr = pairs
    writers = {events[a][2] for a in first.tolist()}
    readers = {events[b][2] for b in second.tolist()}
    clocks = _Clocks([(i, e) for i, e in enumerate(events) if e[0] in ATOMIC], writers, readers)
    for a, b, x in zip(first.tolist(), second.tolist(), addr.tolist()):
        if clocks.known(events[b][2], b, events[a][2]) < clocks.epoch(events[a][2], a):
            return _sentence(events, clocks, a, b, x, label)
    return None


def _conflicting_pairs(events: list):
    """(earlier event, later event, address) of the conflicting pairs by two programs that need checking (see the
    module's docstring), one per pair of events, in the order of the later event; None if there is none."""
    kinds = [e[0] for e in events]
    plain = np.array([k in ("r", "w") for k in kinds])
    writes = np.array([k in WRITES for k in kinds])
    if not plain.any() or not writes.any():
        return None
    # only a plain access and a write whose address ranges overlap can make a pair (first by range: cheap)
    lo = np.array([int(e[1].min()) for e in events], dtype=np.int64)
    hi = np.array([int(e[1].max()) for e in events], dtype=np.int64)
    useful = plain & _overlaps(lo, hi, writes) | writes & _overlaps(lo, hi, plain)
    if not (useful & plain).any():
        return None
    sizes = np.array([e[1].size if u else 0 for e, u in zip(events, useful)], dtype=np.int64)
    addr = np.concatenate([e[1].astype(np.int64) for e, u in zip(events, useful) if u])
    maybe = np.intersect1d(addr[np.repeat(plain, sizes)], addr[np.repeat(writes, sizes)])
    if not maybe.size:
        return None
    keep = np.isin(addr, maybe)
    seq = np.repeat(np.arange(len(events)), sizes)[keep]
    addr = addr[keep]
    per_event = lambda flags: np.repeat(np.array(flags), sizes)[keep]  # noqa: E731
    prog = per_event([e[2] for e in events]).astype(np.int64)
    write, read = per_event([k in WRITES for k in kinds]), per_event([k in READS for k in kinds])
    is_plain = per_event(plain)
    order = np.lexsort((seq, addr))
    addr, seq, prog, write, read, is_plain = (v[order] for v in (addr, seq, prog, write, read, is_plain))
    n = addr.size
    idx = np.arange(n)
    start = np.concatenate(([True], addr[1:] != addr[:-1]))
    end = np.concatenate((start[1:], [True]))
    group_start = np.maximum.accumulate(np.where(start, idx, 0))
    group_end = np.minimum.accumulate(np.where(end, idx, n)[::-1])[::-1]

    def before(flags):  # the last element strictly before each one, in its address's group, with flags (-1: none)
        last = np.maximum.accumulate(np.where(flags, idx, -1))
        prev = np.concatenate(([-1], last[:-1]))
        return np.where(prev >= group_start, prev, -1)

    first_w = np.minimum.accumulate(np.where(write, idx, n)[::-1])[::-1]
    next_w = np.concatenate((first_w[1:], [n]))
    next_w = np.where(next_w <= group_end, next_w, n)
    earlier = np.where(is_plain, before(write), before(write & is_plain))
    a = np.concatenate((earlier[earlier >= 0], idx[read & (next_w < n)]))
    b = np.concatenate((idx[earlier >= 0], next_w[read & (next_w < n)]))
    again = _read_again(addr, seq, prog, read & ~write)
    conflict = (prog[a] != prog[b]) & (is_plain[a] | is_plain[b]) & ~again[a] & ~again[b]
    a, b = a[conflict], b[conflict]
    if not a.size:
        return None
    _, once = np.unique(seq[b] * len(events) + seq[a], return_index=True)  # one address per pair of events
    return seq[a[once]], seq[b[once]], addr[a[once]]


def _read_again(addr, seq, prog, reads) -> np.ndarray:
    """For each access, whether it is a read that the same program repeats in a later event on the same address."""
    at = np.flatnonzero(reads)
    again = np.zeros(addr.size, dtype=bool)
    if at.size:
        _, key = np.unique(np.stack([addr[at], prog[at]], axis=1), axis=0, return_inverse=True)
        key = key.ravel()
        last = np.full(int(key.max()) + 1, -1, dtype=np.int64)
        np.maximum.at(last, key, seq[at])
        again[at] = seq[at] < last[key]
    return again


def _overlaps(lo, hi, among) -> np.ndarray:
    """For each range [lo, hi], whether it overlaps one of the ranges selected by ``among``."""
    order = np.argsort(lo[among], kind="stable")
    b_lo, b_hi = lo[among][order], np.maximum.accumulate(hi[among][order])
    k = np.searchsorted(b_lo, hi, side="right")
    return (k > 0) & (b_hi[np.maximum(k - 1, 0)] >= lo)


class _Clocks:
    """The launch's atomics replayed in order: what each program has acquired of the others. A clock is an array
    over ``writers`` (the programs whose accesses some pair needs ordered): the highest epoch of each acquired,
    -1 for none; None is the empty clock. Clocks are never changed in place."""

    def __init__(self, atomics: list, writers: set, readers: set):
        self.col = {q: i for i, q in enumerate(sorted(writers))}
        self.releases: dict = {}  # program -> event numbers of its releases, in order
        self.history: dict = {}   # program in readers -> ([event numbers], [its clock after the acquire at each])
        if not atomics:
            return
        every = np.unique(np.concatenate([e[1] for _, e in atomics]).astype(np.int64))
        clock_at = np.zeros(every.size, dtype=np.int64)  # each address's clock, by number in ``clocks``
        clocks: dict = {0: None}
        fresh = itertools.count(1)  # numbers for new clocks
        known: dict = {}  # program -> its clock
        last = {e[2]: i for i, e in atomics}
        for i, (kind, addrs, p, sem, scope) in atomics:
            gpu = scope != "CTA"
            at = np.searchsorted(every, addrs.astype(np.int64))
            if kind in READS and sem in ACQUIRES and gpu:
                mine = joined = known.get(p)
                for c in np.unique(clock_at[at]).tolist():
                    joined = _join(joined, clocks[c])
                if joined is not mine:
                    known[p] = joined
                    if p in readers:
                        hist = self.history.setdefault(p, ([], []))
                        hist[0].append(i)
                        hist[1].append(joined)
            if kind in WRITES:
                published = None
                if sem in RELEASES and gpu:
                    rel = self.releases.setdefault(p, [])
                    published = known.get(p)
                    if p in self.col:
                        published = np.full(len(self.col), -1, dtype=np.int64) if published is None else published.copy()
                        published[self.col[p]] = len(rel)
                    rel.append(i)
                if kind == "aw":  # a store starts a new release sequence
                    c = next(fresh)
                    clocks[c] = published
                    clock_at[at] = c
                else:  # a read-modify-write continues the release sequence of the value it replaced
                    old, where = np.unique(clock_at[at], return_inverse=True)
                    new = []
                    for c in old.tolist():
                        merged = _join(clocks[c], published)
                        if merged is not clocks[c]:
                            c = next(fresh)
                            clocks[c] = merged
                        new.append(c)
                    clock_at[at] = np.array(new, dtype=np.int64)[where]
                if len(clocks) > 64 and len(clocks) > 2 * every.size:  # forget the clocks no address holds any more
                    held = set(np.unique(clock_at).tolist()) | {0}
                    clocks = {c: v for c, v in clocks.items() if c in held}
            if last[p] == i:
                known.pop(p, None)  # its last atomic: readers keep their history

    def epoch(self, program: int, event: int) -> int:
        """How many releases ``program`` made before ``event``: the one after it publishes this access."""
        return bisect.bisect_left(self.releases.get(program, []), event)

    def known(self, program: int, event: int, writer: int) -> int:
        """The highest epoch of ``writer`` that ``program`` had acquired before ``event`` (-1: none)."""
        events, clocks = self.history.get(program, ([], []))
        at = bisect.bisect_left(events, event) - 1
        clock = clocks[at] if at >= 0 else None
        return -1 if clock is None else int(clock[self.col[writer]])

    def released_after(self, program: int, event: int) -> bool:
        return self.epoch(program, event) < len(self.releases.get(program, []))


def _join(a, b):
    if b is None:
        return a
    if a is None:
        return b
    m = np.maximum(a, b)
    return a if np.array_equal(m, a) else m


def _sentence(events: list, clocks: _Clocks, a: int, b: int, addr: int, label) -> str:
    (ka, _, q, _, _), (kb, _, p, _, _) = events[a], events[b]
    if ka not in WRITES:  # read before the other program's write: too early
        return (f"program {q} 在 program {p} 写 {label(addr)} 之前就读了它，两者之间没有 release/acquire 建立的先后：读到的"
                "可能是旧值，也可能是新值。要读别的 program 写的数据，先用带 acquire 语义的原子操作等到它的标志再读")
    did = {"r": "读取了", "w": "改写了", "ar": "用原子操作读取了", "vr": "用 volatile 的 tl.load 读取了",
           "aw": "用原子操作写了", "arw": "用原子操作改写了"}[kb]
    done = {"w": "用普通的 tl.store 写过", "aw": "用原子操作写过", "arw": "用原子操作改写过"}[ka]
    head = f"program {p} {did} {label(addr)}，program {q} 在同一次 launch 里{done}它，两者之间没有 release/acquire 建立的先后"
    if not clocks.released_after(q, a):
        why = (f"：program {q} 在这之后没有做带 release 语义的原子操作（sem='relaxed' 或 scope='cta' 的原子操作不算），"
               "它的访问不会按顺序被别的 program 看到")
    else:
        why = (f"：program {p} 在这之前没有用带 acquire 语义的原子操作读到 program {q} 发布的标志"
               "（sem='relaxed' 的原子操作、volatile=True 的 tl.load、scope='cta' 都不算 acquire）")
    if ka == "w" and kb in ATOMIC:
        why += "；如果它是标志或锁，本身就要用原子操作写（tl.atomic_xchg，或 tl.atomic_store）"
    return head + why
