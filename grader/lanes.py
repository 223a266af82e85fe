"""A race between the threads of one program, which the interpreter cannot show by running it.

The interpreter runs each statement over all of a program's elements at once, so a program that stores a
block to global memory and then reads back elements that *other* elements stored (a scan through a scratch
buffer, a shift by one) gets the values it expects. On a GPU a program's elements are spread over threads
and warps that run in no set order between barriers: without ``tl.debug_barrier()`` between the store and
the load, a thread may read before the other thread's store lands (or, the other way round, overwrite a
value another thread has not read yet).

:class:`Lanes` follows one program at a time (the in-order replay): per address, the position (element of
the access's tensor, row-major) that last stored it and the positions that loaded it since the last
barrier. A load of an address another position stored, a store to an address another position loaded, or a
plain store to an address another position stored with a plain store (which one lands is undefined) is
reported. Reading back what the same position wrote is fine: the same thread on a GPU, as long as the two
accesses have the same shape, so a position is its shape and its index (:meth:`Lanes.position`). A scalar
access (one element) is its own shape. A scalar store is one thread's (thread 0's), a scalar load every thread's, and
so for any block of fewer elements than the program has threads (a [32] block under 4 warps: each warp holds a copy,
one copy stores): a load of an address stored since the barrier, by any position, its own included, is a race there
(the other copies may read before the store lands). A store after a scalar load of its address is not reported here:
the one thread that stores has loaded first, and what the others read there only matters if they use it. The replay
finds that out by running the launches again with the copies reading the value stored afterwards
(:meth:`grader.replay.Replayer.late_matters`, with :meth:`Lanes.loaded_by_copies`). Accesses are compared by their
first byte while they have one size; once two sizes meet (a byte of a float32 read through an int8 pointer), byte by
byte. Within one store, two positions that put different values into the same address are reported too: which one lands is undefined on a GPU. An atomic
counts as a store here (another element reading what it wrote still needs the barrier); atomics of several
elements on one address are not a race. An atomic with release semantics (a lock released, a flag raised, a
ticket taken) after other elements stored values that other programs of the launch use, with no barrier between,
is reported at the end of the launch: those stores may not have landed when another program takes the lock.
"""
from __future__ import annotations

import numpy as np


def byte_addresses(addrs: np.ndarray, size: int) -> np.ndarray:
    """Every byte of accesses of ``size`` bytes at ``addrs``, in order."""
    a = np.asarray(addrs).astype(np.int64)
    return a if size == 1 else (a[:, None] + np.arange(size, dtype=np.int64)).ravel()


class Pipelines:
    """Loops ``tl.range(..., num_stages=S)`` with S > 1, where sm_90 issues a turn's loads up to S - 1 turns early
    (``cp.async`` in the prologue and in the turns before): a load of an address that the same loop stored fewer than
    S turns before reads memory from before that store (hostile round 15: each turn read back what the last one stored,
    right in the interpreter, the old contents on a GPU). The interpreter runs the turns in order, so the replay
    follows them: :meth:`loop` wraps the turns, :meth:`store` and :meth:`load` see the running program's accesses."""

    def __init__(self):
        self.active: list[dict] = []  # the pipelined loops running now, innermost last
        self.found: str | None = None

    def loop(self, turns, stages: int, program):
        state = {"stages": stages, "turn": 0, "stored": [], "program": program}  # stored: per recent turn, addresses
        self.active.append(state)
        try:
            for state["turn"], value in enumerate(turns):
                state["stored"] = state["stored"][-(stages - 1):] + [np.empty(0, dtype=np.int64)]
                yield value
        finally:
            self.active.remove(state)

    def store(self, addrs: np.ndarray, size: int) -> None:
        for state in self.active:
            state["stored"][-1] = np.concatenate([state["stored"][-1], byte_addresses(addrs, size)])

    def load(self, addrs: np.ndarray, size: int, label) -> None:
        """Compared byte by byte (round 16: int64 stores read back as the high int32 words)."""
        spread = byte_addresses(addrs, size)
        for state in self.active:
            recent = state["stored"][:-1]  # the turns before this one whose stores an early load misses
            for back, stored in enumerate(reversed(recent), 1):
                hit = spread[np.isin(spread, stored)]
                if hit.size and self.found is None:
                    turn = state["turn"]
                    self.found = (f"program {state['program']} 里，tl.range(..., num_stages={state['stages']}) 的第 {turn} 轮"
                                  f"读取了第 {turn - back} 轮写进 {label(int(hit[0]))} 的值：GPU 上这个循环是流水的，"
                                  f"每一轮的 load 提前最多 {state['stages'] - 1} 轮发出（cp.async），那时这次写还没有发生，"
                                  "读到的是旧值。在循环里读回自己写的东西，用不流水的循环（range，或 num_stages=1），"
                                  "或者别经过内存，把值留在寄存器里传给下一轮")

    def take(self) -> str | None:
        found, self.found = self.found, None
        return found


class Lanes:
    SHAPE = 1 << 40  # a position is shape number * SHAPE + index in that shape
    threads = 128  # of the program (32 * num_warps), set by the replay for each launch

    def __init__(self):
        self.program = None
        self.found: str | None = None
        self.releases: list = []  # (program, addresses other elements stored since the barrier) at each lock release
        self.shapes: dict[tuple, int] = {}
        self._reset()

    def position(self, shape: tuple, index: np.ndarray) -> np.ndarray:
        """The positions of elements ``index`` (row-major) of an access of this shape: one thread each on a GPU only
        among accesses of the same shape (a store of a [128] block and a load of a [8, 16] one get other layouts)."""
        shape = () if int(np.prod(shape)) == 1 else tuple(shape)  # a scalar, whether its handle is () or (1,)
        code = self.shapes.setdefault(shape, len(self.shapes))
        return code * self.SHAPE + index

    def _replicated(self, pos: np.ndarray) -> np.ndarray:
        """Which positions belong to accesses of fewer elements than the program has threads: a scalar, or a [32]
        block under 4 warps. Every copy of such a block loads it, and only one copy stores."""
        small = [c for sh, c in self.shapes.items() if int(np.prod(sh)) < self.threads]
        return np.isin(pos // self.SHAPE, small)

    def _show(self, pos: int) -> str:
        shape = next((sh for sh, c in self.shapes.items() if c == pos // self.SHAPE), None)
        return f"{pos % self.SHAPE}（形状 {list(shape)} 的访问）" if len(self.shapes) > 1 else str(pos % self.SHAPE)

    def _reset(self):
        self.copy_loads: list = []  # (first addresses, size) of the loads of small blocks since the barrier
        self.unit = None  # the bytes of the accesses recorded: one size while they all have it, else 1 (bytes)
        empty = np.empty(0, dtype=np.int64)
        self.s_addr, self.s_pos = empty, empty                # sorted unique addresses, the position that stored each
        self.s_plain = np.empty(0, dtype=bool)                # whether that store was a plain one (not an atomic)
        self.l_addr, self.l_lo, self.l_hi = empty, empty, empty  # sorted unique addresses, lowest/highest loading position

    def barrier(self):
        self._reset()

    def _enter(self, program, addrs: np.ndarray, pos: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Into this program's records; ``addrs`` and ``pos`` in their unit. Accesses of one size are compared by
        their first byte; once two sizes meet (a float32 store, then a byte of it read through an int8 pointer), the
        records and every later access go byte by byte."""
        if program != self.program:
            self.program = program
            self._reset()
        if self.unit is None:
            self.unit = size
        if size != self.unit and self.unit != 1:
            def spread(a, *per):
                spread_a = byte_addresses(a, self.unit)
                order = np.argsort(spread_a, kind="stable")
                return (spread_a[order], *(np.repeat(v, self.unit)[order] for v in per))
            self.s_addr, self.s_pos, self.s_plain = spread(self.s_addr, self.s_pos, self.s_plain)
            self.l_addr, self.l_lo, self.l_hi = spread(self.l_addr, self.l_lo, self.l_hi)
            self.unit = 1
        if self.unit == 1 and size > 1:
            return byte_addresses(addrs, size), np.repeat(pos, size)
        return addrs, pos

    def load(self, program, addrs: np.ndarray, pos: np.ndarray, label, size: int = 4) -> None:
        starts, copies = addrs, self._replicated(pos)
        addrs, pos = self._enter(program, addrs, pos, size)
        if copies.any():
            self.copy_loads.append((starts[copies], size))
        if self.found is None and self.s_addr.size:
            at = np.clip(np.searchsorted(self.s_addr, addrs), 0, self.s_addr.size - 1)
            other = (self.s_addr[at] == addrs) & ((self.s_pos[at] != pos) | self._replicated(pos))
            if other.any():
                i = int(np.argmax(other))
                copies = bool(self._replicated(pos[i:i + 1])[0])
                scalar = int(pos[i]) // self.SHAPE == self.shapes.get(())
                reader = "标量 load（program 的每个线程都执行它）" if scalar else (
                    f"元素 {self._show(int(pos[i]))}（它的块比 program 的 {self.threads} 个线程小，每个 warp 都有一份，"
                    "都执行这次 load）" if copies else f"元素 {self._show(int(pos[i]))} ")
                self.found = (f"program {program} 里，{reader}读取了同一个 program 的元素 "
                              f"{self._show(int(self.s_pos[at[i]]))} 刚写进 {label(int(addrs[i]))} 的值，中间没有 tl.debug_barrier()"
                              + ("：写它的只有一份（一个线程），别的线程可能在写之前就读了" if copies else ""))
        a = np.concatenate([self.l_addr, addrs])
        lo = np.concatenate([self.l_lo, pos])
        hi = np.concatenate([self.l_hi, pos])
        order = np.argsort(a, kind="stable")
        a, lo, hi = a[order], lo[order], hi[order]
        self.l_addr, first = np.unique(a, return_index=True)
        self.l_lo, self.l_hi = np.minimum.reduceat(lo, first), np.maximum.reduceat(hi, first)

    def store(self, program, addrs: np.ndarray, pos: np.ndarray, label, plain: bool = True, size: int = 4) -> None:
        """A store (``plain``) or an atomic's write: atomics of several elements on one address are no race."""
        addrs, pos = self._enter(program, addrs, pos, size)
        if self.found is None and self.l_addr.size:
            at = np.clip(np.searchsorted(self.l_addr, addrs), 0, self.l_addr.size - 1)
            other = (self.l_addr[at] == addrs) & ((self.l_lo[at] != pos) | (self.l_hi[at] != pos))
            if other.any():
                i = int(np.argmax(other))
                reader = int(self.l_lo[at[i]]) if int(self.l_lo[at[i]]) != int(pos[i]) else int(self.l_hi[at[i]])
                self.found = (f"program {program} 里，元素 {self._show(int(pos[i]))} 改写了 {label(int(addrs[i]))}，同一个 "
                              f"program 的元素 {self._show(reader)} 在这之前读过它，中间没有 tl.debug_barrier()")
        if self.found is None and plain and self.s_addr.size:
            at = np.clip(np.searchsorted(self.s_addr, addrs), 0, self.s_addr.size - 1)
            other = (self.s_addr[at] == addrs) & (self.s_pos[at] != pos) & self.s_plain[at]
            if other.any():
                i = int(np.argmax(other))
                self.found = (f"program {program} 里，元素 {self._show(int(pos[i]))} 和同一个 program 的元素 "
                              f"{self._show(int(self.s_pos[at[i]]))} 先后写了 {label(int(addrs[i]))}，中间没有 tl.debug_barrier()："
                              "GPU 上这两个线程没有先后，留下哪个值没有定义")
        a = np.concatenate([addrs, self.s_addr])  # this store first: np.unique keeps its position
        p = np.concatenate([pos, self.s_pos])
        kinds = np.concatenate([np.full(addrs.size, plain), self.s_plain])
        self.s_addr, first = np.unique(a, return_index=True)
        self.s_pos, self.s_plain = p[first], kinds[first]

    def loaded_by_copies(self, addrs: np.ndarray) -> np.ndarray:
        """Which of ``addrs`` (first bytes) an access of fewer elements than the program's threads loaded since the
        barrier: every copy of it loads, and a copy may do so after this program's store."""
        if not self.l_addr.size:
            return np.zeros(addrs.size, dtype=bool)
        at = np.clip(np.searchsorted(self.l_addr, addrs), 0, self.l_addr.size - 1)
        return (self.l_addr[at] == addrs) & (self._replicated(self.l_lo[at]) | self._replicated(self.l_hi[at]))

    def copies_read_other_bytes(self, program, addrs: np.ndarray, size: int, label) -> None:
        """One copy stores ``size`` bytes at ``addrs`` where copies loaded some of those bytes as values of another size
        (a byte of a counter): reported as it is, since the late round replays whole values only (hostile round 16)."""
        stored = byte_addresses(addrs, size)
        for starts, loaded in self.copy_loads:
            read = byte_addresses(starts, loaded)
            hit = read[np.isin(read, stored)]
            if loaded != size and hit.size and self.found is None:
                self.found = (f"program {program} 里，一个标量（或比 program 的 {self.threads} 个线程小的块）的 load 读了 "
                              f"{label(int(hit[0]))}（{loaded} 字节），之后同一个 "
                              f"program 的一份又写了它（{size} 字节），中间没有 tl.debug_barrier()：每个 warp 都有一份，都执行"
                              "这次 load，其余各份可能在写之后才读")

    def one_store(self, program, addrs: np.ndarray, pos: np.ndarray, values: np.ndarray, label) -> None:
        """One store whose elements put different values into the same address: on a GPU its threads store in
        no set order, so which value stays is undefined (the interpreter keeps the last element's)."""
        if self.found is not None or addrs.size < 2:
            return
        bits = np.ascontiguousarray(values).view(f"u{values.dtype.itemsize}") if values.dtype.itemsize in (1, 2, 4, 8) \
            else values
        order = np.argsort(addrs, kind="stable")
        a, v = addrs[order], bits[order]
        clash = (a[1:] == a[:-1]) & (v[1:] != v[:-1])
        if clash.any():
            i = int(np.argmax(clash))
            self.found = (f"program {program} 里，同一条 tl.store 的元素 {self._show(int(pos[order[i]]))} 和元素 "
                          f"{self._show(int(pos[order[i + 1]]))} "
                          f"把不同的值写进同一个 {label(int(a[i]))}：GPU 上这些线程没有先后，留下哪个值没有定义")

    def release(self, program, pos: np.ndarray, linear: int) -> None:
        """An atomic with release semantics by the elements ``pos`` (a lock released, a flag raised): what other
        elements of the program stored since the last barrier may not have landed yet when another program sees
        it. Kept until the launch ends, when :meth:`Guard.race` knows which of those addresses other programs use."""
        if program != self.program:
            self.program = program
            self._reset()
        if not pos.size:  # masked off: it released nothing
            return
        early = self.s_addr[~np.isin(self.s_pos, pos) & self.s_plain]  # another element's atomic is no data to land
        if early.size:
            self.releases.append((program, linear, early))

    def released_early(self, used_by_others, label) -> None:
        """Report the first release whose earlier stores another program of the launch reads or writes
        (``used_by_others(linear program id, addresses)`` -> one such address or None)."""
        for program, linear, early in self.releases:
            a = used_by_others(linear, early)
            if a is not None and self.found is None:
                self.found = (f"program {program} 里，一个元素用带 release 语义的原子操作放开了锁（或置了标志），同一个 program 的其他元素"
                              f"在这之前写的 {label(a)} 之后还被别的 program 访问，中间没有 tl.debug_barrier()：放开锁时这些写"
                              "可能还没完成")
        self.releases = []

    def take(self) -> str | None:
        """The first race seen since the last call (then forgotten, with the records)."""
        found, self.found, self.program = self.found, None, None
        self.releases, self.shapes = [], {}
        self._reset()
        return found
