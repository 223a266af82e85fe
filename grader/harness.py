"""Kernel-side half of the grader: call the student's function on the grader's inputs, dump raw results.

Runs inside the notebook kernel (the trusted cells the grader appends after the student's cells)
and, for quick feedback, inside the student's own notebook through :mod:`grader.selfcheck`.
It never judges anything: it writes the padded output buffer, the same buffer after replaying only
the call's Triton launches (:class:`LaunchLog`), the padded input buffers after the call and a small
JSON record per case (launch count, error text, forbidden torch op) into the working directory;
:mod:`grader.compare` decides in the grader's own process.

Buffers: every input and the output is a view into a larger flat buffer with ``guard`` extra
elements on each side. Input padding is NaN (an unmasked read poisons the result), output padding
is :data:`OUT_SENTINEL` and the output itself starts as NaN (an element never written stays NaN).
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib
import json
import os
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import torch

OUT_SENTINEL = {"float32": 1234.0, "float16": 1234.0, "bfloat16": 1232.0, "int32": -7}
OUT_FILL = {"int32": -1}  # everything else starts as NaN
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32}
WORKDIR_ENV = "TCOURSE_GRADER_DIR"
RETURNED = ("out", "other", "input", "none")

# Bound when this module is imported: the grader imports it in a trusted cell before any answer cell
# runs, so these are the original functions even if an answer cell later rebinds the modules' names.
_save, _json_dumps, _sha256, _hmac_new = np.save, json.dumps, hashlib.sha256, hmac.new
_clone = torch.Tensor.clone  # LaunchLog copies tensors while the exercise's poisoned torch ops are in place
_KEY: bytes | None = None


class CudaContextLost(RuntimeError):
    """The CUDA context is broken (illegal address, device assert): the worker restarts the kernel."""


def arm(key_hex: str) -> None:
    """Called by the grader's first trusted cell: the key that seals every record of this run."""
    global _KEY
    _KEY = bytes.fromhex(key_hex)


def seal(key: bytes, case_id: str, rec: dict, workdir: Path) -> str:
    """HMAC over the case id, the record (without its seal) and the bytes of every file it lists."""
    h = _hmac_new(key, case_id.encode(), "sha256")
    h.update(_json_dumps({k: v for k, v in rec.items() if k != "seal"}, sort_keys=True).encode())
    for name in rec.get("files", []):
        h.update(name.encode() + b"\0" + _sha256((workdir / name).read_bytes()).digest())
    return h.hexdigest()


def guard_size(numel: int) -> int:
    """Padding elements on each side: at least a whole row of blocks, a multiple of 64 (aligned views)."""
    return min(-(-max(4096, numel) // 64) * 64, 1 << 20)


def layout_strides(shape, layout: str) -> tuple[tuple[int, ...], int]:
    """Strides of a view with this layout and the number of storage elements it spans."""
    shape = tuple(shape)
    if layout == "contig" or len(shape) != 2:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        return tuple(reversed(strides)), max(acc, 1)
    m, n = shape
    if layout == "padded":  # rows sit 3 elements further apart than their length
        return (n + 3, 1), max((m - 1) * (n + 3) + n, 1)
    if layout == "transposed":  # x = base.t() with base contiguous of shape (n, m)
        return (1, m), max(m * n, 1)
    raise ValueError(f"unknown layout {layout!r}")


def guarded(shape, layout: str, dtype: str, device: str, pad_value, fill_value):
    """(view, flat buffer): the view sits ``guard`` elements into the buffer."""
    strides, span = layout_strides(shape, layout)
    g = guard_size(span)
    buf = torch.full((span + 2 * g,), pad_value, dtype=TORCH_DTYPES[dtype], device=device)
    view = buf.as_strided(tuple(shape), strides, g)
    view.fill_(fill_value)
    return view, buf


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bf16; widening is exact
        t = t.float()
    return t.numpy()


# --- watching the call ---------------------------------------------------------------------------

class ForbiddenOp(RuntimeError):
    """Raised when the solution calls a torch op that would compute the answer without Triton."""


def _resolve(path: str):
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for p in parts[1:-1]:
        obj = getattr(obj, p)
    return obj, parts[-1]


class LaunchLog:
    """Every Triton launch of one call, kept so that it can be replayed on its own afterwards.

    The output must be what the launches write: :meth:`replay` puts ``out`` back as it was at the
    first launch, restores each launch's other tensor arguments (scratch buffers, counters) as they
    were when it ran, and runs the same launches again, in order, with nothing else in between.
    A result finished by torch or numpy after (or between) the launches does not come back.
    """

    def __init__(self, out_buf: torch.Tensor, keep: list[torch.Tensor]):
        self.out_buf = out_buf
        self._skip = {t.untyped_storage().data_ptr() for t in [out_buf, *keep]}
        self.at_first: torch.Tensor | None = None
        self.calls: list = []

    def add(self, run, fn, args, kwargs) -> None:
        if self.at_first is None:
            self.at_first = _clone(self.out_buf)
        tensors = [t for t in (*args, *kwargs.values())
                   if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in self._skip]
        self.calls.append((run, fn, args, kwargs, [(t, _clone(t)) for t in tensors]))

    def replay(self) -> None:
        if self.at_first is None:
            return
        self.out_buf.copy_(self.at_first)
        for run, fn, args, kwargs, saved in self.calls:
            for t, before in saved:
                t.copy_(before)
            run(fn, *args, **kwargs)


SIDE_STREAM_DELAY_CYCLES = 50_000_000  # ~25 ms of GPU clock cycles


@contextlib.contextmanager
def side_streams_delayed():
    """On a GPU, hold back every Triton launch made on a stream other than the caller's by a GPU sleep
    enqueued just before it (after any compilation): work left running on another stream is then
    reliably still running when the function returns, instead of by chance (a JIT compile in the
    same call can take longer than the work itself). A function that makes the caller's stream wait
    for its side stream, as it must, only gets slower."""
    try:
        from triton import knobs
    except ImportError:  # pragma: no cover - Triton before 3.4
        yield
        return
    if not torch.cuda.is_available():
        yield
        return
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
def watched(poison: list[str], record: dict, log: LaunchLog | None = None):
    """Count Triton launches (those made from another thread too; log them in ``log``) and make the
    listed torch ops raise :class:`ForbiddenOp`.

    Launches are counted by wrapping ``run`` of JITFunction and of the interpreter's
    InterpretedFunction (``kernel[grid](...)`` ends there in both modes; launch hooks are never
    called under the interpreter).
    """
    import triton.runtime.jit as jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:
        pass
    record["launches"] = 0
    record["other_thread"] = 0
    caller = threading.get_ident()
    saved = []

    def counting(orig):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup", False):
                record["launches"] += 1
                record["other_thread"] += threading.get_ident() != caller
                if log is not None:
                    log.add(orig, self, args, kwargs)
            return orig(self, *args, **kwargs)
        return run

    def forbidden(name):
        def op(*args, **kwargs):
            record["forbidden"] = name
            raise ForbiddenOp(f"{name} is not allowed here: compute the result in your Triton kernel")
        return op

    targets = [(c, "run", counting(c.run)) for c in classes]
    for path in poison:
        try:
            owner, attr = _resolve(path)
        except (ImportError, AttributeError):
            continue
        targets.append((owner, attr, forbidden(path)))
    try:
        for owner, attr, new in targets:
            saved.append((owner, attr, attr in vars(owner), getattr(owner, attr)))
            setattr(owner, attr, new)
        with side_streams_delayed():
            yield
    finally:
        for owner, attr, had_own, old in reversed(saved):
            if had_own:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)


# --- running one case ----------------------------------------------------------------------------

def load_inputs(case: dict, workdir: Path, device: str):
    """Input views (guarded, laid out as the case says) and their flat buffers."""
    views, bufs = {}, {}
    for spec in case["inputs"]:
        arr = np.load(workdir / spec["file"], allow_pickle=False)
        values = torch.from_numpy(arr).to(TORCH_DTYPES[spec["dtype"]])
        view, buf = guarded(spec["shape"], spec["layout"], spec["dtype"], device, float("nan"), 0)
        view.copy_(values.to(device))
        views[spec["name"]], bufs[spec["name"]] = view, buf
    return views, bufs


def _shares_storage(t: torch.Tensor, bufs: dict) -> bool:
    try:
        lo = t.untyped_storage().data_ptr()
    except RuntimeError:
        return False
    return any(lo == b.untyped_storage().data_ptr() for b in bufs.values())


def _settle(out_buf: torch.Tensor, device: str) -> tuple[np.ndarray, np.ndarray]:
    """(output as of the return, output a moment later): work left running after the return shows up
    as a difference (another stream on a GPU, a thread on the CPU)."""
    at_return = out_buf.clone()  # on the current stream: ordered only after work the caller can rely on
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        time.sleep(0.02)
    return _to_numpy(at_return), _to_numpy(out_buf)


def _already_final(at_first: np.ndarray, at_return: np.ndarray) -> int:
    """Elements of the output that held their returned, non-zero value before the first launch
    (a result computed by other means and then "confirmed" by a launch that does not produce it)."""
    return int(np.count_nonzero((at_first == at_return) & np.isfinite(at_return) & (at_return != 0)))


def _cuda_ok(device: str) -> bool:
    if device != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def run_tensor_case(fn, case: dict, workdir: Path, device: str) -> dict:
    """Call the student's function once (twice when ``case["repeat"]``: the same tensors refilled with a
    second data set, so a result cached by pointer or id is stale) and dump what came out."""
    views, bufs = load_inputs(case, workdir, device)
    dt = case["dtype"]
    out, out_buf = guarded(case["out_shape"], "contig", dt, device, OUT_SENTINEL[dt], OUT_FILL.get(dt, float("nan")))
    cid = case["id"]
    rec: dict = {"launches": 0, "forbidden": None, "error": None, "returned": "none", "late": 0, "early": 0,
                 "files": []}
    rounds = [""] + (["2"] if case.get("repeat") else [])
    for tag in rounds:
        if tag:
            for spec in case["inputs"]:
                arr = np.load(workdir / spec["file"].replace(".npy", "_2.npy"), allow_pickle=False)
                views[spec["name"]].copy_(torch.from_numpy(arr).to(TORCH_DTYPES[spec["dtype"]]).to(device))
            out.fill_(OUT_FILL.get(dt, float("nan")))
        values = {**views, **case["scalars"]}
        args = [values[n] for n in case["call"]]
        kwargs = {n: values[n] for n in case["kwargs"]}
        log = LaunchLog(out_buf, list(bufs.values()))
        try:
            with watched(case["poison"], rec, log):
                ret = fn(*args, **kwargs, out=out)
            at_return, later = _settle(out_buf, device)
            if isinstance(ret, torch.Tensor):
                same = ret.data_ptr() == out.data_ptr() and ret.shape == out.shape and ret.stride() == out.stride()
                rec["returned"] = "out" if same else "input" if _shares_storage(ret, bufs) else "other"
            rec["late"] += int(np.count_nonzero(~((at_return == later) | (np.isnan(at_return) & np.isnan(later)))))
            if log.at_first is not None:
                span = slice(out.storage_offset(), out.storage_offset() + out.numel())
                rec["early"] = max(rec["early"], _already_final(_to_numpy(log.at_first)[span], at_return[span]))
            log.replay()
            replayed = _settle(out_buf, device)[1]
        except Exception as e:  # the student's error is a verdict, recorded as text
            rec["error"] = _error_text(e)
        if not _cuda_ok(device):
            rec["cuda_lost"] = True
            _write_record(cid, rec, workdir)
            raise CudaContextLost(f"CUDA context lost in case {cid}: {rec['error'] or 'error after the call'}")
        if rec["error"]:
            break
        _save(workdir / f"{cid}_out{tag}.npy", at_return, allow_pickle=False)
        _save(workdir / f"{cid}_replay{tag}.npy", replayed, allow_pickle=False)
        for name, buf in bufs.items():
            _save(workdir / f"{cid}_in{tag}_{name}.npy", _to_numpy(buf), allow_pickle=False)
        rec["files"] += [f"{cid}_out{tag}.npy", f"{cid}_replay{tag}.npy"] + [f"{cid}_in{tag}_{name}.npy" for name in bufs]
        if rec["returned"] != "out":
            break
    return rec


def run_python_map(fn, case: dict, workdir: Path) -> dict:
    rec: dict = {"launches": 0, "forbidden": None, "error": None, "returned": "none", "late": 0}
    rows = []
    try:
        for m, n, g in case["combos"]:
            for pid in range(m * n):
                pm, pn = fn(pid, m, n, g)
                rows.append((int(pm), int(pn)))
    except Exception as e:
        rec["error"] = _error_text(e)
        rows = []
    _save(workdir / f"{case['id']}_out.npy", np.array(rows, dtype=np.int64).reshape(-1, 2), allow_pickle=False)
    rec["files"] = [f"{case['id']}_out.npy"]
    return rec


def run_perf_case(fn, case: dict, workdir: Path, device: str, seed: int) -> dict:
    """Time the student's function against the course's reference kernel, interleaved in one run."""
    from tcourse import bench

    perf = case["perf"]
    rec: dict = {"launches": 0, "forbidden": None, "error": None, "returned": "none", "late": 0, "perf": None}
    g = torch.Generator(device=device).manual_seed(seed)
    dt = TORCH_DTYPES[case["dtype"]]
    ins = {k: torch.randn(*shape, generator=g, device=device, dtype=torch.float32).to(dt)
           for k, shape in perf["shapes"].items()}
    values = {**ins, **perf.get("scalars", {})}
    args = [values[n] for n in perf["call"]]
    kwargs = {n: values[n] for n in perf.get("kwargs", [])}
    note = ""
    try:
        import tcourse.kernels as kernels
        ref = getattr(kernels, perf["ref"])
        ref_name = f"tcourse.kernels.{perf['ref']}"
    except (ImportError, AttributeError) as e:
        ref, ref_name = TORCH_FALLBACK[perf["ref"]], f"torch ({perf['ref']})"
        note = f"tcourse.kernels.{perf['ref']} unavailable ({type(e).__name__}); timed against torch"
    mine = {**kwargs, **perf.get("tuning", {})}  # block sizes suited to a GPU, for the student's wrapper
    try:
        fn(*args, **mine)  # compile outside the timing
        with watched([], rec):
            fn(*args, **mine)
        torch.cuda.synchronize()
        c = bench.compare(lambda: fn(*args, **mine), lambda: ref(*args, **kwargs),
                          nbytes=perf.get("nbytes"), flops=perf.get("flops"))
        rec["perf"] = {"ours_ms": c.ours.median_ms, "ref_ms": c.torch.median_ms, "ref": ref_name, "note": note,
                       "unit": c.unit, "ours_rate": c.rate(c.ours), "ref_rate": c.rate(c.torch)}
    except Exception as e:
        rec["error"] = _error_text(e)
    if not _cuda_ok(device):
        rec["cuda_lost"] = True
        _write_record(case["id"], rec, workdir)
        raise CudaContextLost(f"CUDA context lost in case {case['id']}")
    return rec


TORCH_FALLBACK = {
    "axpy": lambda a, x, y: a * x + y,
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "matmul": lambda a, b: a @ b,
    "layernorm": lambda x, w, b, eps: torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps),
    "transpose": lambda x: x.t().contiguous(),
    "attention": lambda q, k, v, causal=False: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
}


def _error_text(e: BaseException) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    text = "".join(tb[-3:])
    return text[-1500:]


def _write_record(case_id: str, rec: dict, workdir: Path) -> None:
    rec.setdefault("files", [])
    if _KEY is not None:
        rec["seal"] = seal(_KEY, case_id, rec, workdir)
    (workdir / f"{case_id}.json").write_text(_json_dumps(rec), encoding="utf-8")


def run_case(namespace: dict, case_id: str, workdir: str | None = None) -> None:
    """Entry point of a harness cell: run one case of plan.json and write ``<id>.json`` (sealed when armed)."""
    wd = Path(workdir or os.environ[WORKDIR_ENV])
    plan = json.loads((wd / "plan.json").read_text(encoding="utf-8"))
    case = next(c for c in plan["cases"] if c["id"] == case_id)
    t0 = time.perf_counter()
    fn = namespace.get(case["func"])
    if not callable(fn):
        rec = {"launches": 0, "forbidden": None, "returned": "none", "late": 0,
               "error": f"NameError: function {case['func']!r} is not defined in the notebook"}
    elif case["mode"] == "python_map":
        rec = run_python_map(fn, case, wd)
    elif case["mode"] == "perf":
        rec = run_perf_case(fn, case, wd, plan["device"], plan["seed"])
    else:
        rec = run_tensor_case(fn, case, wd, plan["device"])
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    _write_record(case_id, rec, wd)
