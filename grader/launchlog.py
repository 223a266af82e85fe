"""Record every Triton launch of one call, as plain data the grader can replay without the learner's code.

Each launch becomes ``{"kernel", "grid", "args", "kwargs"}``. A tensor argument is named by the
buffer it points into: ``in:<name>`` / ``out:<name>`` (the grader's guarded buffers) at a byte
offset, or ``scratch:<k>`` for memory the wrapper allocated itself; the first time a scratch buffer
(or an output buffer) reaches a launch, its bytes at that moment are saved, because the replay
starts from them. Scalars, constexprs, dtypes, tuples and host tensor descriptors are kept by value.

Nothing here is trusted by the grader: the log is a claim about which launches produced the result,
and the replay (:mod:`grader.replay`) checks the claim on inputs this process never saw.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import threading

import numpy as np
import torch

from . import patching
from .buffers import dtype_name

MAX_LAUNCHES = 64
MAX_SNAPSHOT_BYTES = 256 << 20

_clone = torch.Tensor.clone  # bound at import: forbidden ops may be patched while a call runs


class ForbiddenOp(RuntimeError):
    """Raised when the learner's code calls a torch op that computes the answer without Triton."""


class Log:
    def __init__(self, bufs: dict[str, torch.Tensor], caller: int):
        self.bufs = bufs                                  # "in:x" / "out:out" -> flat guarded buffer
        self.caller = caller
        self.entries: list[dict] = []
        self.snapshots: dict[str, np.ndarray] = {}        # buffer key -> bytes at its first launch
        self._scratch: dict[int, str] = {}
        self.launches = 0
        self.other_thread = 0
        self.forbidden: str | None = None
        self.problem: str | None = None                   # why the call cannot be replayed

    def _snapshot(self, key: str, storage_tensor: torch.Tensor) -> None:
        if key in self.snapshots:
            return
        raw = storage_tensor.detach().reshape(-1).view(torch.uint8)
        used = sum(s.size for s in self.snapshots.values())
        if used + raw.numel() > MAX_SNAPSHOT_BYTES:
            self.problem = f"包装函数分配给 kernel 的张量一共超过 {MAX_SNAPSHOT_BYTES >> 20} MiB"
            return
        self.snapshots[key] = _clone(raw).cpu().numpy()

    def _tensor(self, t: torch.Tensor) -> dict:
        ptr = t.data_ptr()
        for key, buf in self.bufs.items():
            base = buf.data_ptr()
            if base <= ptr < base + buf.numel() * buf.element_size() and buf.device == t.device:
                if key.startswith("out:"):
                    self._snapshot(key, buf)
                return {"t": "tensor", "buf": key, "byte": ptr - base, "dtype": dtype_name(t.dtype)}
        st = t.untyped_storage()
        key = self._scratch.setdefault(st.data_ptr(), f"scratch:{len(self._scratch)}")
        self._snapshot(key, torch.empty(0, dtype=torch.uint8, device=t.device).set_(st))
        return {"t": "tensor", "buf": key, "byte": ptr - st.data_ptr(), "dtype": dtype_name(t.dtype),
                "nbytes": st.nbytes()}

    def encode(self, v, depth: int = 0):
        import triton.language as tl

        if depth > 4:
            return {"t": "unsupported", "type": "nested too deep"}
        if isinstance(v, torch.Tensor):
            return self._tensor(v)
        if isinstance(v, bool):
            return {"t": "bool", "v": v}
        if isinstance(v, int):
            return {"t": "int", "v": v}
        if isinstance(v, float):
            return {"t": "float", "v": v}
        if v is None:
            return {"t": "none"}
        if isinstance(v, str):
            return {"t": "str", "v": v[:200]}
        if isinstance(v, tl.constexpr):
            return self.encode(v.value, depth + 1)
        if isinstance(v, tl.dtype):
            return {"t": "tldtype", "v": str(v)}
        if isinstance(v, tuple):
            return {"t": "tuple", "v": [self.encode(x, depth + 1) for x in v]}
        try:
            from triton.tools.tensor_descriptor import TensorDescriptor
        except ImportError:  # pragma: no cover - Triton without host descriptors
            TensorDescriptor = ()
        if isinstance(v, TensorDescriptor):
            return {"t": "desc", "base": self._tensor(v.base), "shape": [int(s) for s in v.shape],
                    "strides": [int(s) for s in v.strides], "block_shape": [int(s) for s in v.block_shape],
                    "padding": str(getattr(v, "padding", "zero"))}
        return {"t": "unsupported", "type": type(v).__name__}

    def add(self, fn, args, kwargs, grid) -> None:
        self.launches += 1
        self.other_thread += threading.get_ident() != self.caller
        if len(self.entries) >= MAX_LAUNCHES:
            self.problem = f"一次调用启动了 {MAX_LAUNCHES} 次以上的 kernel"
            return
        if callable(grid):
            meta = dict(zip(getattr(fn, "arg_names", []), args))
            meta.update(kwargs)
            grid = grid(meta)
        grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
        name = getattr(getattr(fn, "fn", fn), "__name__", "?")
        self.entries.append({"kernel": name, "grid": list(grid), "args": [self.encode(a) for a in args],
                             "kwargs": {k: self.encode(v) for k, v in kwargs.items()}})


def _resolve(path: str):
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for p in parts[1:-1]:
        obj = getattr(obj, p)
    return obj, parts[-1]


SIDE_STREAM_DELAY_CYCLES = 50_000_000  # ~25 ms of GPU clock cycles


@contextlib.contextmanager
def _side_streams_delayed():
    """On a GPU, hold back every launch made on a stream other than the caller's by a GPU sleep
    enqueued just before it: work left running on another stream is then reliably still running
    when the function returns."""
    if not torch.cuda.is_available():
        yield
        return
    from triton import knobs

    entry = torch.cuda.current_stream()

    def hold_back(_metadata):
        if torch.cuda.current_stream() != entry:
            torch.cuda._sleep(SIDE_STREAM_DELAY_CYCLES)

    knobs.runtime.launch_enter_hook.add(hold_back)
    try:
        yield
    finally:
        knobs.runtime.launch_enter_hook.remove(hold_back)


@contextlib.contextmanager
def watched(log: Log, forbid: list[str]):
    """Record launches into ``log`` (``kernel[grid](...)`` ends in ``run`` of JITFunction or of the
    interpreter's InterpretedFunction) and make the ``forbid`` torch ops raise :class:`ForbiddenOp`."""
    import triton.runtime.jit as jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover
        pass

    def recording(orig):
        def run(self, *args, grid, warmup=False, **kwargs):
            if not warmup:
                try:
                    log.add(self, args, kwargs, grid)
                except Exception as e:  # a grid function that fails is the learner's error
                    log.problem = f"grid could not be evaluated: {type(e).__name__}: {e}"[:300]
            return orig(self, *args, grid=grid, warmup=warmup, **kwargs)
        return run

    def forbidden(name, original):
        def op(*args, **kwargs):
            log.forbidden = name
            raise ForbiddenOp(f"{name} is not allowed here: compute the result in your Triton kernel")
        # an attribute such as Tensor.T or Tensor.mT raises when it is read, as a method does when it is called
        return property(op) if hasattr(type(original), "__set__") else op

    targets = [(c, "run", recording(c.run)) for c in classes]
    for path in forbid:
        try:
            owner, attr = _resolve(path)
            original = inspect.getattr_static(owner, attr)
        except (ImportError, AttributeError):
            continue
        targets.append((owner, attr, forbidden(path, original)))
    with patching.patched(targets), _side_streams_delayed():
        yield
