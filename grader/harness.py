"""Learner-side half of the grader: call the learner's function on the grader's inputs, write down what happened.

Runs inside the notebook kernel (the harness cells the grader appends after the answer cells) and,
for quick feedback, in the learner's own notebook through :mod:`grader.selfcheck`. It judges
nothing and holds no secret: it writes the outputs, the launch log (:mod:`grader.launchlog`) and a
small record per case into the working directory. The grader reads them as untrusted claims; the
verdict rests on the replay of the logged launches on inputs this process never saw.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from . import spin
from .buffers import guarded_input, guarded_output, to_numpy
from .launchlog import Log, watched

WORKDIR_ENV = "TCOURSE_GRADER_DIR"


class CudaContextLost(RuntimeError):
    """The CUDA context is broken (illegal address, device assert): the worker restarts the kernel."""


def _error_text(e: BaseException) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(tb[-3:])[-1500:]


def _cuda_ok(device: str) -> bool:
    if device != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def _as_returned(ret, outs: dict) -> list:
    """What the function returned, one entry per expected output (a tuple counts as several only when several are
    expected)."""
    return list(ret) if isinstance(ret, (tuple, list)) and len(outs) > 1 else [ret]


def _shares_input(got: list, in_bufs: dict) -> bool:
    """Whether a returned tensor lives in the storage of one of the inputs."""
    return any(isinstance(r, torch.Tensor) and r.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
               for r in got for b in in_bufs.values())


def _returned(ret, outs: dict, in_bufs: dict) -> str:
    views, got = list(outs.values()), _as_returned(ret, outs)
    if all(isinstance(r, torch.Tensor) for r in got) and len(got) == len(views) and all(
            r.data_ptr() == v.data_ptr() and r.shape == v.shape and r.stride() == v.stride() for r, v in zip(got, views)):
        return "out"
    if _shares_input(got, in_bufs):
        return "input"
    return "none" if ret is None else "other"


def _tensor_text(t) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    return f"形状 {tuple(t.shape)}、{str(t.dtype).replace('torch.', '')}、在 {t.device.type} 上的张量"


def _adopt(ret, outs: dict, in_bufs: dict, ins: dict) -> tuple[str, str]:
    """A bare call (no outputs passed): the tensors it returned become the outputs, copied into the grader's buffers.
    Returns (``out``, "") or (``input``/``wrong``, what came back against what should have). ``ins``: the input
    views (an output laid out like an input of its shape, ``torch.empty_like``, is fine; another non-contiguous
    layout is not)."""
    views, got = list(outs.values()), _as_returned(ret, outs)
    want = "、".join(_tensor_text(v) for v in views)
    if len(got) != len(views) or any(not isinstance(r, torch.Tensor) or r.shape != v.shape or r.dtype != v.dtype
                                     or r.device.type != v.device.type for r, v in zip(got, views)):
        shown = "、".join(_tensor_text(r) for r in got) if isinstance(ret, (tuple, list)) else _tensor_text(ret)
        return "wrong", f"返回的是 {shown[:200]}，应当是 {want}"
    if _shares_input(got, in_bufs):
        return "input", ""
    odd = [r for r in got if not r.is_contiguous() and not any(r.shape == x.shape and r.stride() == x.stride()
                                                                for x in ins.values())]
    if odd:  # a view of a buffer laid out otherwise (empty((N, M)).t()): the user's next .view() fails
        return "wrong", (f"返回的张量形状、dtype 都对，但不是连续的（stride {tuple(odd[0].stride())}）：自己分配的输出要像 torch 的"
                         "运算结果一样，连续（torch.empty(形状, dtype=..., device=...)）或者和同形状的输入布局相同"
                         "（torch.empty_like(输入)），不要返回另一个形状的张量的转置视图")
    for r, v in zip(got, views):
        v.copy_(r)
    return "out", ""


@contextlib.contextmanager
def _uninitialized_is_nan():
    """While the learner's function runs, ``torch.empty`` fills what it allocates (NaN, or the largest integer):
    memory the wrapper never wrote then holds the same bytes in every call, so only values it did write can
    differ between the two calls of a repeated case (:func:`_host_values_that_changed`), and a kernel that reads
    memory nobody wrote reads NaN."""
    import warnings

    was, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # warn_only: an op without a deterministic kernel still runs
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _spins(device: str, bufs: dict):
    """Interpreted (CPU): a program spinning on a value nothing will change ends the call (:mod:`grader.spin`)."""
    if device == "cuda":
        return contextlib.nullcontext()
    spans = [(b.data_ptr(), b.data_ptr() + b.numel() * b.element_size(), ("输入 " if k.startswith("in:") else "输出 ")
              + k.split(":", 1)[1]) for k, b in bufs.items()]
    return spin.watch(lambda addr: next((name for lo, hi, name in spans if lo <= addr < hi), "包装函数自己分配的张量"))


def _settle(bufs: dict, device: str) -> tuple[dict, int]:
    """Outputs as of the return, and how many elements changed a moment later (work left running on
    another stream or thread after the function returned)."""
    at_return = {k: b.clone() for k, b in bufs.items()}
    if device == "cuda":
        torch.cuda.synchronize()
    else:
        time.sleep(0.02)
    late = 0
    for k, b in bufs.items():
        a, later = to_numpy(at_return[k]), to_numpy(b)
        late += int(np.count_nonzero(~((a == later) | (np.isnan(a) & np.isnan(later)))))
    return {k: to_numpy(v) for k, v in at_return.items()}, late


def run_tensor_case(fn, case: dict, wd: Path, device: str) -> dict:
    cid = case["id"]
    ins, in_bufs = {}, {}
    for spec in case["inputs"]:
        ins[spec["name"]], in_bufs[spec["name"]] = guarded_input(spec, np.load(wd / spec["file"], allow_pickle=False), device)
    rec: dict = {"launches": 0, "launches2": None, "forbidden": None, "error": None, "returned": "none", "late": 0,
                 "other_thread": 0, "problem": None, "inputs_changed": []}
    before = {k: to_numpy(b).copy() for k, b in in_bufs.items()}
    rounds = ["", "2"] if case.get("repeat") else [""]
    first: list = []
    first_snaps: dict = {}
    for tag in rounds:
        if tag:  # the same tensors, new values: a result cached by pointer or shape is now stale
            for spec in case["inputs"]:
                arr = np.load(wd / spec["file"].replace(".npy", "_2.npy"), allow_pickle=False)
                ins[spec["name"]].copy_(torch.from_numpy(arr).to(ins[spec["name"]].dtype).to(device))
        outs, out_bufs = {}, {}
        for spec in case["outputs"]:
            outs[spec["name"]], out_bufs[spec["name"]] = guarded_output(spec, device)
        values = {**ins, **case["scalars"]}
        bufs = {**{f"in:{k}": b for k, b in in_bufs.items()}, **{f"out:{k}": b for k, b in out_bufs.items()}}
        log = Log(bufs, threading.get_ident())
        try:
            with watched(log, case["forbid"]), _uninitialized_is_nan(), _spins(device, bufs):
                ret = fn(*[values[n] for n in case["call"]], **{n: values[n] for n in case["kwargs"]},
                         **({} if case.get("bare") else outs))
            if case.get("bare"):
                rec["returned"], rec["bare_returned"] = _adopt(ret, outs, in_bufs, ins)
            after, late = _settle(out_bufs, device)
            rec["late"] += late
            if not tag and not case.get("bare"):
                rec["returned"] = _returned(ret, outs, in_bufs)
        except spin.EndlessWait as e:
            rec["endless"] = str(e)
            after = {}
        except Exception as e:  # the learner's error is a verdict, recorded as text
            rec["error"] = _error_text(e)
            after = {}
        rec["forbidden"] = rec["forbidden"] or log.forbidden
        if not _cuda_ok(device):  # before any other CUDA call: a broken context fails every one of them
            rec["cuda_lost"] = True
            _write(wd / f"{cid}.json", rec)
            raise CudaContextLost(f"CUDA context lost in case {cid}: {rec['error'] or 'error after the call'}")
        if not tag:
            for k, b in in_bufs.items():
                now = to_numpy(b)
                if not ((before[k] == now) | (np.isnan(before[k]) & np.isnan(now))).all():
                    rec["inputs_changed"].append(k)
        if tag:
            rec["launches2"] = log.launches
            rec["data_scalars"] = _host_values_that_changed(first, log.entries, first_snaps, log.snapshots)
        else:
            first, first_snaps = log.entries, log.snapshots
            rec["launches"], rec["other_thread"], rec["problem"] = log.launches, log.other_thread, log.problem
            _write(wd / f"{cid}_launches.json", {"launches": log.entries, "snapshots": sorted(log.snapshots)})
            for key, raw in log.snapshots.items():
                np.save(wd / f"{cid}_snap_{key.replace(':', '_')}.npy", raw, allow_pickle=False)
        for name, arr in after.items():
            np.save(wd / f"{cid}_out{tag}_{name}.npy", arr, allow_pickle=False)
        if rec["error"] or rec.get("endless"):
            break
    return rec


SMALL_SCRATCH = 64  # bytes: a buffer this small that the wrapper filled holds values, not data to process


def _plain(v):
    """A logged argument without what may differ between two calls on the same shapes (which scratch buffer)."""
    if isinstance(v, dict) and v.get("t") == "tensor":
        buf = str(v.get("buf", ""))
        return ("tensor", "scratch" if buf.startswith("scratch:") else buf, v.get("byte"), v.get("dtype"))
    if isinstance(v, dict):
        return tuple(sorted((k, _plain(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_plain(x) for x in v)
    return v


def _shown(v) -> str:
    if isinstance(v, dict) and v.get("t") in ("int", "float", "bool", "str"):
        return repr(v.get("v"))
    return str(_plain(v))[:80]


def _host_values_that_changed(first: list, second: list, snaps1: dict | None = None, snaps2: dict | None = None) -> str | None:
    """What changed between two calls on the same shapes with new values: the kernels launched, a launch argument
    (a scalar, a tuple) or grid, or the contents of a small buffer the wrapper filled (a maximum passed in a
    1-element tensor). The wrapper computed it from the input values on the host; the replay would reuse the
    first call's."""
    k1, k2 = [a.get("kernel") for a in first], [b.get("kernel") for b in second]
    if k2 and k1 != k2:  # nothing launched the second time: a cached result, reported as such
        return f"启动的 kernel：{', '.join(map(str, k1))[:120]} → {', '.join(map(str, k2))[:120]}"
    for i, (a, b) in enumerate(zip(first, second)):
        if a.get("grid") != b.get("grid"):
            return f"第 {i + 1} 次 launch（{a.get('kernel')}）的 grid：{a.get('grid')} → {b.get('grid')}"
        pairs = list(enumerate(zip(a.get("args", []), b.get("args", [])), 1)) + \
            [(k, (v, b.get("kwargs", {}).get(k))) for k, v in a.get("kwargs", {}).items()]
        for where, (x, y) in pairs:
            if _plain(x) != _plain(y):
                what = f"第 {where} 个参数" if isinstance(where, int) else f"参数 {where}"
                return f"第 {i + 1} 次 launch（{a.get('kernel')}）的{what}：{_shown(x)} → {_shown(y)}"
    for key, raw in (snaps1 or {}).items():
        other = (snaps2 or {}).get(key)
        if key.startswith("scratch:") and raw.size <= SMALL_SCRATCH and other is not None and \
                (other.size != raw.size or (other != raw).any()):
            return f"包装函数分配的小张量 {key.replace(':', '')}（{raw.size} 字节）在第一次 launch 时的内容"
    return None


def run_python_case(fn, case: dict) -> dict:
    rec: dict = {"launches": 0, "error": None, "values": []}
    try:
        for args in case["calls"]:
            v = fn(*args)
            rec["values"].append([int(x) if isinstance(x, (int, np.integer)) else float(x) for x in v]
                                 if isinstance(v, (tuple, list)) else
                                 (int(v) if isinstance(v, (int, np.integer)) else float(v) if isinstance(v, float) else str(v)[:200]))
    except Exception as e:
        rec["error"] = _error_text(e)
        rec["values"] = []
    return rec


def run_perf_case(fn, case: dict, wd: Path, device: str) -> dict:
    """Call the wrapper once on the timing shapes to log its launches; the replay times them."""
    perf = case["perf"]
    g = torch.Generator(device=device).manual_seed(12345)
    dt = getattr(torch, perf["dtype"])
    ins = {k: torch.randn(*shape, generator=g, device=device).to(dt) for k, shape in perf["shapes"].items()}
    rec: dict = {"launches": 0, "error": None, "problem": None}
    outs = {k: torch.empty(shape, device=device, dtype=dt) for k, shape in perf["outputs"].items()}
    bufs = {f"in:{k}": v for k, v in ins.items()} | {f"out:{k}": v for k, v in outs.items()}
    values = {**ins, **perf.get("scalars", {})}
    log = Log(bufs, threading.get_ident())
    try:
        with watched(log, []):
            fn(*[values[n] for n in perf["call"]], **{n: values[n] for n in perf.get("kwargs", [])},
               **perf.get("tuning", {}), **outs)
        torch.cuda.synchronize()
    except Exception as e:
        rec["error"] = _error_text(e)
    rec["launches"], rec["problem"] = log.launches, log.problem
    _write(wd / f"{case['id']}_launches.json", {"launches": log.entries, "snapshots": sorted(log.snapshots)})
    for key, raw in log.snapshots.items():
        np.save(wd / f"{case['id']}_snap_{key.replace(':', '_')}.npy", raw, allow_pickle=False)
    if not _cuda_ok(device):
        rec["cuda_lost"] = True
        _write(wd / f"{case['id']}.json", rec)
        raise CudaContextLost(f"CUDA context lost in case {case['id']}")
    return rec


def _write(path: Path, obj) -> None:
    path.write_text(json.dumps(obj), encoding="utf-8")


def run_case(namespace: dict, case_id: str, workdir: str | None = None) -> None:
    """Entry point of a harness cell: run one case of plan.json and write ``<id>.json``."""
    wd = Path(workdir or os.environ[WORKDIR_ENV])
    plan = json.loads((wd / "plan.json").read_text(encoding="utf-8"))
    case = next(c for c in plan["cases"] if c["id"] == case_id)
    t0 = time.perf_counter()
    fn = namespace.get(case["func"])
    if not callable(fn):
        rec = {"launches": 0, "error": f"NameError: function {case['func']!r} is not defined in the notebook"}
    elif case["mode"] == "python":
        rec = run_python_case(fn, case)
    elif case["mode"] == "perf":
        rec = run_perf_case(fn, case, wd, plan["device"])
    else:
        rec = run_tensor_case(fn, case, wd, plan["device"])
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    _write(wd / f"{case_id}.json", rec)
