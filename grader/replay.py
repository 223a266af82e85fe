"""The grader's replay: the learner's logged Triton launches, alone, on inputs their code never saw.

    python -m grader.replay ROOT DEVICE CASE_ID,...

Started by :mod:`grader.grade` after the learner's notebook has run and every process of it has been
killed. It imports only the learner's kernels (``ROOT/replay/kernels.py``, see
:mod:`grader.kernel_source`), never their host code, and for each of the cases named (those of
``ROOT/replay/plan.json`` whose call in the learner's run launched kernels and did not fail):

1. reads the launch log the learner's process wrote (``ROOT/work/<case>_launches.json``: untrusted,
   validated field by field, size and depth capped) and the scratch/output snapshots it names;
2. compiles every launched kernel for sm_90 with that launch's signature (``tcourse.compile_info``):
   Python that only the interpreter would run is not Triton and fails here;
3. runs the launches, in order and nothing else, on fresh inputs of the same shapes (``ROOT/replay``,
   never visible to the learner's process) and guarded outputs; on the CPU every load, store and
   atomic of the interpreter is checked against the tensors' storage (an out-of-bounds access is
   reported with the program and the index even when its value is masked at the store), and the grid
   is run a second time with its programs interleaved as a GPU may run them (:mod:`grader.interleave`),
   and, where the in-order run found atomics on addresses several programs share, a third time steered and a
   fourth time reversed at those addresses;
4. writes the outputs and a record to ``ROOT/replay/out`` for :mod:`grader.compare`.

Performance cases (GPU) time the replayed launches against the exercise's own solution (a textbook
kernel), and the tuned ``tcourse.kernels`` reference for information, interleaved in this process.
Status lines (``start``/``end`` per case) go to ``ROOT/replay/out/status.jsonl``: the grader kills and
restarts this process when one case passes its time limit.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
import sys
import threading
import traceback
from pathlib import Path

from . import hints, interleave, lanes, ordering, patching, spin

LOG_CAP = 4 << 20
SNAP_CAP = 256 << 20
MAX_ARGS = 64
MAX_PROGRAMS = 1 << 22
TABLE_BITS = 1024  # by value in one call, grids included: a launch of a few scalars takes a few hundred bits
TENSOR_DTYPES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "int16", "int8", "uint8", "bool",
                 "float8_e4m3fn", "float8_e5m2")


class BadLog(ValueError):
    """The launch log is not what the harness writes, or asks for something the replay will not do."""


class EarlyLoad(RuntimeError):
    """A pipelined loop's load of what an earlier turn of it stored (:class:`grader.lanes.Pipelines`)."""


class Misaligned(RuntimeError):
    """An access inside a tensor at an address that is no multiple of its size (sm_90: misaligned address)."""


class OutOfBounds(RuntimeError):
    pass


class DataRace(RuntimeError):
    """Two programs of one launch touch the same element, one of them writing, without atomics."""


class Unordered(RuntimeError):
    """Two programs of a launch access one element, one writing, with no release/acquire between them."""


class LaneRace(RuntimeError):
    """Two elements of one program pass a value through global memory without a barrier (:mod:`grader.lanes`)."""


class FalseHint(RuntimeError):
    """A hint to the compiler (``tl.multiple_of``, ``max_contiguous``, ``max_constancy``) that the values
    do not keep (the interpreter ignores it, a GPU build relies on it: :mod:`grader.hints`)."""


# --- memory checks and program order (interpreter only) ----------------------------------------------

class Guard:
    """Every memory access of an interpreted kernel must fall inside one of the registered tensors."""

    def __init__(self):
        import numpy as np

        self.np = np
        self.ranges: list[tuple[int, int, str, int]] = []  # (lo, hi, label, itemsize)
        self.first: str | None = None
        self.misaligned: str | None = None  # the first access at an address that is no multiple of its size
        self.unfilled: str | None = None  # a masked load without other= that had masked-off lanes (they read poison)
        self.false_hint: str | None = None  # the first compiler hint the values do not keep (grader.hints)
        self.events: list = []  # every access of the current launch in the order it ran (grader.ordering's events)
        self.event_sizes: list[int] = []  # the element size in bytes of each of those accesses
        self.as_atomic = threading.local()  # .sem: (sem, scope) while tl.atomic_load/store/poll run through load/store
        self.load_call = threading.local()  # .other: whether the running tl.load was given other= (True/False)
        self.interleaving: interleave.Interleaving | None = None
        self.shared: dict = {}  # launch number (with atomics) -> sorted addresses several programs touch, one writing
        self.launch_no = 0
        self.saw_atomics = False  # whether a launch of the current run made an atomic access (race() sets it)
        self.hot = None         # the steered launch's shared addresses (set by interleave.launch)
        self.lanes = lanes.Lanes()  # in order only: elements of one program passing values without a barrier
        self.pipelines = lanes.Pipelines()  # in order only: turns of a pipelined loop passing values through memory
        # the in-order run's stores and atomics that one copy of a small block makes ((launch, program) -> {"late":
        # address -> value stored where the copies had loaded, "stores": [(addresses, values)], "atomics": [operands]});
        # in the late round (late_matters) ``late`` holds them: the copies' loads read those values, and the stores and
        # atomics are made as in the in-order run
        self.copies: dict = {}
        self.late: dict | None = None
        self.element_order = np.random.default_rng()  # the turns of one atomic's elements on one address
        self.in_order = spin.InOrder()  # in order only: a program's spin reads (a new one for each launch)
        self.undefined: list = []  # in order only: (lo, hi, written bytes) of memory nothing wrote before the run
        self.undefined_read: str | None = None  # the first read of a byte there that no write had covered yet
        self._dims = (1, 1, 1)

    def install(self):
        """Patch the interpreter's builder; returns a function that puts the originals back."""
        from triton.runtime import interpreter as I

        b = I.interpreter_builder
        semantic = I.interpreter_semantic
        semantic_load = semantic.load
        # tl.atomic_load / atomic_store / atomic_poll (Triton 3.9) go through create_masked_load/store (as_atomic)
        through = tuple(n for n in ("create_atomic_load", "create_atomic_store", "create_atomic_poll") if hasattr(b, n))
        load, store, rmw, cas = b.create_masked_load, b.create_masked_store, b.create_atomic_rmw, b.create_atomic_cas
        set_dim, barrier = b.set_grid_dim, b.create_barrier
        set_attr = I.TensorHandle.set_attr
        patch_core = I._patch_lang_core

        def patch_core_pipelined(lang, scope):  # tl.range(..., num_stages=S > 1): its turns followed (lanes.Pipelines)
            patch_core(lang, scope)
            plain = lang.range

            def pipelined_range(arg1, arg2=None, step=None, num_stages=None, *rest, **kw):  # tl.range's order
                turns = plain(arg1, arg2, step)
                if num_stages is None or int(num_stages) < 2 or self.interleaving is not None or not self.ranges:
                    return turns
                return self.pipelines.loop(turns, int(num_stages), tuple(int(v) for v in b.grid_idx))
            scope.set_attr(lang, "range", pipelined_range)

        def checked_set_attr(handle, key, value):  # tl.multiple_of / max_contiguous / max_constancy (grader.hints)
            if self.ranges and self.false_hint is None:
                ty = handle.dtype
                size = ty.element_ty.primitive_bitwidth // 8 if ty.is_ptr() else None
                self.false_hint = hints.violation(key, handle.data, value, size)
            return set_attr(handle, key, value)

        def step():  # every memory access is a point where another program may run first
            if self.interleaving is not None:
                self.interleaving.point()

        def seen(kind, ptrs, result, poisoned=False):  # a spin read repeats a small access and reads the same values
            if self.interleaving is not None:
                self.interleaving.seen(spin.access(kind, ptrs, result))
            elif self.ranges:  # in order: a spin nothing else can end is an EndlessWait
                self.in_order.seen(tuple(int(v) for v in b.grid_idx), kind, ptrs, result, self.label, poisoned)
            return result

        def sem_of(sem, scope):  # Triton's IR enums by name: ("ACQUIRE_RELEASE", "GPU")
            return str(sem).rsplit(".", 1)[-1], str(scope).rsplit(".", 1)[-1]

        def atomic_now():  # (sem, scope) when this load or store is tl.atomic_load/store/poll's, else None
            return getattr(self.as_atomic, "sem", None)

        def in_order(access, ptrs, mask, value=None, releases=False, **kw):  # the lanes of the running program (in order)
            if self.interleaving is None and self.ranges:
                np = self.np
                index = np.arange(ptrs.data.size) if mask is None else np.flatnonzero(np.asarray(mask.data).astype(bool))
                pos = self.lanes.position(np.shape(ptrs.data), index)
                program, addrs = tuple(int(v) for v in b.grid_idx), self.addresses(ptrs, mask).astype(np.int64)
                if releases:  # before its own write is recorded: the stores of the other elements
                    self.lanes.release(program, pos, self.linear(program))
                size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
                access(program, addrs, pos, self.label, size=size, **kw)
                if self.pipelines.active:
                    if access == self.lanes.load:
                        self.pipelines.load(addrs, size, self.label)
                    else:
                        self.pipelines.store(addrs, size)
                if value is not None:  # a store: its elements may not put different values into one address
                    values = np.broadcast_to(np.asarray(value.data), np.asarray(ptrs.data).shape).ravel()[index]
                    self.lanes.one_store(program, addrs, pos, values, self.label)
                    if self.late is None and ptrs.data.size < self.lanes.threads:  # one copy of a small block stores
                        self.lanes.copies_read_other_bytes(program, addrs, size, self.label)
                        noted = self.copies.setdefault((self.launch_no, program), {"late": {}, "stores": []})
                        noted["stores"].append((addrs, values))
                        early = self.lanes.loaded_by_copies(addrs)
                        for a, v in zip(addrs[early].tolist(), values[early].tolist()):
                            noted["late"].setdefault(a, v)
                            noted.setdefault("where", self.label(a))

        def poison(ptrs):  # what a masked-off lane of a load without other= holds: undefined on a GPU, not 0
            np = self.np
            dtype = I._get_np_dtype(ptrs.get_element_ty())
            bad = np.nan if np.issubdtype(dtype, np.floating) else True if dtype == np.bool_ else np.iinfo(dtype).max
            return I.TensorHandle(np.full(ptrs.data.shape, bad, dtype=dtype), ptrs.get_element_ty())

        def masked_load(ptrs, mask, other=None, *rest, **kw):  # rest: (cache, is_volatile) in Triton 3.9; 3.6 has
            # (cache, eviction, is_volatile); a tensor descriptor's load names them
            is_volatile = bool(kw.get("is_volatile", rest[-1] if rest else False))
            hot = shared(ptrs, mask)
            step()
            atomic = atomic_now()
            if atomic:
                self.note(ptrs, mask, b, "原子操作", ("ar", *atomic))
            else:  # a volatile load reads like a relaxed atomic: it orders nothing (grader.ordering)
                self.note(ptrs, mask, b, "读取", ("vr", "RELAXED", "SYSTEM") if is_volatile else ("r",))
            in_order(self.lanes.load, ptrs, mask)
            # the builder gets None for a scalar's other=0 too (Triton tests the value's truth): tl.load says (load_call)
            given = getattr(self.load_call, "other", None)
            poisoned = other is None and mask is not None and (ptrs.data.size > 1 or given is False) \
                and not bool(self.np.all(mask.data))  # masked-off lanes that read what a GPU leaves undefined
            if poisoned:
                other = poison(ptrs)
                if self.unfilled is None and self.ranges:
                    on = self.addresses(ptrs, mask)
                    on = on if on.size else self.addresses(ptrs, None)  # a scalar's one lane is the masked-off one
                    self.unfilled = self.tensor_near(int(on[0]))
            result = seen("aload" if atomic else "load", ptrs, load(ptrs, mask, other, *rest, **kw), poisoned)
            touched(hot, True, False)
            if self.late is not None and ptrs.data.size < self.lanes.threads:
                result = late_load(ptrs, mask, result)
            return result

        def late_load(ptrs, mask, result):  # the late round: a copy reads what its program stores there afterwards
            noted = self.late.get((self.launch_no, tuple(int(v) for v in b.grid_idx)))
            if not noted or not noted["late"]:
                return result
            np = self.np
            addrs = np.asarray(ptrs.data).astype(np.int64).ravel()
            on = np.ones(addrs.size, dtype=bool) if mask is None else np.asarray(mask.data).astype(bool).ravel()
            data = np.array(result.data, copy=True).reshape(-1)
            for i in np.flatnonzero(on):
                if int(addrs[i]) in noted["late"]:
                    data[i] = noted["late"][int(addrs[i])]
            return I.TensorHandle(data.reshape(np.shape(result.data)), result.dtype)

        def forced_store(ptrs, mask, value):  # the late round: one copy stores what the in-order run stored
            noted = self.late.get((self.launch_no, tuple(int(v) for v in b.grid_idx)))
            if not noted or not noted["stores"]:
                return value
            np = self.np
            addrs, values = noted["stores"].pop(0)
            full = np.array(np.broadcast_to(np.asarray(value.data), np.shape(ptrs.data)), copy=True).reshape(-1)
            on = np.ones(full.size, dtype=bool) if mask is None else np.asarray(mask.data).astype(bool).ravel()
            if int(on.sum()) == addrs.size and (np.asarray(ptrs.data).astype(np.int64).ravel()[on] == addrs).all():
                full[on] = values
            return I.TensorHandle(full.reshape(np.shape(ptrs.data)), value.dtype)

        def masked_store(ptrs, value, mask, *args, **kw):
            hot = shared(ptrs, mask)
            step()
            atomic = atomic_now()
            if atomic:
                self.note(ptrs, mask, b, "原子操作", ("aw", *atomic))
            else:
                self.note(ptrs, mask, b, "写入", ("w",))
            if self.late is not None and not atomic and ptrs.data.size < self.lanes.threads:
                value = forced_store(ptrs, mask, value)
            in_order(self.lanes.store, ptrs, mask, value, releases=bool(atomic) and atomic[0] in ordering.RELEASES,
                     plain=not atomic)
            result = store(ptrs, value, mask, *args, **kw)
            seen("store", ptrs, None)
            touched(hot, False, True)
            return result

        def shared(ptrs, mask):  # the addresses of an access that another program also touches (a steered launch)
            hot = self.hot
            if hot is None or not hot.size or self.interleaving is None:
                return None
            a = self.addresses(ptrs, mask).astype(self.np.int64)
            a = a[hot[self.np.clip(self.np.searchsorted(hot, a), 0, hot.size - 1)] == a]
            if not a.size:
                return None
            addrs = set(a.tolist())
            self.interleaving.before_shared(addrs)  # the reversed round waits here
            return addrs

        def touched(addrs, read, wrote):
            if addrs:
                self.interleaving.shared_access(addrs, read, wrote)

        def kept_operands(ptr, *operands):  # one copy of a small block makes an atomic: its operands as in order
            if not (self.interleaving is None and self.ranges and ptr.data.size < self.lanes.threads):
                return operands
            key = (self.launch_no, tuple(int(v) for v in b.grid_idx))
            if self.late is None:
                self.copies.setdefault(key, {"late": {}, "stores": []}).setdefault("atomics", []).append(operands)
                return operands
            queue = self.late.get(key, {}).get("atomics")
            return queue.pop(0) if queue else operands

        def atomic_rmw(op, ptr, val, mask, sem, scope):
            val, = kept_operands(ptr, val)
            hot = shared(ptr, mask)
            step()
            names = sem_of(sem, scope)
            self.note(ptr, mask, b, "原子操作", ("arw", *names))
            # to the other elements: a write like a store; with release semantics, what they stored goes out first
            in_order(self.lanes.store, ptr, mask, releases=names[0] in ordering.RELEASES, plain=False)
            result = seen(f"rmw{op}", ptr, any_order_rmw(op, ptr, val, mask, sem, scope))
            touched(hot, True, True)  # it reads too: another program may come between it and the next access
            return result

        def any_order_rmw(op, ptr, val, mask, sem, scope):
            """The interpreter applies one atomic's elements in element order; on a GPU the elements that hit one
            address take turns in no set order (what each gets back depends on it): here in a random order."""
            np = self.np
            p = np.asarray(ptr.data)
            live = p.ravel() if mask is None else p.ravel()[np.broadcast_to(np.asarray(mask.data), p.shape).ravel().astype(bool)]
            if p.size < 2 or np.unique(live).size == live.size:
                return rmw(op, ptr, val, mask, sem, scope)
            order = self.element_order.permutation(p.size)

            def shuffled(h):
                return None if h is None else I.TensorHandle(
                    np.ascontiguousarray(np.broadcast_to(np.asarray(h.data), p.shape).ravel()[order].reshape(p.shape)), h.dtype)
            out = rmw(op, shuffled(ptr), shuffled(val), shuffled(mask), sem, scope)
            back = np.empty_like(np.asarray(out.data).ravel())
            back[order] = np.asarray(out.data).ravel()
            return I.TensorHandle(back.reshape(p.shape), out.dtype)

        def atomic_cas(ptr, cmp, val, sem, scope):
            cmp, val = kept_operands(ptr, cmp, val)
            hot = shared(ptr, None)
            step()
            names = sem_of(sem, scope)
            self.note(ptr, None, b, "原子操作", ("arw", *names))
            in_order(self.lanes.store, ptr, None, releases=names[0] in ordering.RELEASES, plain=False)
            result = seen("cas", ptr, cas(ptr, cmp, val, sem, scope))
            touched(hot, True, True)
            return result

        def as_atomic(name):  # tl.atomic_load/store/poll: the interpreter's own, its loads and stores marked atomic
            original = getattr(b, name)

            def run(*args):
                self.as_atomic.sem = sem_of(*args[-2:])
                try:
                    return original(*args)
                finally:
                    self.as_atomic.sem = None
            return run

        def load_noting_other(ptr, mask, other, *rest, **kw):  # tl.load's semantic step, before the builder
            self.load_call.other = other is not None
            try:
                return semantic_load(ptr, mask, other, *rest, **kw)
            finally:
                self.load_call.other = None

        def debug_barrier():
            self.lanes.barrier()
            return barrier()

        def grid_dim(nx, ny, nz):
            set_dim(nx, ny, nz)
            self._dims = (nx, ny, nz)

        return patching.patch([(b, "create_masked_load", masked_load), (b, "create_masked_store", masked_store),
                               (b, "create_atomic_rmw", atomic_rmw), (b, "create_atomic_cas", atomic_cas),
                               (b, "set_grid_dim", grid_dim), (b, "create_barrier", debug_barrier)]
                              + [(b, name, as_atomic(name)) for name in through]
                              + [(I.TensorHandle, "set_attr", checked_set_attr), (semantic, "load", load_noting_other),
                                 (I, "_patch_lang_core", patch_core_pipelined)])

    def note(self, ptrs, mask, builder, verb: str, event: tuple) -> None:
        """Check the access, and remember it in :attr:`events` (``event``: kind, then sem and scope for an atomic)."""
        self.check(ptrs, mask, verb, builder)
        if self.ranges:
            addrs = self.addresses(ptrs, mask)
            if addrs.size:
                kind, *names = event
                if self.undefined:
                    self.note_defined(addrs, kind, max(1, ptrs.get_element_ty().primitive_bitwidth // 8), builder)
                self.events.append((kind, addrs, self.linear(builder.grid_idx), *(names or (None, None))))
                self.event_sizes.append(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))

    def note_defined(self, addrs, kind: str, size: int, builder) -> None:
        """In :attr:`undefined` memory, the bytes a write covers become defined; a read (an atomic reads too) of a
        byte that no write has covered yet is noted in :attr:`undefined_read` (the first one only)."""
        np = self.np
        a = addrs.astype(np.int64)
        for lo, hi, written in self.undefined:
            at = a[(a >= lo) & (a < hi)] - lo
            if not at.size:
                continue
            if kind != "w" and kind != "aw" and self.undefined_read is None:
                unread = at[~written[at]]
                if unread.size:
                    pid = tuple(int(v) for v in builder.grid_idx)
                    self.undefined_read = f"program {pid} 读取了 {self.label(lo + int(unread[0]))}"
            if kind in ("w", "aw", "arw"):
                span = (at[:, None] + np.arange(size)).ravel()
                written[span[span < hi - lo]] = True

    def linear(self, program) -> int:
        """A program's (x, y, z) as one number, x slowest, in the launch's grid."""
        _, ny, nz = self._dims
        x, y, z = program
        return (x * ny + y) * nz + z

    def race(self, record: bool = True) -> DataRace | Unordered | None:
        """After a launch: in a launch without atomics, an element written by one program and written or read by
        another is a data race on a GPU (its programs run at the same time, in no set order); with atomics, such
        accesses must be ordered by a release and an acquire (:mod:`grader.ordering`). With ``record`` (the
        in-order run), the elements its atomics share are kept for the steered and reversed rounds."""
        np = self.np
        events, sizes, self.events, self.event_sizes = self.events, self.event_sizes, [], []
        if len(set(sizes)) > 1:  # a tensor read through a view of another dtype (hostile round 15: a byte of a
            # neighbour's float32 through an int8 pointer): accesses compared byte by byte, not by their first address
            events = [(e[0], lanes.byte_addresses(e[1], size), *e[2:]) for e, size in zip(events, sizes)]
        of = lambda kinds: [(e[1], e[2]) for e in events if e[0] in kinds]  # noqa: E731  (addresses, program) pairs
        loads, stores, atomics = of(("r", "vr")), of(("w",)), of(("ar", "aw", "arw"))  # a volatile load is no atomic here
        if self.lanes.releases and (loads or stores or atomics):
            _, _, _, (addr, prog) = self._by_address([*loads, *stores, *atomics])

            def used_by_others(program, early):
                hit = addr[(prog != program) & np.isin(addr, early)]
                return int(hit[0]) if hit.size else None
            self.lanes.released_early(used_by_others, self.label)
        self.launch_no += 1
        self.saw_atomics = self.saw_atomics or bool(atomics)
        if atomics and record:  # atomics read and write: the steered round waits on the addresses programs share
            shared = self._shared([*loads, *atomics], [*stores, *atomics])
            if shared.size:
                self.shared[self.launch_no] = shared
        if atomics:
            found = ordering.first_unordered(events, self.label)
            return Unordered(found) if found else None
        if not stores:
            return None
        w_addr, w_first, w_last, (s_addr, s_prog) = self._by_address(stores)
        shared = w_first != w_last
        if shared.any():
            a = int(w_addr[np.argmax(shared)])
            progs = np.unique(s_prog[s_addr == a])[:2]
            return DataRace(f"program {int(progs[0])} 和 program {int(progs[1])} 都写了同一个元素（{self.label(a)}），"
                            "没有用原子操作")
        if not loads:
            return None
        l_addr = np.concatenate([a for a, _ in loads]).astype(np.int64)
        l_prog = np.concatenate([np.full(a.size, p, dtype=np.int64) for a, p in loads])
        at = np.clip(np.searchsorted(w_addr, l_addr), 0, w_addr.size - 1)  # each written address has one writer now
        other = (w_addr[at] == l_addr) & (w_first[at] != l_prog)
        if other.any():
            i = int(np.argmax(other))
            return DataRace(f"program {int(l_prog[i])} 读取了 program {int(w_first[at[i]])} 在同一次 launch 里写的元素"
                            f"（{self.label(int(l_addr[i]))}）")
        return None

    def _by_address(self, accesses: list):
        """The addresses of ``accesses`` ((addresses, program) pairs) sorted and unique, with the lowest and the
        highest program that touched each; and every access's address and program, sorted by address."""
        np = self.np
        addr = np.concatenate([a.astype(np.int64) for a, _ in accesses])
        prog = np.concatenate([np.full(a.size, p, dtype=np.int64) for a, p in accesses])
        order = np.argsort(addr)
        addr, prog = addr[order], prog[order]
        starts = np.flatnonzero(np.concatenate(([True], addr[1:] != addr[:-1])))
        return addr[starts], np.minimum.reduceat(prog, starts), np.maximum.reduceat(prog, starts), (addr, prog)

    def _shared(self, loads: list, stores: list):
        """Addresses written by one program and read or written by another (sorted, int64)."""
        np = self.np
        addr, first, last, _ = self._by_address([*stores, *loads])
        written = np.unique(np.concatenate([x.astype(np.int64) for x, _ in stores]))
        return np.intersect1d(addr[first != last], written)

    def label(self, addr: int) -> str:
        for lo, hi, name, item in self.ranges:
            if lo <= addr < hi:
                return f"{name}[{(addr - lo) // item}]"
        return hex(addr)

    def tensor_near(self, addr: int) -> str:
        """The tensor an address lies in, or the nearest one (a masked-off lane may point past a tensor's end)."""
        return min(self.ranges, key=lambda r: 0 if r[0] <= addr < r[1] else min(abs(addr - r[0]), abs(addr - r[1])))[2]

    def addresses(self, ptrs, mask):
        """The addresses an access touches (its masked-off lanes left out), flat, uint64."""
        np = self.np
        addrs = np.asarray(ptrs.data).astype(np.uint64).ravel()
        return addrs if mask is None else addrs[np.asarray(mask.data).astype(bool).ravel()]

    def check(self, ptrs, mask, verb: str, builder) -> None:
        np = self.np
        addrs = self.addresses(ptrs, mask)
        if not addrs.size or not self.ranges:
            return
        size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
        lo = np.array([r[0] for r in self.ranges], dtype=np.uint64)
        hi = np.array([r[1] for r in self.ranges], dtype=np.uint64)
        order = np.argsort(lo)
        lo, hi = lo[order], hi[order]
        idx = np.searchsorted(lo, addrs, side="right") - 1
        ok = (idx >= 0) & (addrs + np.uint64(size) <= hi[np.clip(idx, 0, None)])
        if ok.all():
            odd = addrs % np.uint64(size) != 0
            if odd.any():  # inside a tensor, but not at a multiple of its size: a pointer cast (int64 through a float32
                # tensor at an odd element, hostile round 15) that sm_90 faults on (misaligned address)
                pid = tuple(int(v) for v in builder.grid_idx)
                self.misaligned = (f"program {pid} {verb}了 {size} 字节的值，地址在 {self.label(int(addrs[odd][0]))} "
                                   f"里面，不是 {size} 的倍数")
                raise Misaligned(self.misaligned)
            return
        bad = int(addrs[~ok][0])
        lo_, hi_, label, item = min(self.ranges, key=lambda r: min(abs(bad - r[0]), abs(bad - r[1])))
        n = (hi_ - lo_) // item
        i = (bad - lo_) // item if bad >= lo_ else -((lo_ - bad + item - 1) // item)
        pid = tuple(int(v) for v in builder.grid_idx)
        self.first = f"program {pid} {verb}了 {label}[{i}]，在张量外面（{label} 在存储里只有 {n} 个元素，下标 0..{n - 1}）"
        raise OutOfBounds(self.first)


# --- reading the learner's log ---------------------------------------------------------------------------

def _check_keys(obj, keys, where):
    if not isinstance(obj, dict) or not set(obj) <= set(keys):
        raise BadLog(f"{where}: unexpected structure")


# launch options other than num_warps and num_stages, at their defaults (the replay compiles with none of them)
LAUNCH_DEFAULTS = {"num_ctas": 1, "launch_cooperative_grid": False, "launch_pdl": False, "maxnreg": None,
                   "enable_fp_fusion": True, "debug": False}


def launch_limits(name: str, report) -> str | None:
    """What keeps a kernel that compiles for sm_90 from launching there (Triton's launcher raises OutOfResources):
    more shared memory than a program may have, more than 1024 threads, more registers than an SM holds."""
    from tcourse.compile_info import H100_SMEM_LIMIT

    threads = 32 * report.num_warps
    if not report.fits_sm90:
        return (f"kernel {name} 在 sm_90 上要 {report.shared_bytes} B 共享内存，超过一个 program 的上限 {H100_SMEM_LIMIT} B："
                "GPU 上启动时报 OutOfResources（减小块大小或 num_stages）")
    if threads > 1024:
        return f"kernel {name} 用 num_warps={report.num_warps}，一个 program {threads} 个线程，超过 GPU 的上限 1024：启动时报错"
    if report.registers and report.registers * threads > 65536:
        return (f"kernel {name} 每个线程用 {report.registers} 个寄存器，{threads} 个线程共 {report.registers * threads} 个，"
                "超过一个 SM 的 65536 个：GPU 上启动时报 OutOfResources")
    return None


class Replayer:
    def __init__(self, root: Path, device: str, kernels, guard: Guard | None):
        import numpy as np
        import torch

        from . import buffers, safeio

        self.root, self.device, self.kernels, self.guard = root, device, kernels, guard
        self.on_round = None  # called with (case id, round) as each round of a case finishes
        self.np, self.torch, self.buffers, self.safeio = np, torch, buffers, safeio
        self.compiled: dict = {}

    # ----- decoding -----
    def decode(self, v, bufs: dict, depth=0):
        torch = self.torch
        if not isinstance(v, dict) or "t" not in v or depth > 4:
            raise BadLog("an argument is not an encoded value")
        t = v["t"]
        if t == "tensor":
            _check_keys(v, ("t", "buf", "byte", "dtype", "nbytes"), "tensor argument")
            key, byte, dt = v.get("buf"), v.get("byte"), v.get("dtype")
            if key not in bufs:
                raise BadLog(f"tensor argument names unknown buffer {str(key)[:40]!r}")
            if dt not in TENSOR_DTYPES or not isinstance(byte, int) or isinstance(byte, bool):
                raise BadLog("tensor argument with a bad dtype or offset")
            buf = bufs[key]
            dtype = getattr(torch, dt)
            item = torch.empty(0, dtype=dtype).element_size()
            nbytes = buf.untyped_storage().nbytes()
            if not 0 <= byte < max(nbytes, 1) or byte % item:
                raise BadLog(f"tensor argument at byte {byte} of {key} ({nbytes} bytes)")
            return torch.empty(0, dtype=dtype, device=buf.device).set_(buf.untyped_storage(), byte // item,
                                                                       ((nbytes - byte) // item,), (1,))
        if t in ("int", "float", "bool", "str"):
            want = {"int": int, "float": float, "bool": bool, "str": str}[t]
            val = v.get("v")
            if not isinstance(val, want) or (t == "int" and isinstance(val, bool)) or (t == "int" and abs(val) >= 2**63):
                raise BadLog(f"a {t} argument has the wrong type")
            return val
        if t == "none":
            return None
        if t == "tldtype":
            import triton.language as tl

            name = v.get("v")
            obj = getattr(tl, {"fp16": "float16", "fp32": "float32", "bf16": "bfloat16", "fp64": "float64"}.get(name, name), None) \
                if isinstance(name, str) and name.isidentifier() else None
            if not isinstance(obj, tl.dtype):
                raise BadLog("a dtype argument is not a Triton dtype")
            return obj
        if t == "tuple":
            items = v.get("v")
            if not isinstance(items, list) or len(items) > MAX_ARGS:
                raise BadLog("a tuple argument is malformed")
            return tuple(self.decode(x, bufs, depth + 1) for x in items)
        if t == "desc":
            from triton.tools.tensor_descriptor import TensorDescriptor

            base = self.decode(v.get("base"), bufs, depth + 1)
            dims = [v.get(k) for k in ("shape", "strides", "block_shape")]
            if not all(isinstance(d, list) and 0 < len(d) <= 5 and all(isinstance(x, int) for x in d) for d in dims):
                raise BadLog("a tensor descriptor argument is malformed")
            return TensorDescriptor(base, *dims)
        if t == "unsupported":
            raise BadLog(f"kernel 的一个参数是 {str(v.get('type'))[:40]} 类型，评分器无法重放：参数只能是张量、int、float、"
                         "bool、None、元组或 constexpr")
        raise BadLog(f"unknown argument kind {str(t)[:20]!r}")

    def read_log(self, cid: str) -> list[dict]:
        log = self.safeio.load_json(self.root / "work" / f"{cid}_launches.json", LOG_CAP, depth=12)
        _check_keys(log, ("launches", "snapshots"), "launch log")
        launches = log.get("launches")
        if not isinstance(launches, list) or len(launches) > 64:
            raise BadLog("一次调用最多启动 64 次 kernel")
        for e in launches:
            _check_keys(e, ("kernel", "grid", "args", "kwargs"), "launch")
            if not isinstance(e.get("kernel"), str) or e["kernel"] not in self.kernels:
                raise BadLog(f"启动了 kernel {str(e.get('kernel'))[:40]!r}，可答案单元的最外层没有这个 @triton.jit 函数："
                             "kernel 要定义在答案单元的最外层（不要放在 if、函数或类里面，也不要用别处定义的 kernel）")
            g = e.get("grid")
            if not (isinstance(g, list) and 1 <= len(g) <= 3 and all(isinstance(x, int) and 0 <= x for x in g)):
                raise BadLog("launch with a malformed grid")
            if math.prod(g) > MAX_PROGRAMS:
                raise BadLog(f"grid {g} 有 {math.prod(g)} 个 program，超过评分器重放的上限 {MAX_PROGRAMS}：用更大的块")
            if g[0] > 2**31 - 1 or any(x > 65535 for x in g[1:]):
                raise BadLog(f"grid {g} 超出 CUDA 的上限（第一维最多 2^31 - 1，第二、三维最多 65535），GPU 上这次启动会失败："
                             "把大的那一维放在 grid 的第一维（tl.program_id(0)）")
            if not isinstance(e.get("args"), list) or not isinstance(e.get("kwargs"), dict) or \
                    len(e["args"]) + len(e["kwargs"]) > MAX_ARGS:
                raise BadLog("launch with malformed arguments")
        return launches

    def snapshots(self, cid: str, launches: list[dict], bufs: dict, host_scratch: bool = True) -> list[str]:
        """Scratch buffers as they were at their first launch; output buffers likewise. Without
        ``host_scratch`` (an exercise whose kernel must compute everything itself), a scratch buffer that held
        different values at its first launch (a table the wrapper filled) starts from random bytes instead;
        returns those buffers' keys."""
        torch = self.torch
        seen: dict[str, int] = {}

        def walk(v):
            if isinstance(v, dict) and v.get("t") == "tensor" and str(v.get("buf", "")).startswith("scratch:"):
                n = v.get("nbytes")
                if not isinstance(n, int) or not 0 <= n <= SNAP_CAP:
                    raise BadLog("scratch buffer with a bad size")
                seen.setdefault(v["buf"], n)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

        walk(launches)
        refilled: list[str] = []
        if sum(seen.values()) > SNAP_CAP:
            raise BadLog("包装函数分配给 kernel 的张量太大，评分器无法重放")
        for key in list(seen) + [k for k in bufs if k.startswith("out:")]:
            path = self.root / "work" / f"{cid}_snap_{key.replace(':', '_')}.npy"
            if key.startswith("out:"):
                if not path.exists():
                    continue
                want = bufs[key].untyped_storage().nbytes()
            else:
                want = seen[key]
            raw = self.safeio.load_npy(path, SNAP_CAP + 4096, dtype="uint8", shape=(want,))
            if not host_scratch and key.startswith("scratch:") and raw.size and (raw != raw[0]).any():
                raw = self.np.random.default_rng().integers(0, 256, raw.size, dtype=self.np.uint8)
                refilled.append(key)
            t = torch.from_numpy(raw.copy()).to(self.device)
            if key.startswith("out:"):
                torch.empty(0, dtype=torch.uint8, device=bufs[key].device).set_(bufs[key].untyped_storage()).copy_(t)
            else:
                bufs[key] = t
        return refilled

    # ----- compile check -----
    def compile_check(self, name: str, args: list, kwargs: dict) -> tuple[str, str] | None:
        from tcourse.compile_info import compile_for_sm90

        kernel = self.kernels[name]
        fn = getattr(kernel, "fn", kernel)
        params = inspect.signature(fn).parameters
        # constexpr as the interpreter decides it (the annotation is constexpr itself); the compiler takes any
        # annotation whose name contains "constexpr": where the two differ, a branch can go one way on each
        import triton.language as tl

        constexpr = {p for p, par in params.items()
                     if par.annotation is tl.constexpr or str(par.annotation).strip() in ("constexpr", "tl.constexpr")}
        odd = [p for p, par in params.items() if p not in constexpr and "constexpr" in str(par.annotation)]
        if odd:
            return "compile_error", f"kernel {name} 的参数 {odd} 的注解不是 tl.constexpr 本身：编译器把它当常量，解释器不当"
        values = dict(zip(params, args))
        options = {}
        for k, v in kwargs.items():
            if k in params:
                values[k] = v
            elif k in ("num_warps", "num_stages"):
                options[k] = v
            elif k not in LAUNCH_DEFAULTS or LAUNCH_DEFAULTS[k] != v:
                return "launch_error", (f"kernel {name} 启动时用了 {k}={repr(v)[:40]}：评分器按 num_warps、num_stages 编译和检查 kernel，"
                                        "不模拟别的启动选项（CTA cluster、cooperative launch、PDL、寄存器上限、不融合乘加），"
                                        "它们在 GPU 上改变启动方式，有的会让启动失败；这一题不需要它们，去掉这个参数")
        for p, par in params.items():
            if p not in values and par.default is not inspect.Parameter.empty:
                values[p] = par.default
        missing = [p for p in params if p not in values]
        if missing:
            return f"kernel {name} 启动时少了参数 {missing}"
        consts = {p: values[p] for p in params if p in constexpr}
        runtime = [values[p] for p in params if p not in constexpr]
        ones = tuple(p for p in params if p not in constexpr and type(values[p]) is int and values[p] == 1)
        key = (name, tuple((str(a.dtype) if hasattr(a, "dtype") else type(a).__name__) for a in runtime),
               tuple(sorted((k, repr(v)) for k, v in consts.items())), tuple(sorted(options.items())), ones)
        if key not in self.compiled:
            self.compiled[key] = None
            # unspecialised first: the code the interpreter ran must compile; then, where an int argument is 1,
            # as a GPU launch specialises it (a constant): that must compile too
            for specialize in (False, True) if ones else (False,):
                try:
                    report = compile_for_sm90(kernel, *runtime, num_warps=options.get("num_warps", 4),
                                              num_stages=options.get("num_stages", 3), specialize=specialize, **consts)
                except Exception as e:  # the compiler's message is the learner's feedback
                    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
                    when = f"（参数 {'、'.join(ones)} 等于 1 时：GPU 启动把等于 1 的整数参数当常量编译）" if specialize else ""
                    self.compiled[key] = ("compile_error", f"kernel {name} 不能为真实的 GPU（sm_90）编译{when}："
                                          + " | ".join(lines[-4:])[-600:])
                    break
                refused = launch_limits(name, report)
                if refused:
                    self.compiled[key] = ("launch_error", refused)
                    break
        return self.compiled[key]

    # ----- one case -----
    def fresh_buffers(self, case: dict) -> tuple[dict, dict, dict]:
        bufs, views, spans = {}, {}, {}
        for spec in case["inputs"]:
            arr = self.safeio.load_npy(self.root / "replay" / spec["file"], 1 << 31)
            views[f"in:{spec['name']}"], bufs[f"in:{spec['name']}"] = self.buffers.guarded_input(spec, arr, self.device)
        for spec in case["outputs"]:
            views[f"out:{spec['name']}"], bufs[f"out:{spec['name']}"] = self.buffers.guarded_output(spec, self.device)
        for key, v in views.items():
            _, span = self.buffers.layout_strides(v.shape, next(s for s in case["inputs"] + case["outputs"]
                                                                if key.split(":", 1)[1] == s["name"])["layout"])
            spans[key] = (v.data_ptr(), v.data_ptr() + span * v.element_size(), key.split(":", 1)[1], v.element_size())
        return bufs, views, spans

    def decoded(self, launches, bufs) -> list:
        return [(self.kernels[e["kernel"]], tuple(e["grid"]), [self.decode(a, bufs) for a in e["args"]],
                 {k: self.decode(v, bufs) for k, v in e["kwargs"].items()}) for e in launches]

    def run_launches(self, launches, bufs, spans, interleave_seed=None, steer=None, undefined=()) -> None:
        """The logged launches in order; with a seed (interpreter only), each launch's programs interleaved
        (:mod:`grader.interleave`), with ``steer`` ("steered" or "reversed") steered at the addresses the in-order
        run found shared. ``undefined``: the (lo, hi) address ranges whose contents nothing defined before the
        run (in order, interpreter only: the first read there before a write is noted, :meth:`Guard.note_defined`)."""
        rng = None
        if self.guard is not None:
            self.guard.ranges = list(spans.values()) + [
                (t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes(), k.replace("scratch:", "scratch"), 1)
                for k, t in bufs.items() if k.startswith("scratch:")]
            self.guard.first, self.guard.misaligned, self.guard.events, self.guard.event_sizes = None, None, [], []
            self.guard.unfilled = self.guard.false_hint = self.guard.undefined_read = None
            self.guard.undefined = [(lo, hi, self.np.zeros(hi - lo, dtype=bool)) for lo, hi in undefined]
            self.guard.launch_no = 0
            self.guard.saw_atomics = False
            self.guard.lanes.take()
            self.guard.pipelines.take()
            if self.guard.late is None:
                self.guard.copies = {}
            if interleave_seed is None:
                self.guard.shared = {}  # the in-order run's, kept for the rounds after it
            rng = self.np.random.default_rng(interleave_seed) if interleave_seed is not None else None
        try:
            for kernel, grid, args, kwargs in self.decoded(launches, bufs):
                if self.guard is not None:
                    self.guard.in_order = spin.InOrder()
                    self.guard.lanes.threads = 32 * int(kwargs.get("num_warps", 4))
                if rng is None or math.prod(grid) > interleave.MAX_PROGRAMS:
                    kernel[grid](*args, **kwargs)
                else:
                    hot = self.guard.shared.get(self.guard.launch_no + 1) if steer else None
                    interleave.launch(kernel, grid, args, kwargs, rng, self.guard, hot, steer == "reversed")
                race = self.guard.race(rng is None) if self.guard is not None else None
                if race:
                    raise race
                lane = self.guard.lanes.take() if self.guard is not None else None
                if lane:
                    raise LaneRace(lane)
                early = self.guard.pipelines.take() if self.guard is not None else None
                if early:
                    raise EarlyLoad(early)
                if self.guard is not None and self.guard.false_hint:
                    raise FalseHint(self.guard.false_hint)
            if self.device == "cuda":
                self.torch.cuda.synchronize()
        finally:
            if self.guard is not None:  # checks apply to the replay only (the self-check runs the learner's call too)
                self.guard.ranges, self.guard.undefined = [], []

    def tensor_case(self, case: dict) -> dict:
        cid = case["id"]
        rec = {"error": None, "compile_error": None, "oob": None, "inputs_changed": [], "interleaved": False}
        launches = self.read_log(cid)
        bufs, views, spans = self.fresh_buffers(case)
        before = {k: self.buffers.to_numpy(b).copy() for k, b in bufs.items() if k.startswith("in:")}
        untouched = {k: _bits(v).clone() for k, v in views.items() if k.startswith("out:")}
        refilled = self.snapshots(cid, launches, bufs, case.get("host_scratch", True))
        if refilled:
            rec["host_tables"] = [k.replace("scratch:", "scratch") for k in refilled]
        if not case.get("host_scratch", True):
            by_value = sum(32 * len(e["grid"]) + sum(_bits_by_value(v) for v in (*e["args"], *e["kwargs"].values()))
                           for e in launches)
            if by_value > TABLE_BITS:  # the same table by value (tuples, strings, numbers packed with bits, many launches)
                rec["host_tuple"] = by_value
                return rec
        host_fill = {}  # outputs the wrapper filled with one value before the first launch (out.zero_())
        for k, was in untouched.items():
            now = _bits(views[k])
            if now.numel() and not bool((now == now[0]).all()):
                rec["host_values"] = k.split(":", 1)[1]
                return rec
            if now.numel() and not bool((now == was).all()):
                host_fill[k] = now.clone()
        for e in launches:
            args = [self.decode(a, bufs) for a in e["args"]]
            kwargs = {k: self.decode(v, bufs) for k, v in e["kwargs"].items()}
            refused = self.compile_check(e["kernel"], args, kwargs)
            if refused:
                rec[refused[0]] = refused[1]  # compile_error or launch_error
                return rec
        initial = {k: b.clone() for k, b in bufs.items()}
        undefined = [spans[k][:2] for k in views if k.startswith("out:") and k not in host_fill] + [
            (t.data_ptr(), t.data_ptr() + t.numel()) for k, t in bufs.items()
            if k.startswith("scratch:") and k not in refilled and _never_written(self.buffers.to_numpy(t))]
        rec["interleaved"] = []  # the rounds with programs interleaved that ran (and passed the checks)
        rec["too_many_programs"] = _over_program_cap(case, launches)
        if rec["too_many_programs"]:
            return rec
        interleaving, too_big = interleaving_plan(launches) if self.guard is not None else (False, None)
        interleaving = interleaving and case.get("order_check", True)
        if too_big:
            rec["not_interleaved"] = too_big  # a thread per program: such launches run in order, the others interleaved
        for tag in ("fresh", "interleaved", "steered", "reversed"):
            if tag != "fresh" and not interleaving or tag in ("steered", "reversed") and not self.guard.shared:
                break  # steered, reversed: only where the in-order run found atomics on addresses several programs share
            for k, b in bufs.items():
                b.copy_(initial[k])
            try:
                self.run_launches(launches, bufs, spans, None if tag == "fresh" else case["order_seed"],
                                  tag if tag in ("steered", "reversed") else None, undefined if tag == "fresh" else ())
            except DataRace as e:
                rec["race"] = str(e)
                return rec
            except Unordered as e:
                rec["unordered"] = str(e)
                return rec
            except LaneRace as e:
                rec["lane_race"] = str(e)
                return rec
            except EarlyLoad as e:
                rec["early_load"] = str(e)
                return rec
            except FalseHint as e:
                rec["false_hint"] = str(e)
                return rec
            except interleave.Deadlock as e:
                rec["deadlock"] = str(e)
                return rec
            except spin.EndlessWait as e:
                rec["endless"] = str(e)
                return rec
            except Exception as e:
                if self.guard is not None and self.guard.misaligned:
                    rec["misaligned"] = self.guard.misaligned
                elif self.guard is not None and self.guard.first:
                    rec["oob"] = self.guard.first
                else:
                    rec["error"] = _error_text(e)
                return rec
            for spec in case["outputs"]:
                self.np.save(self.root / "replay" / "out" / f"{cid}_{tag}_{spec['name']}.npy",
                             self.buffers.to_numpy(bufs[f"out:{spec['name']}"]), allow_pickle=False)
            if tag == "fresh":
                rec["unfilled_load"] = self.guard.unfilled if self.guard is not None else None
                for k, fill in host_fill.items():
                    if bool((_bits(views[k]) == fill).all()):
                        rec["unwritten"] = k.split(":", 1)[1]
                        return rec
                for k, arr in before.items():
                    now = self.buffers.to_numpy(bufs[k])
                    if not ((arr == now) | (self.np.isnan(arr) & self.np.isnan(now))).all():
                        rec["inputs_changed"].append(k.split(":", 1)[1])
                rec["late_read"] = self.late_matters(launches, bufs, spans, initial, views)
                if rec["late_read"]:
                    return rec
                if undefined and (self.guard.undefined_read if self.guard is not None else self.atomic_free()):
                    rec["undefined_read"] = self.undefined_matters(launches, bufs, spans, initial, undefined, views,
                                                                   case.get("order_seed"))
                    if rec["undefined_read"]:
                        return rec
            if tag != "fresh":
                rec["interleaved"].append(tag)
            if self.on_round:
                self.on_round(cid, tag)
            if tag == "fresh" and interleaving and not self.guard.saw_atomics:
                # no atomics: race() found no element that one program writes and another touches, so no order of
                # the programs can change what they compute; interleaving them would only repeat the run
                rec["order_free"] = True
                break
        return rec

    def atomic_free(self) -> bool:
        """Whether the learner's kernels make no atomic access (their module names none). A GPU replay cannot see
        reads; without atomics, two runs of the same launches on the same bytes give the same bits there."""
        path = self.root / "replay" / "kernels.py"
        return path.exists() and "atomic_" not in path.read_text(encoding="utf-8")

    def late_matters(self, launches, bufs, spans, initial, views) -> str | None:
        """After an in-order run where one copy of a small block (a scalar, or fewer elements than the program's
        threads) stored to an address the copies had loaded: the same launches again, with each copy's load reading
        what its program stored there afterwards, as a warp that runs late does on a GPU (the one copy that stores,
        and makes the small block's atomics, still sees what it loaded: those keep the in-order run's values). Returns
        what changed, if an output did (hostile round 15: a counter loaded, stored plus one, and the loaded value
        added to every output; round 16: the same beside an atomic). Every copy reads the same late value here; copies
        that disagree (a warp early, another late) are beyond a replay that holds one value per element."""
        if self.guard is None or not any(n["late"] for n in self.guard.copies.values()):
            return None
        outs = {k: _bits(v).clone() for k, v in views.items() if k.startswith("out:")}
        for k, b in bufs.items():
            b.copy_(initial[k])
        kept = (self.guard.shared, self.guard.saw_atomics)
        self.guard.late = {key: {"late": n["late"], "stores": list(n["stores"]), "atomics": list(n.get("atomics", ()))}
                           for key, n in self.guard.copies.items()}
        first = next((n["where"], key) for key, n in self.guard.copies.items() if n["late"])
        try:
            self.run_launches(launches, bufs, spans)
            changed = [k.split(":", 1)[1] for k, bits in outs.items() if not bool((_bits(views[k]) == bits).all())]
        except Exception as e:
            changed = [f"重放出错（{_error_text(e)[:120]}）"]
        finally:
            self.guard.late = None
            self.guard.shared, self.guard.saw_atomics = kept
        if not changed:
            return None
        return (f"program {first[1][1]} 里，一个标量（或比 program 的 {self.guard.lanes.threads} 个线程小的块）的 load 读了 "
                f"{first[0]}，之后同一个 program 又写了它，中间没有 tl.debug_barrier()。这样的块每个 warp 都有一份，"
                "都执行这次 load，只有一份执行 store：让其余各份在这次 store 之后才读（GPU 上可能如此），"
                f"{'、'.join(changed)} 就变了")

    def undefined_matters(self, launches, bufs, spans, initial, undefined, views, seed) -> str | None:
        """After an in-order run that read memory nothing had defined (an output the wrapper did not fill, a scratch
        buffer straight from ``torch.empty``) before writing it (on a GPU: after any run of atomic-free launches):
        the same launches again, with random bytes there, as a GPU's memory may hold. Returns what was read (the
        first such read, where the interpreter saw it), where an output (or the run itself) changed."""
        torch = self.torch
        first = f"{self.guard.undefined_read}；这块内存" if self.guard is not None else "没有填过的输出和 torch.empty 的临时张量"
        outs = {k: _bits(v).clone() for k, v in views.items() if k.startswith("out:")}
        rng = self.np.random.default_rng(seed)
        for k, b in bufs.items():
            b.copy_(initial[k])
            raw = torch.empty(0, dtype=torch.uint8, device=b.device).set_(b.untyped_storage())
            base = raw.data_ptr()
            for lo, hi in undefined:
                if base <= lo and hi <= base + raw.numel():
                    raw[lo - base:hi - base] = torch.from_numpy(rng.integers(0, 256, hi - lo, dtype=self.np.uint8)
                                                                ).to(raw.device)
        kept = (self.guard.shared, self.guard.saw_atomics) if self.guard is not None else None
        try:
            self.run_launches(launches, bufs, spans)
        except Exception as e:
            return f"{first}换成随机字节后，同样的 launch 重放时出错了：{_error_text(e)[:160]}"
        finally:  # what the interleaved rounds go by stays the in-order run's, not this one's
            if kept is not None:
                self.guard.shared, self.guard.saw_atomics = kept
        changed = [k.split(":", 1)[1] for k, bits in outs.items() if not bool((_bits(views[k]) == bits).all())]
        return f"{first}换成随机字节后重放，{'、'.join(changed)} 的值变了" if changed else None

    def perf_case(self, case: dict, solution_src: str) -> dict:
        """Time the replayed launches against the exercise's solution, interleaved (GPU only)."""
        torch = self.torch
        from tcourse import bench

        perf = case["perf"]
        rec = {"error": None, "compile_error": None}
        launches = self.read_log(case["id"])
        rec["too_many_programs"] = _over_program_cap(case, launches)
        if rec["too_many_programs"]:
            return rec
        dt = getattr(torch, perf["dtype"])
        g = torch.Generator(device="cuda").manual_seed(12345)
        ins = {k: torch.randn(*s, generator=g, device="cuda").to(dt) for k, s in perf["shapes"].items()}
        outs = {k: torch.full(shape, float("nan") if dt.is_floating_point else -1, device="cuda", dtype=dt)
                for k, shape in perf["outputs"].items()}
        bufs = {f"in:{k}": v for k, v in ins.items()} | {f"out:{k}": v for k, v in outs.items()}
        self.snapshots(case["id"], launches, bufs)
        values = {**ins, **perf.get("scalars", {})}
        args = [values[n] for n in perf["call"]]
        kwargs = {n: values[n] for n in perf.get("kwargs", [])}
        ns = {"__name__": "solution"}
        path = self.root / "replay" / "solution_cells.py"
        exec(compile(solution_src, str(path), "exec"), ns)
        sol_outs = {k: torch.empty_like(v) for k, v in outs.items()}

        calls = self.decoded(launches, bufs)  # decoded once: the timing holds launches only

        def student():
            for kernel, grid, a, kw in calls:
                kernel[grid](*a, **kw)

        def solution():
            ns[case["func"]](*args, **kwargs, **perf.get("tuning", {}), **sol_outs)

        student()
        solution()
        wrong = _perf_mismatch(outs, sol_outs)
        if wrong:  # the timed launches must compute the answer on the timing shape too
            rec["perf_wrong"] = wrong
            return rec
        c = bench.compare(student, solution, nbytes=perf.get("nbytes"), flops=perf.get("flops"))
        rec["perf"] = {"ours_ms": c.ours.median_ms, "target_ms": c.torch.median_ms, "unit": c.unit,
                       "ours_rate": c.rate(c.ours), "target_rate": c.rate(c.torch)}
        if not case["perf_ref"]:
            return rec
        try:
            import tcourse.kernels as tk

            ref = getattr(tk, case["perf_ref"])
            ref_names, ref_kw_names = perf_ref_call(perf)
            ref_args, ref_kwargs = [values[n] for n in ref_names], {n: values[n] for n in ref_kw_names}
            t = bench.compare(student, lambda: ref(*ref_args, **ref_kwargs), nbytes=perf.get("nbytes"), flops=perf.get("flops"))
            rec["perf"]["tuned_rate"] = t.rate(t.torch)
        except Exception as e:  # information only
            rec["perf"]["tuned_note"] = f"{type(e).__name__}: {e}"[:200]
        return rec


def perf_ref_call(perf: dict) -> tuple[list[str], list[str]]:
    """The names a perf case passes to the exercise's ``perf_ref`` kernel: (positional, by keyword)."""
    if "ref_call" in perf:
        return list(perf["ref_call"]), []
    return list(perf["call"]), list(perf.get("kwargs", []))


def _programs(launch: dict) -> int:
    return math.prod(int(g) for g in launch["grid"])


def interleaving_plan(launches: list[dict]) -> tuple[bool, int | None]:
    """(whether a case has a launch worth interleaving, its largest launch where that is too big to interleave):
    each launch is judged on its own grid, so a huge launch beside the others does not switch theirs off."""
    sizes = [_programs(e) for e in launches]
    big = max(sizes, default=0)
    return any(1 < n <= interleave.MAX_PROGRAMS for n in sizes), (big if big > interleave.MAX_PROGRAMS else None)


def _most_programs(launches: list[dict]) -> int:
    """The largest grid of the logged launches, in programs."""
    return max((_programs(e) for e in launches), default=0)


def _over_program_cap(case: dict, launches: list[dict]) -> list[int] | None:
    """[programs, cap, launches] when a persistent case (``Case.max_programs``) has a launch with more programs than
    it allows, or more than one launch (a host loop of launches is not a persistent kernel), else None."""
    cap, programs = case.get("max_programs"), _most_programs(launches)
    return [programs, cap, len(launches)] if cap and (programs > cap or len(launches) > 1) else None


PERF_TOL = {"float32": (1e-3, 1e-3), "float16": (5e-2, 5e-2), "bfloat16": (5e-2, 5e-2)}  # loose: catches work not done


def _perf_mismatch(outs: dict, expected: dict) -> str | None:
    """The first output of the timed launches that differs from the exercise's solution on the timing shape."""
    import torch

    for k, got in outs.items():
        want = expected[k]
        atol, rtol = PERF_TOL.get(str(got.dtype).removeprefix("torch."), (0.0, 0.0))
        ok = torch.isclose(got.double(), want.double(), atol=atol, rtol=rtol, equal_nan=False)
        if not bool(ok.all()):
            bad = int((~ok).sum())
            return f"{k} 有 {bad}/{ok.numel()} 个元素和参考解不同"
    return None


# what torch.empty leaves in a float tensor in the learner's run (fill_uninitialized_memory: NaN), per dtype width
NAN_BYTES = (b"\x00\x00\xc0\x7f", b"\x00\x7e", b"\xc0\x7f", b"\x00\x00\x00\x00\x00\x00\xf8\x7f")


def _never_written(raw) -> bool:
    """Whether a scratch buffer's bytes at its first launch are NaN throughout, as ``torch.empty`` left them in the
    learner's run (grader.harness). Integer buffers are not judged: a wrapper may fill them with their largest
    value on purpose (the identity of a minimum), and that is also what ``torch.empty`` leaves there."""
    import numpy as np

    return any(raw.size and raw.size % len(p) == 0 and bool((raw.reshape(-1, len(p)) == np.frombuffer(p, np.uint8)).all())
               for p in NAN_BYTES)


def _bits_by_value(v) -> int:
    """How many bits an encoded launch argument carries by value: an int 32 or 64 (more when it is wider), a float 64,
    a string 8 per character, a tuple its items; a tensor, a dtype, None nothing."""
    if not isinstance(v, dict):
        return 0
    t, x = v.get("t"), v.get("v")
    if t == "tuple" and isinstance(x, list):
        return sum(_bits_by_value(i) for i in x)
    if t == "int" and isinstance(x, int):
        return 32 if -2**31 <= x < 2**31 else 64 * -(-(x.bit_length() + 1) // 64)
    return {"float": 64, "bool": 1, "str": 8 * len(x) if isinstance(x, str) else 0}.get(t, 0)


def _bits(t):
    """A tensor's elements as integers of the same width (NaN == NaN, -0.0 != 0.0), flattened."""
    import torch

    return t.reshape(-1).view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _error_text(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:])[-1500:]


def load_kernels(path: Path) -> dict:
    spec = importlib.util.spec_from_file_location("tcourse_submission_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    names = json.loads((path.parent / "kernel_names.json").read_text(encoding="utf-8"))
    return {n: getattr(mod, n) for n in names}


def name_the_triton_install() -> str | None:
    """Key Triton's compile cache by the install instead of by its contents. Triton hashes its own files for that key,
    libtriton (about 500 MB) included: about a second of every replay. The replay's cache lives in its own folder, made
    for this submission and removed with it, so a key that names the install (version, libtriton's size and
    modification time) tells apart everything that cache can hold. An install laid out otherwise keeps Triton's key."""
    import triton
    import triton.runtime.cache as cache

    libs = sorted(Path(cache.__file__).resolve().parent.parent.glob("_C/libtriton*"))
    if not libs or not callable(getattr(cache, "triton_key", None)):
        return None
    lib = libs[0]
    st = lib.stat()
    key = f"{triton.__version__}-{lib.name}-{st.st_size}-{st.st_mtime_ns}"
    cache.triton_key = lambda: key
    return key


def main(root: str, device: str) -> int:
    rootp = Path(root)
    if device != "cuda":
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    name_the_triton_install()
    plan = json.loads((rootp / "replay" / "plan.json").read_text(encoding="utf-8"))
    if device != "cuda":
        from tcourse.runtime import prepare_interpreter

        # as the learner's notebook does in tcourse.setup(); bfloat16 and float32 as a GPU computes them too
        prepare_interpreter(grading=True, float_seed=plan["float_seed"])
    out = rootp / "replay" / "out"
    out.mkdir(exist_ok=True)
    status = open(out / "status.jsonl", "a", encoding="utf-8")

    def say(**kw):
        status.write(json.dumps(kw) + "\n")
        status.flush()

    try:
        kernels = load_kernels(rootp / "replay" / "kernels.py")
    except Exception as e:
        say(event="fatal", error=f"your kernels could not be loaded on their own: {_error_text(e)}")
        return 0
    if device == "cuda":  # device-side tensor descriptors need scratch memory from an allocator
        import torch
        import triton

        if hasattr(triton, "set_allocator"):
            triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    guard = None
    if device != "cuda":
        guard = Guard()
        guard.install()
    rp = Replayer(rootp, device, kernels, guard)
    rp.on_round = lambda cid, tag: say(event="round", id=cid, tag=tag)
    only = set(sys.argv[3].split(","))
    solution = (rootp / "replay" / "solution_cells.py").read_text(encoding="utf-8") \
        if (rootp / "replay" / "solution_cells.py").exists() else ""
    for case in plan["cases"]:
        if case["id"] not in only or case["mode"] == "python":
            continue
        say(event="start", id=case["id"])
        try:
            rec = rp.perf_case(case, solution) if case["mode"] == "perf" else rp.tensor_case(case)
        except (BadLog, rp.safeio.Untrusted) as e:
            rec = {"error": None, "bad_log": str(e)[:500]}
        except Exception as e:
            rec = {"error": _error_text(e)}
        (out / f"{case['id']}.json").write_text(json.dumps(rec), encoding="utf-8")
        say(event="end", id=case["id"])
        if device == "cuda" and not _cuda_ok():
            return 0  # a broken CUDA context poisons every later case: the grader restarts the replay after this one
    return 0


def _cuda_ok() -> bool:
    import torch

    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
