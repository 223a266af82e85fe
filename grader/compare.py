"""Judge one case in the grader's process: validate what the harness wrote, compare with the reference.

Only plain data crosses from the student's kernel: ``<case>.json`` (validated field by field) and
``.npy`` arrays loaded with ``allow_pickle=False`` and checked for dtype and size before use.
Messages are Chinese and say which shape, which dtype, the largest error and where, and what
probably went wrong.
"""
from __future__ import annotations

import hmac
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .harness import OUT_SENTINEL, RETURNED, guard_size, layout_strides, seal
from .plan import NUMPY_SAVE, PlannedCase
from .registry import Exercise

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "skipped")
PERF_FULL, PERF_ZERO = 0.9, 0.5  # speed relative to the reference kernel: full points / no points


@dataclass
class TestResult:
    name: str
    status: str
    points: float
    max_points: float
    message: str

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown test status {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)


class BadRecord(ValueError):
    """What the kernel wrote is not what the harness writes: treated as an error verdict."""


def _record(path: Path, key: bytes | None = None) -> dict:
    """The harness's record, validated field by field; with ``key``, its seal must match the files."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BadRecord(f"{path.name}: {e}") from None
    if not isinstance(rec, dict):
        raise BadRecord(f"{path.name}: not an object")
    sealed = {**rec}  # the seal covers the record as written
    rec.setdefault("late", 0)  # written by every harness since the records are sealed; optional without a key
    rec.setdefault("early", 0)  # written for tensor cases only
    rec.setdefault("other_thread", 0)  # written by watched() (not for index-map cases)
    rec.setdefault("files", [])
    checks = {"launches": int, "forbidden": (str, type(None)), "error": (str, type(None)), "returned": str,
              "late": int, "early": int, "other_thread": int, "files": list}
    for field, typ in checks.items():
        if not isinstance(rec.get(field), typ) or isinstance(rec.get(field), bool):
            raise BadRecord(f"{path.name}: field {field!r} missing or of the wrong type")
    if rec["returned"] not in RETURNED:
        raise BadRecord(f"{path.name}: field 'returned' has an unknown value")
    stem = path.name[:-len(".json")]
    if not all(isinstance(f, str) and f.startswith(stem + "_") and f.endswith(".npy") and "/" not in f
               for f in rec["files"]):
        raise BadRecord(f"{path.name}: field 'files' names a file the harness does not write")
    if key is not None:
        try:
            want = seal(key, stem, sealed, path.parent)
        except OSError as e:
            raise BadRecord(f"{path.name}: {e}") from None
        if not isinstance(rec.get("seal"), str) or not hmac.compare_digest(rec["seal"], want):
            raise BadRecord(f"{path.name}: seal does not match (not written by the grader's harness cell, or files changed)")
    return rec


def _array(path: Path, dtype, size: int | None = None) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise BadRecord(f"{path.name}: {e}") from None
    if arr.dtype != np.dtype(dtype) or arr.ndim != (1 if size is not None else arr.ndim):
        raise BadRecord(f"{path.name}: dtype {arr.dtype} / ndim {arr.ndim} is not what the harness writes")
    if size is not None and arr.size != size:
        raise BadRecord(f"{path.name}: {arr.size} elements, expected {size}")
    return arr


def _idx(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def judge(ex: Exercise, pc: PlannedCase, workdir: Path, device: str, key: bytes | None = None) -> TestResult:
    """Verdict for a case whose harness cell ran (the caller handles timeouts and crashes).

    ``key``: the run's sealing key; the grader always passes it (the self-check in the learner's own
    notebook does not).
    """
    case = pc.case
    mk = lambda status, msg, pts=0.0: TestResult(case.name, status, pts, case.points, msg)  # noqa: E731
    try:
        rec = _record(workdir / f"{pc.id}.json", key)
        if rec["forbidden"]:
            return mk("failed", f"调用了 {rec['forbidden']}：这一题要求结果由你的 Triton kernel 计算，不能用 torch 算子代替。")
        if rec["error"]:
            return mk("error", _error_message(rec["error"]))
        if rec["other_thread"]:
            return mk("failed", f"有 {rec['other_thread']} 次 Triton kernel launch 来自另一个线程：结果要在调用你的函数的线程里、"
                                "函数返回之前算好，不能交给后台线程。")
        if case.needs_launch and rec["launches"] == 0:
            return mk("failed", "没有启动任何 Triton kernel（kernel[grid](...) 一次都没有调用）：这一题要求用 Triton kernel 计算结果，"
                                "用 torch 算出来的答案记 0 分。")
        if case.mode == "python_map":
            return _judge_map(ex, pc, workdir, mk)
        if case.mode == "perf":
            return _judge_perf(rec, mk)
        if rec["returned"] == "input":
            return mk("failed", "函数返回的是某个输入（或输入的视图），不是 out：结果要由 kernel 写进参数 out，最后 return out。")
        if rec["returned"] != "out":
            return mk("failed", "函数没有返回传入的 out 张量：请把结果写进参数 out（模板里已经给出分配 out 的那一行），最后 return out。")
        if rec["late"]:
            return mk("failed", f"函数返回时 out 还没有写完（返回之后又有 {rec['late']} 个元素被改写）：结果不能在另一个"
                                "线程或另一个 CUDA stream 上延后完成，函数返回前要在当前 stream 上把 out 写好。")
        numel = int(np.prod(case.out_shape))
        if rec["early"] * 2 > numel:
            return mk("failed", f"第一次启动 Triton kernel 之前，out 里已经有 {rec['early']}/{numel} 个元素是最后返回的值："
                                "结果是在 kernel 之外算好的（torch、numpy 或 Python），kernel 只是走个过场。")
        first = _judge_tensor(ex, pc, workdir, device, mk, "", pc.inputs)
        if first.status != "passed" or not pc.inputs2:
            return first
        second = _judge_tensor(ex, pc, workdir, device, mk, "2", pc.inputs2)
        if second.status != "passed":
            second.message = ("用同一批张量（同样的地址、同样的对象）换上新数据再调用一次，结果错了——是不是按指针或 id 缓存了上一次的结果？"
                              + second.message)
        return second
    except BadRecord as e:
        return mk("error", f"评分数据无效（{e}）：是否有代码改动或删除了评分用的文件？")


def _error_message(text: str) -> str:
    last = text.strip().splitlines()[-1] if text.strip() else text
    if "NotImplementedError" in last:
        return f"还没有实现：{last}"
    if "NameError" in last:
        return f"调用你的函数时出错：{last}（评分时只运行模板和答案单元：辅助代码要写在答案单元里）"
    return f"调用你的函数时出错：{last}"


def _judge_tensor(ex: Exercise, pc: PlannedCase, workdir: Path, device: str, mk, tag: str, inputs: dict) -> TestResult:
    case, dt = pc.case, pc.case.dtype
    where = f"shape {tuple(case.out_shape)}, {dt}"
    for t in case.inputs:
        strides, span = layout_strides(t.shape, t.layout)
        g = guard_size(span)
        after = _array(workdir / f"{pc.id}_in{tag}_{t.name}.npy", NUMPY_SAVE[dt], span + 2 * g).astype(np.float64)
        before = np.full(span + 2 * g, np.nan)
        np.lib.stride_tricks.as_strided(before[g:], shape=t.shape, strides=[s * 8 for s in strides])[...] = \
            inputs[t.name].numpy()
        if not np.array_equal(before, after, equal_nan=True):
            bad = int(np.count_nonzero(~((before == after) | (np.isnan(before) & np.isnan(after)))))
            return mk("failed", f"{where}：输入 {t.name} 在调用后被修改了（{bad} 个元素变了）。kernel 只能写 out。")
    numel = int(np.prod(case.out_shape))
    g = guard_size(numel)
    buf = _array(workdir / f"{pc.id}_out{tag}.npy", NUMPY_SAVE[dt], numel + 2 * g).astype(np.float64)
    sentinel = float(OUT_SENTINEL[dt])
    lo, out, hi = buf[:g], buf[g:g + numel].reshape(case.out_shape), buf[g + numel:]
    hit_lo, hit_hi = int(np.count_nonzero(lo != sentinel)), int(np.count_nonzero(hi != sentinel))
    if hit_lo or hit_hi:
        side = "之后" if hit_hi else "之前"
        return mk("failed", f"{where}：越界写 —— out {side}的保护区被写了 {hit_lo + hit_hi} 个元素。"
                            f"通常是 tl.store 少了 mask（最后一个块超出了张量）。{case.hint}")
    atol, rtol = (0.0, 0.0) if dt == "int32" else case.tol or ex.tolerance(dt, device)
    replay = _array(workdir / f"{pc.id}_replay{tag}.npy", NUMPY_SAVE[dt], numel + 2 * g).astype(np.float64)
    differ = ~((replay == buf) | (np.abs(replay - buf) <= atol + rtol * np.abs(buf)) | (np.isnan(replay) & np.isnan(buf)))
    if differ.any():
        return mk("failed", f"{where}：只重放这次调用里的 Triton kernel launch（out 先恢复成第一次 launch 之前的内容，"
                            f"中间不运行别的代码）得到的结果有 {int(differ.sum())} 个元素和函数返回的不同："
                            "out 不是（全部）由你的 Triton kernel 写出的——例如 launch 之后又用 torch/numpy 改写了 out；"
                            "或者 kernel 每次运行结果都不一样（几个 program 写同一个元素？）。")
    ref = ex.reference(inputs, {**case.scalars}).numpy()
    if dt == "int32":
        return _judge_exact_int(out, ref, where, case, mk)
    nan_out = np.isnan(out) & ~np.isnan(ref)
    if nan_out.any():
        i = _idx(int(np.argmax(nan_out.ravel())), out.shape)
        return mk("failed", f"{where}：输出有 {int(nan_out.sum())} 个 NaN（第一个在 {i}，参考值 {ref[i]:.6g}）。"
                            f"可能是这些元素没有被写（输出预先填了 NaN：grid 太小或 store 的 mask 错了），"
                            f"或者读到了输入保护区里的 NaN（tl.load 少了 mask），或者 exp 溢出后 inf/inf。{case.hint}")
    inf_out = np.isinf(out) & ~np.isinf(ref)
    if inf_out.any():
        i = _idx(int(np.argmax(inf_out.ravel())), out.shape)
        return mk("failed", f"{where}：输出在 {i} 是 {out[i]}（参考值 {ref[i]:.6g}）：数值溢出，"
                            f"数值不稳定（exp 之前没有减去最大值？）。{case.hint}")
    err = np.abs(out - ref)
    bad = err > atol + rtol * np.abs(ref)
    if bad.any():
        i = _idx(int(np.argmax(np.where(bad, err, -1).ravel())), out.shape)
        return mk("failed", f"{where}：{int(bad.sum())}/{out.size} 个元素超出容差（atol={atol:g}, rtol={rtol:g}）；"
                            f"最大误差 {err[i]:.3g} 在 {i}：得到 {out[i]:.6g}，参考 {ref[i]:.6g}。{case.hint}")
    max_err = float(err.max()) if err.size else 0.0
    return mk("passed", f"{where}：最大误差 {max_err:.2e}", case.points)


def _judge_exact_int(out, ref, where, case, mk) -> TestResult:
    if (out == -1).any():
        i = _idx(int(np.argmax((out == -1).ravel())), out.shape)
        return mk("failed", f"{where}：out[{i[0]}] 没有被写（仍是预填的 -1）：每个 program 都要写自己那一行。{case.hint}")
    wrong = np.any(out != ref, axis=1) if out.ndim == 2 else out != ref
    if wrong.any():
        p = int(np.argmax(wrong))
        return mk("failed", f"{where}：{int(wrong.sum())} 个 pid 映射错了；pid={p} 得到 {tuple(int(v) for v in out[p])}，"
                            f"应为 {tuple(int(v) for v in ref[p])}。{case.hint}")
    return mk("passed", f"{where}：全部 {len(out)} 个 pid 正确", case.points)


def _judge_map(ex: Exercise, pc: PlannedCase, workdir: Path, mk) -> TestResult:
    from .registry import swizzle_spec

    case = pc.case
    total = sum(m * n for m, n, _ in case.combos)
    got = _array(workdir / f"{pc.id}_out.npy", np.int64)
    if got.shape != (total, 2):
        raise BadRecord(f"{pc.id}_out.npy: shape {got.shape}, expected {(total, 2)}")
    row = 0
    for m, n, g in case.combos:
        want = swizzle_spec(m, n, g)
        have = [tuple(int(v) for v in r) for r in got[row:row + m * n]]
        row += m * n
        if have != want:
            pid = next(p for p in range(m * n) if have[p] != want[p])
            dup = len(set(have)) != len(have)
            extra = "；而且有 tile 被映射了两次（另一些 tile 没有 program 负责）" if dup else ""
            oob = any(not (0 <= a < m and 0 <= b < n) for a, b in have)
            extra += "；有 (pid_m, pid_n) 超出了范围" if oob else ""
            return mk("failed", f"num_pid_m={m}, num_pid_n={n}, GROUP_M={g}：pid={pid} 得到 {have[pid]}，应为 {want[pid]}"
                                f"{extra}。{case.hint}")
    return mk("passed", f"{len(case.combos)} 组 (num_pid_m, num_pid_n, GROUP_M) 全部正确", case.points)


def _judge_perf(rec: dict, mk) -> TestResult:
    p = rec.get("perf")
    ok = isinstance(p, dict) and all(isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool)
                                     and p.get(k) > 0 for k in ("ours_ms", "ref_ms"))
    if not ok:
        raise BadRecord("perf record missing or invalid")
    speed = p["ref_ms"] / p["ours_ms"]  # fraction of the reference kernel's speed
    frac = min(1.0, max(0.0, (speed - PERF_ZERO) / (PERF_FULL - PERF_ZERO)))
    msg = (f"你的 kernel {p['ours_ms'] * 1e3:.1f} us，参考 {str(p.get('ref', '?'))[:60]} {p['ref_ms'] * 1e3:.1f} us："
           f"速度是参考的 {speed:.2f} 倍。")
    if isinstance(p.get("note"), str) and p["note"]:
        msg += f"（{p['note'][:200]}）"
    result = mk("passed" if frac >= 1.0 else "failed", msg)
    result.points = round(result.max_points * frac, 2)
    return result


def skipped(pc_case, why: str) -> TestResult:
    return TestResult(pc_case.name, "skipped", 0.0, pc_case.points, why)
