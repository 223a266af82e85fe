"""Judge one case in the grader's process, from files it reads itself.

Two sources, trusted differently:

- what the learner's process wrote (``work/``): its record, its outputs on the inputs it was shown.
  Untrusted: read through :mod:`grader.safeio`, validated, and used for the verdict only where a
  forgery could not help (a wrong output fails; a right one proves nothing alone);
- what the replay wrote (``replay/out``): the outputs of the learner's logged Triton launches run
  alone on fresh inputs, the memory check and (with atomics) the programs interleaved. A case passes only when
  both the call and the replay give the reference's result.

Messages are Chinese and say which shape and dtype, the largest error and where, and what probably
went wrong.
"""
from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import safeio
from .buffers import OUT_SENTINEL, TORCH_DTYPES, guard_size, layout_strides, numpy_dtype
from .plan import PlannedCase
from .spec import FLOAT_DTYPES, Exercise

STATUSES = ("passed", "failed", "error", "timeout", "crashed", "skipped")
PERF_FULL, PERF_ZERO = 0.9, 0.5  # speed relative to the exercise's own solution: full points / no points
RECORD_CAP, ARRAY_CAP = 1 << 20, 1 << 31


@dataclass
class TestResult:
    name: str
    status: str
    points: float
    max_points: float
    message: str
    visibility: str = "visible"  # "hidden": drawn from the run's secret seed

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown test status {self.status!r}")

    def as_dict(self) -> dict:
        return asdict(self)


class BadRecord(ValueError):
    """What the learner's process wrote is not what the harness writes."""


def _record(path: Path, fields: dict) -> dict:
    try:
        rec = safeio.load_json(path, RECORD_CAP, depth=8)
    except safeio.Untrusted as e:
        raise BadRecord(str(e)) from None
    if not isinstance(rec, dict):
        raise BadRecord(f"{path.name}: not an object")
    for name, typ in fields.items():
        v = rec.get(name)
        if not isinstance(v, typ) or isinstance(v, bool):
            raise BadRecord(f"{path.name}: field {name!r} missing or of the wrong type")
    return rec


def _flat(path: Path, dtype: str, n: int) -> np.ndarray:
    try:
        return safeio.load_npy(path, ARRAY_CAP, dtype=numpy_dtype(dtype), shape=(n,)).astype(_carried(dtype))
    except safeio.Untrusted as e:
        raise BadRecord(str(e)) from None


def _carried(dtype: str):
    """How values of ``dtype`` are compared: float64, integers as int64 (exact past 2^53)."""
    return np.float64 if dtype in FLOAT_DTYPES else np.int64


def _as_carried(t, dtype: str) -> np.ndarray:
    return (t.double() if dtype in FLOAT_DTYPES else t.long()).numpy()


def _idx(flat: int, shape) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _error_message(text: str, keywords=()) -> str:
    """The learner's call failed: its last line, and what to do for the failures learners meet most. ``keywords``:
    the names the case passed by keyword."""
    last = text.strip().splitlines()[-1] if text.strip() else text
    if "NotImplementedError" in last:
        return f"还没有实现：{last}"
    if "active drivers" in last:
        return (f"调用你的函数时出错：{last}（在 CPU 上评分时没有 GPU 可以计时：@triton.autotune 只能给一个 Config；"
                "在自己的 GPU 上调好，答案里留下选中的那一个）")
    if "NameError" in last:
        return f"调用你的函数时出错：{last}（评分时只运行模板和答案单元：辅助代码要写在答案单元里）"
    if "mask has unsupported dtype" in last:  # Triton's interpreter: a block comparison & a Python bool is not int1
        return (f"调用你的函数时出错：{last}（CPU 解释器里，块的比较和一个 Python bool 做 &（例如 (rm < M) & (k < K)，"
                "k 是 range 的循环变量）得到的不是布尔类型，tl.load/tl.store 的 mask 不接受；GPU 上编译时没有这个问题。"
                "只和循环变量有关的条件写成 if k < K:，或者让它也是一个块：(rm < M) & (rm * 0 + k < K)）")
    keyword = re.search(r"unexpected keyword argument '(\w+)'", last)
    if keyword and keyword[1] in keywords:  # a notebook started from an older template, or a renamed parameter
        return (f"调用你的函数时出错：{last}（这个测试按关键字传入 {keyword[1]}，你的函数没有这个参数：对照练习开头"
                f"“要做的事”里的签名，把 {keyword[1]} 加进参数表，用上它的值。练习模板更新过时，旧笔记本会缺这样的参数）")
    return f"调用你的函数时出错：{last}"


def _endless_message(where: str, text: str) -> str:
    """A spin that could not end (:class:`grader.spin.EndlessWait`), found in the learner's run or in the replay."""
    return f"{where}：等待不会结束 —— {str(text)[:700]}。"


# A reference that runs a Triton kernel in the grader's process (ex09's RNG): Triton's interpreter patches
# triton.language for the length of each launch and puts it back after, so two threads grading at once
# (grade --workers N) undid each other's patches ("_semantic argument must be provided").
TRITON_REFERENCE = threading.Lock()


def reference(ex: Exercise, pc: PlannedCase, inputs: dict, device: str = "cpu"):
    """The reference outputs (numpy arrays, one per output: float64, int64 for an integer output) for this case's
    inputs."""
    case = pc.case
    import torch

    values = {**{k: v.contiguous() for k, v in inputs.items()}, **case.scalars}
    fn = case.reference or ex.reference
    if ex.reference_on_device and device == "cuda":  # a spec that calls a Triton kernel (the RNG of ex09)
        values = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in values.items()}
    with TRITON_REFERENCE if ex.reference_on_device else contextlib.nullcontext():
        ref = fn(*[values[n] for n in case.call], **{n: values[n] for n in case.kwargs if _takes(fn, n)})
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    return [_as_carried(torch.as_tensor(r).detach().cpu().reshape(o.shape), o.dtype_in(case)) for r, o in zip(refs, case.outputs)]


def _takes(fn, name: str) -> bool:
    """Whether ``fn`` takes the keyword ``name``: a case's launch configuration (``BLOCK_M``, ``G``...) changes nothing
    in the result, and the spec, which has no such parameter, is called without it."""
    import inspect

    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def _split(buf: np.ndarray, spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(both guards, the gaps inside the view's span that hold no element of it, the view's values) of a flat
    guarded output buffer."""
    strides, span = layout_strides(spec.shape, spec.layout)
    g = guard_size(span)
    guards = np.concatenate([buf[:g], buf[g + span:]])
    body = buf[g:g + span]
    if not spec.shape:
        return guards, body[1:], body[:1].reshape(())
    view = np.lib.stride_tricks.as_strided(body, shape=spec.shape, strides=[s * body.itemsize for s in strides])
    covered = np.zeros(span, dtype=bool)
    np.lib.stride_tricks.as_strided(covered, shape=spec.shape, strides=strides)[...] = True
    return guards, body[~covered], np.array(view)


def check_output(buf: np.ndarray, ref: np.ndarray, spec, dtype: str, tol, where: str, hint: str) -> str | None:
    """None when the flat output buffer holds the reference (within ``tol``), and its guards and the gaps between
    its elements are intact."""
    guards, gaps, out = _split(buf, spec)
    sentinel = float(OUT_SENTINEL[dtype])
    hit = int(np.count_nonzero(guards != sentinel))
    if hit:
        return (f"{where}：越界写 —— {spec.name} 前后的保护区被写了 {hit} 个元素。通常是 tl.store 少了 mask"
                f"（最后一个块超出了张量），或者 mask 放过了越界的元素（例如 offs <= n，应为 offs < n）。{hint}")
    hit = int(np.count_nonzero(gaps != sentinel))
    if hit:
        return (f"{where}：越界写 —— {spec.name} 不是连续的（stride {layout_strides(spec.shape, spec.layout)[0]}），"
                f"它的元素之间的空隙（例如一行末尾到下一行开头之间，不属于 {spec.name} 的内存）被写了 {hit} 个元素。"
                f"写 {spec.name} 要按它的 stride 逐个元素定位，不能把它覆盖的那段内存当成连续的一整块来写。{hint}")
    if dtype not in FLOAT_DTYPES:
        wrong = out != ref
        if wrong.any():
            i = _idx(int(np.argmax(wrong.ravel())), out.shape)
            unwritten = "（仍是预填的值：没有被写）" if out[i] == -1 else ""
            return (f"{where}：{spec.name} 有 {int(wrong.sum())}/{out.size} 个元素不对；第一个在 {i}：得到 {int(out[i])}"
                    f"{unwritten}，应为 {int(ref[i])}。{hint}")
        return None
    atol, rtol = tol
    nan_lost = np.isnan(ref) & ~np.isnan(out)
    if nan_lost.any():
        i = _idx(int(np.argmax(nan_lost.ravel())), out.shape)
        return (f"{where}：{spec.name} 在 {i} 应为 NaN（参考结果在这里是 NaN），得到 {out[i]:.6g}："
                f"{int(nan_lost.sum())} 个这样的元素。{hint}")
    nan_out = np.isnan(out) & ~np.isnan(ref)
    if nan_out.any():
        i = _idx(int(np.argmax(nan_out.ravel())), out.shape)
        return (f"{where}：{spec.name} 有 {int(nan_out.sum())} 个 NaN（第一个在 {i}，参考值 {ref[i]:.6g}）。"
                f"可能是这些元素没有被写（输出预先填了 NaN：grid 太小或 store 的 mask 错了），"
                f"或者读到了输入保护区里的 NaN（tl.load 少了 mask），或者 exp 溢出后 inf/inf。{hint}")
    inf_out = np.isinf(out) & ~np.isinf(ref)
    if inf_out.any():
        i = _idx(int(np.argmax(inf_out.ravel())), out.shape)
        return f"{where}：{spec.name} 在 {i} 是 {out[i]}（参考值 {ref[i]:.6g}）：数值溢出（exp 之前没有减去最大值？）。{hint}"
    if atol == rtol == 0.0:  # bit for bit: -0.0 is not 0.0
        sign = (out == 0) & (ref == 0) & (np.signbit(out) != np.signbit(ref))
        if sign.any():
            i = _idx(int(np.argmax(sign.ravel())), out.shape)
            return (f"{where}：{spec.name} 要逐位相等，{int(sign.sum())} 个零的符号不对；第一个在 {i}：得到 {float(out[i])!r}，"
                    f"应为 {float(ref[i])!r}。搬数据不要经过算术（x + 0、x * 1 会把 -0.0 变成 +0.0）：load 什么就 store 什么。{hint}")
    err = np.abs(out - ref)
    bad = err > atol + rtol * np.abs(ref)
    if bad.any():
        i = _idx(int(np.argmax(np.where(bad, err, -1).ravel())), out.shape)
        return (f"{where}：{spec.name} 有 {int(bad.sum())}/{out.size} 个元素超出容差（atol={atol:g}, rtol={rtol:g}）；"
                f"最大误差 {err[i]:.3g} 在 {i}：得到 {out[i]:.6g}，参考 {ref[i]:.6g}。{hint}")
    return None


def judge(ex: Exercise, pc: PlannedCase, workdir: Path, replay_out: Path, device: str,
          others: list[PlannedCase] = ()) -> TestResult:
    """Verdict for a case whose harness cell ran (the caller handles timeouts and crashes).

    ``replay_out``: the replay's folder (:mod:`grader.replay` wrote it). ``others``: the cases whose calls
    have run (those of the same function tell a call that launched nothing because it returned a kept result)."""
    case = pc.case
    vis = "hidden" if case.hidden else "visible"
    mk = lambda status, msg, pts=0.0: TestResult(case.name, status, pts, case.points, msg, vis)  # noqa: E731
    try:
        if case.mode == "python":
            return _judge_python(ex, pc, workdir, mk)
        if case.mode == "perf":
            return _judge_perf(pc, workdir, replay_out, mk)
        return _judge_tensor(ex, pc, workdir, replay_out, device, mk, others)
    except BadRecord as e:
        return mk("error", f"评分数据无效（{e}）：是否有代码改动或删除了评分用的文件？")
    except Exception as e:  # a fault of the grader's own reference: this case only, said plainly
        return mk("error", f"评分器计算参考结果时出错（不是你的错，请告诉老师）：{type(e).__name__}: {str(e)[:200]}")


def _launched_elsewhere(workdir: Path, pc: PlannedCase, others) -> bool:
    """Whether the record of another case of ``pc``'s function says its call launched a Triton kernel."""
    for o in others:
        if o is pc or o.case.func != pc.case.func or o.case.mode == "python":
            continue
        try:
            if _record(workdir / f"{o.id}.json", {"launches": int})["launches"] > 0:
                return True
        except BadRecord:  # missing or malformed: that case's own verdict says so
            continue
    return False


def _data_scalar(workdir: Path, pc: PlannedCase, others) -> str | None:
    """What a call of ``pc``'s function (this one or another) passed to a kernel that changed with the input
    values alone (the harness calls a few cases twice: same shapes, new values)."""
    for o in [pc, *others]:
        if o.case.func != pc.case.func or o.case.mode != "tensor":
            continue
        try:
            stale = _record(workdir / f"{o.id}.json", {"launches": int}).get("data_scalars")
        except BadRecord:
            continue
        if stale:
            return str(stale)
    return None


def _judge_tensor(ex, pc, workdir, replay_out, device, mk, others=()) -> TestResult:
    case = pc.case
    rec = _record(workdir / f"{pc.id}.json", {"launches": int})
    where = ", ".join(f"{o.name} {tuple(o.shape)}" for o in case.outputs) + f", {case.dtype}"
    if rec.get("forbidden"):
        return mk("failed", f"调用了 {str(rec['forbidden'])[:80]}：这一题要求结果由你的 Triton kernel 计算，不能用 torch 算子代替。")
    if rec.get("endless"):
        return mk("failed", _endless_message(where, rec["endless"]))
    if rec.get("error"):
        return mk("error", _error_message(str(rec["error"]), case.kwargs))
    if rec.get("other_thread"):
        return mk("failed", f"有 {rec['other_thread']} 次 Triton kernel launch 来自另一个线程：结果要在调用你的函数的线程里、"
                            "函数返回之前算好，不能交给后台线程。")
    if rec.get("launches2") == 0 and rec["launches"] > 0:
        return mk("failed", "用同一批张量换上新数据再调用一次，你的函数没有启动任何 kernel，返回的是上一次缓存的结果："
                            "每次调用都要重新计算（不要按指针、id 或形状缓存结果）。")
    if rec["launches"] == 0 and _launched_elsewhere(workdir, pc, others):  # a shape (or pointer) it had seen in another call
        return mk("failed", "这次调用没有启动任何 kernel，可同一个函数在别的测试里启动过：它返回的是以前算好、缓存起来的结果"
                            "（按形状、指针或 id 缓存？）。每次调用都要重新计算。")
    if rec["launches"] == 0:
        return mk("failed", "没有启动任何 Triton kernel（kernel[grid](...) 一次都没有调用）：这一题要求用 Triton kernel 计算结果，"
                            "用 torch 或 Python 算出来的答案记 0 分。")
    if rec.get("problem"):
        return mk("failed", f"这次调用无法重放：{str(rec['problem'])[:300]}。")
    if rec.get("returned") == "input":
        return mk("failed", "函数返回的是某个输入（或输入的视图），不是 out：结果要由 kernel 写进参数 out，最后 return out。")
    if rec.get("returned") == "wrong":
        return mk("failed", f"只传必需的参数、不传 out 调用时，{str(rec.get('bare_returned'))[:300]}：函数要自己分配输出"
                            "（形状、dtype、device 按输入算）并返回它。")
    if rec.get("returned") != "out":
        return mk("failed", "函数没有返回传入的输出张量：请把结果写进参数 out（模板里已经给出分配 out 的那一行），最后 return out。")
    if rec.get("inputs_changed"):
        return mk("failed", f"{where}：输入 {', '.join(map(str, rec['inputs_changed']))[:80]} 在调用后被修改了："
                            "包装函数和 kernel 都只能写输出。")
    if rec.get("late"):
        return mk("failed", f"函数返回时输出还没有写完（返回之后又有 {rec['late']} 个元素被改写）：结果不能在另一个"
                            "线程或另一个 CUDA stream 上延后完成，函数返回前要在当前 stream 上写好。")
    tol = lambda dt: case.tol or ex.tolerance(dt)  # noqa: E731
    refs = reference(ex, pc, pc.shown, device)
    for spec, ref in zip(case.outputs, refs):
        dt = spec.dtype_in(case)
        n = _flat_len(spec)
        msg = check_output(_flat(workdir / f"{pc.id}_out_{spec.name}.npy", dt, n), ref, spec, dt, tol(dt), where, case.hint)
        if msg:
            return mk("failed", msg)
    if pc.again:
        refs2 = reference(ex, pc, pc.again, device)
        for spec, ref in zip(case.outputs, refs2):
            dt = spec.dtype_in(case)
            msg = check_output(_flat(workdir / f"{pc.id}_out2_{spec.name}.npy", dt, _flat_len(spec)), ref, spec, dt,
                               tol(dt), where, case.hint)
            if msg:
                return mk("failed", "用同一批张量（同样的地址、同样的对象）换上新数据再调用一次，结果错了——是不是缓存了上一次的结果？"
                          + msg)
    stale = _data_scalar(workdir, pc, others)
    if stale and stale.startswith("包装函数分配的小张量"):  # a buffer's contents: computed on the host, or kept from the last call
        return mk("failed", f"用同一批张量换上新数据再调用一次，交给 kernel 的值变了（{stale[:240]}）。要么是包装函数在 host 上"
                            "按输入的值往里写了东西（最大值、和……：这要在 kernel 里算），要么是一个跨调用复用的缓冲区，里面还是上一次"
                            "调用留下的值。评分器重放时只有第一次调用时它的内容：每次调用都用 torch.empty/torch.zeros 新分配它，"
                            "让 kernel 先写后读。整份作业的每个测试都按这一条判定。")
    if stale:  # after the checks of this call's own outputs: a cached result is reported as such first
        return mk("failed", f"用同一批张量换上新数据再调用一次，交给 kernel 的值变了（{stale[:240]}）：它是包装函数在 host 上"
                            "从输入的值算出来的（或者按输入的值选了别的 kernel）。评分器重放 kernel 时只有第一次调用的值和"
                            "第一次启动的那些 kernel，所以凡是取决于输入数据的量（最大值、均值、和……）和取决于数据的选择都要在 "
                            "kernel 里做。整份作业的每个测试都按这一条判定。")
    if case.bare:  # the function's own kernels are judged by the replays of the other cases
        return mk("passed", f"{where}：正确（自己分配并返回了输出，可选参数用的是默认值）", case.points)
    return _judge_replay(ex, pc, workdir, replay_out, device, mk, where, tol)


def _flat_len(spec) -> int:
    _, span = layout_strides(spec.shape, spec.layout)
    return span + 2 * guard_size(span)


def _judge_replay(ex, pc, workdir: Path, replay_out: Path, device, mk, where, tol) -> TestResult:
    case = pc.case
    path = replay_out / f"{pc.id}.json"
    if not path.exists():
        return mk("error", "评分器重放你的 kernel 时没有得到结果（重放进程异常退出）。")
    rec = _record(path, {})
    if rec.get("bad_log"):
        return mk("failed", f"评分器无法重放这次调用：{str(rec['bad_log'])[:300]}")
    if rec.get("launch_error"):  # it compiles but sm_90 cannot launch it (replay.launch_limits)
        return mk("failed", f"{str(rec['launch_error'])[:700]}。")
    if rec.get("compile_error"):
        err = str(rec["compile_error"])[:700]
        return mk("failed", f"{err}。@triton.jit 函数里只能写 Triton 代码"
                            "（tl.*、算术、range 循环、constexpr 分支），解释器能跑的任意 Python 不算 Triton。")
    if rec.get("too_many_programs"):
        return mk("failed", f"{where}：{_too_many_programs(rec['too_many_programs'], case)}")
    if rec.get("misaligned"):
        return mk("failed", f"{where}：未对齐的访问 —— {str(rec['misaligned'])[:300]}：GPU 上 kernel 直接出错（misaligned "
                            "address）。把指针转成更宽的类型（tl.pointer_type(tl.int64)）一次读两个元素，地址就要是新宽度的倍数；"
                            "按元素自己的类型读。")
    if rec.get("oob"):
        return mk("failed", f"{where}：越界访问 —— {str(rec['oob'])[:300]}。越界的元素要由 mask 关掉：即使这个值后来在 store 时"
                            "被 mask 掉，load 也必须带 mask（mask=offs < n）；带了 mask 还越界，就是条件放过了越界的元素"
                            "（例如 offs <= n），或者地址算错了（从传进来的指针出发，按下标和 stride 算；host 上用 data_ptr() "
                            f"算好的地址，换了输入就不对了）。{case.hint}")
    if rec.get("host_tuple"):
        return mk("failed", f"{where}：这次调用的 kernel 参数和 grid 按值一共带着约 {rec['host_tuple']} 位（bit）的数"
                            "（几个标量只有几百位；这里是元组、长字符串、拼进整数里的位或很多次 launch）：这是包装函数在 host 上算好、"
                            "按值交给 kernel 的一张表。这一题要求 kernel 自己算出结果，不能照抄 host 上的表；"
                            "kernel 的参数只用题目给的标量和输出，一次 launch 就够。")
    if rec.get("host_values"):
        return mk("failed", f"{where}：第一次 launch 之前，包装函数已经在输出 {str(rec['host_values'])[:40]} 里写了各不相同的值"
                            "（不是 zero_() 或 fill_() 那样全部填成同一个值）：结果（至少一部分）是在 host 上算的。"
                            "评分器重放时不会替你保留这些值，结果要由 kernel 算出来写进输出。")
    if rec.get("unwritten"):
        return mk("failed", f"{where}：kernel 没有改动输出 {str(rec['unwritten'])[:40]}：它还是包装函数在第一次 launch 之前"
                            "填进去的那个值。结果要由 kernel 算出来写进输出。")
    if rec.get("undefined_read"):
        return mk("failed", f"{where}：kernel 读了还没有定义的内存 —— {str(rec['undefined_read'])[:300]}。包装函数没有填过的输出、"
                            "torch.empty 分配的临时张量，在 kernel 写它们之前内容没有定义：GPU 上可能是上一次留下的任何值"
                            "（评分器平时填 NaN，这次重放换成了随机字节）。先写后读；需要初始值（累加用 0、求最大值用 -inf）"
                            "就在 kernel 里用 tl.zeros/tl.full 从寄存器开始，或者在包装函数里 out.zero_()/fill_()、torch.zeros(...)。")
    if rec.get("race"):
        return mk("failed", f"{where}：数据竞争 —— {str(rec['race'])[:300]}。在 GPU 上一次 launch 的 program 同时运行、没有先后顺序："
                            "每个元素只能由一个 program 写；要合并多个 program 的结果，用 tl.atomic_add 等原子操作，或者分两次 launch。"
                            f"{case.hint}")
    if rec.get("unordered"):
        return mk("failed", f"{where}：内存顺序 —— {str(rec['unordered'])[:400]}。GPU 上一个 program 的写什么时候、按什么顺序"
                            "被另一个 program 看到，只有 release/acquire 能保证：写数据的 program 写完之后用带 release 语义的原子操作"
                            "置标志或放开锁（sem='release'，或 tl.atomic_* 默认的 'acq_rel'），读的 program 用带 acquire 语义的原子操作"
                            "读到这个标志之后才读数据（tl.atomic_load 默认 'acquire'，其他 tl.atomic_* 默认 'acq_rel'）。解释器里"
                            f"写总是马上可见，所以在 CPU 上结果是对的。{case.hint}")
    if rec.get("false_hint"):
        return mk("failed", f"{where}：{rec['false_hint'][:300]}。tl.multiple_of、tl.max_contiguous、tl.max_constancy "
                            "是对编译器的保证：GPU 上编译器据此用更宽的向量访存，值不满足时"
                            "读写的就不是你要的元素（解释器忽略这些提示，所以在 CPU 上结果是对的）。只对一定满足的值写它（例如"
                            f" stride 只有在每个测试形状里都确实是 16 的倍数时），否则去掉。{case.hint}")
    if rec.get("lane_race") and "同一条 tl.store" in rec["lane_race"]:
        return mk("failed", f"{where}：一个 program 内部的数据竞争 —— {str(rec['lane_race'])[:300]}。解释器里最后一个元素的值"
                            "留下来，所以在 CPU 上结果可能是对的。每个地址只能由一条 store 的一个元素写：多余的元素用 mask 关掉"
                            f"（越界的元素不要 clamp 到最后一个地址），或者先在寄存器里合并（tl.sum、tl.max 等）再写。{case.hint}")
    if rec.get("lane_race"):
        return mk("failed", f"{where}：一个 program 内部的数据竞争 —— {str(rec['lane_race'])[:300]}。解释器一次对整个块执行一条语句，"
                            "所以在 CPU 上结果是对的；GPU 上一个 program 的元素分在不同的线程和 warp 上，两次 tl.debug_barrier() "
                            "之间它们没有先后：通过全局内存把值传给同一个 program 的另一个元素，写和读之间（读完再改写之前也一样）"
                            f"要有 tl.debug_barrier()，或者干脆不经过内存（tl.cumsum、tl.sum 等在寄存器里完成）。{case.hint}")
    if rec.get("late_read"):
        return mk("failed", f"{where}：一个 program 内部的数据竞争 —— {str(rec['late_read'])[:500]}。读完再改写同一个地址，"
                            f"中间要有 tl.debug_barrier()；或者别经过内存，把值留在寄存器里。{case.hint}")
    if rec.get("early_load"):
        return mk("failed", f"{where}：{str(rec['early_load'])[:500]}。{case.hint}")
    if rec.get("deadlock"):
        return mk("failed", f"{where}：按 program 编号依次运行时跑完了，让 program 像在 GPU 上那样交错运行时，"
                            f"{str(rec['deadlock'])[:300]}。等待别的 program 的标志或锁，只有在被等的 program 一定会"
                            "写它的时候才行：检查等待的条件（等的是哪个下标、哪个值），和写标志的那一步是不是一定会执行。"
                            f"{case.hint}")
    if rec.get("endless"):
        return mk("failed", _endless_message(where, rec["endless"]))
    if rec.get("error"):
        return mk("error", f"评分器在新输入上重放你的 kernel 时出错：{str(rec['error']).strip().splitlines()[-1][:300]}")
    if rec.get("inputs_changed"):
        return mk("failed", f"{where}：kernel 改写了输入 {', '.join(map(str, rec['inputs_changed']))[:80]}：kernel 只能写输出。")
    refs = reference(ex, pc, pc.fresh, device)
    for tag in ("fresh", *(rec.get("interleaved") or ())):
        for spec, ref in zip(case.outputs, refs):
            dt = spec.dtype_in(case)
            msg = check_output(_flat(replay_out / f"{pc.id}_{tag}_{spec.name}.npy", dt, _flat_len(spec)), ref, spec, dt,
                               tol(dt), where, case.hint)
            if msg and tag == "fresh" and rec.get("unfilled_load"):
                return mk("failed", f"kernel 读 {rec['unfilled_load']} 的一次 tl.load 带了 mask 却没有 other=。被 mask "
                                    "关掉的元素在 GPU 上读到的值没有定义（解释器给 0）；评分器重放时把它们填成 NaN（整数填最大值），"
                                    "结果就变了，说明这些值被用到了（求和、点积、最大值……）。给这次 tl.load 加上 other=，"
                                    f"取一个不影响结果的值（求和用 0.0，求最大值用 -inf）。细节：{msg}")
            if msg and tag == "fresh" and rec.get("host_tables"):
                return mk("failed", f"包装函数在 host 上往自己分配的张量里写了各不相同的值（一张表），再交给 kernel 读。"
                                    "这一题要求 kernel 自己算出结果：评分器重放时不保留这类张量的内容（当作未初始化），"
                                    f"kernel 读到的就不是那张表了。细节：{msg}")
            copies = _copied_inputs(workdir, pc) if msg and tag == "fresh" else []
            if copies:
                return mk("failed", f"包装函数先把输入 {'、'.join(copies)} 拷贝成一个新张量（{copies[0]}.contiguous()、{copies[0]}.clone()、"
                                    f"{copies[0]}.to(...)、torch.empty 再 copy_ 之类），kernel 读的是这份拷贝。拷贝是 torch 做的、不在 kernel 里：评分器"
                                    "重放时只运行 kernel launch，这份拷贝还是旧输入的值，所以在新输入上结果不对。让 kernel 直接读"
                                    "原来的输入：把它的 stride 传给 kernel，按 stride 算地址；要换类型就在 kernel 里 .to(...)。"
                                    f"细节：{msg}")
            if msg and tag == "fresh":
                return mk("failed", "评分器只重放了你这次调用里的 Triton kernel launch（不运行包装函数里的其他代码），"
                                    "换上同样形状的新输入，结果不对：答案（至少一部分）是在 kernel 之外算的，"
                                    "例如用 torch/numpy 在 host 上算好再让 kernel 复制，或者 kernel 依赖 host 预先算好的数据。"
                                    f"细节：{msg}")
            if msg:
                how = {"interleaved": "按随机顺序开始，每次访存之后都可能换另一个 program 先跑",
                       "steered": "一个 program 读了别的 program 也访问的元素之后，先让另一个 program 访问它、再走到下一次共享访问，才轮到它",
                       "reversed": "program 读写别的 program 也访问的元素之前先停下，让编号大的 program 先访问："
                                   "共享元素上的先后和按编号依次运行时相反"}[tag]
                return mk("failed", f"让 grid 里的 program 像在 GPU 上那样交错运行（{how}），结果就变了："
                                    "你的结果依赖 program 的执行顺序。GPU 上的 program 同时运行、没有先后，"
                                    "不能依赖别的 program 已经写好或还没写某个值；两次原子操作之间也可能插进别的 program"
                                    "（读改写要用一次 tl.atomic_add 这样的原子操作完成）。要合并不同 program 的结果，用一次原子操作，"
                                    f"或者分两次 launch。细节：{msg}")
    big = rec.get("not_interleaved")
    tail = ("，program 交错运行也通过" + (f"（{big} 个 program 的 launch 太大，按顺序运行）" if big else "")) if rec.get("interleaved") else \
        "；没有原子操作，各 program 不读写彼此写的元素，谁先谁后结果都一样" if rec.get("order_free") else \
        f"；grid 有 {big} 个 program，太多，没有交错运行，小一些的测试交错运行过" if big else ""
    return mk("passed", f"{where}：正确（也在新输入上重放通过{tail}）", case.points)


def _copied_inputs(workdir: Path, pc: PlannedCase) -> list[str]:
    """The inputs whose values (as shown to the learner's call: its dtype or float32, in row- or column-major
    order) sit in one of the call's scratch buffers as the first launch saw it: the wrapper handed the kernel
    a torch copy of an input. Only picks the message of a case that already failed its replay."""
    import torch

    snaps = []
    for path in sorted(workdir.glob(f"{pc.id}_snap_scratch_*.npy")):
        try:
            snaps.append(safeio.load_npy(path, ARRAY_CAP, dtype=np.uint8).tobytes())
        except safeio.Untrusted:
            continue
    found = []
    for spec in pc.case.inputs:
        t = pc.shown.get(spec.name)
        if not isinstance(t, torch.Tensor) or t.unique().numel() < 2:
            continue
        dtypes = {TORCH_DTYPES[spec.dtype_in(pc.case)]} | ({torch.float32} if t.is_floating_point() else set())
        orders = [t, t.permute(*reversed(range(t.dim())))] if t.dim() > 1 else [t]
        needles = [o.to(dt).contiguous().view(torch.uint8).numpy().tobytes() for dt in dtypes for o in orders]
        needles = [n for n in needles if len(n) >= 12]  # a few bytes could sit in any buffer by chance
        if any(n in s for n in needles for s in snaps):
            found.append(spec.name)
    return found


def _judge_python(ex, pc, workdir, mk) -> TestResult:
    case = pc.case
    rec = _record(workdir / f"{pc.id}.json", {})
    if rec.get("error"):
        return mk("error", _error_message(str(rec["error"]), case.kwargs))
    values = rec.get("values")
    if not isinstance(values, list) or len(values) != len(case.calls):
        raise BadRecord(f"{pc.id}.json: {len(values) if isinstance(values, list) else 'no'} values for {len(case.calls)} calls")
    fn = case.reference or ex.reference
    for args, got in zip(case.calls, values):
        want = fn(*args)
        want = [int(v) for v in want] if isinstance(want, (tuple, list)) else want
        if (list(got) if isinstance(got, list) else got) != (list(want) if isinstance(want, list) else want):
            return mk("failed", f"{case.func}{tuple(args)} 得到 {got}，应为 {want}。{case.hint}")
    return mk("passed", f"{len(case.calls)} 次调用全部正确", case.points)


def _too_many_programs(counts, case) -> str:
    programs, limit, launches = (int(v) for v in counts)
    if programs <= limit:
        return (f"这次调用启动了 {launches} 次 kernel：这是 persistent kernel，一次调用只启动一次（最多 {case.max_programs}={limit} "
                f"个 program），每个 program 在 kernel 里循环处理 tile p, p + {case.max_programs}, ...，不要在 host 上循环多次启动。")
    return (f"有一次 launch 的 grid 有 {programs} 个 program，这一题要求最多 {case.max_programs}={limit} 个：这是 persistent kernel，"
            f"只启动 {case.max_programs} 个 program，每个 program 循环处理 tile p, p + {case.max_programs}, ...（不是一个 tile 一个 program）。")


def _judge_perf(pc, workdir, replay_out, mk) -> TestResult:
    rec = _record(workdir / f"{pc.id}.json", {"launches": int})
    if rec.get("error"):
        return mk("error", _error_message(str(rec["error"]), pc.case.perf.get("kwargs", ())))
    if rec["launches"] == 0:
        return mk("failed", "计时用的调用没有启动任何 Triton kernel。")
    r = _record(replay_out / f"{pc.id}.json", {}) if (replay_out / f"{pc.id}.json").exists() else {}
    if r.get("too_many_programs"):
        return mk("failed", _too_many_programs(r["too_many_programs"], pc.case))
    if r.get("perf_wrong"):
        return mk("failed", f"计时用的调用（{str(pc.case.name)[:60]}）结果不对：{str(r['perf_wrong'])[:120]}。"
                            "性能分只给在计时的形状上也算对的 kernel。")
    p = r.get("perf")
    if r.get("error") or r.get("bad_log") or not isinstance(p, dict):
        why = r.get("bad_log") or (str(r.get("error")).strip().splitlines() or ["?"])[-1]
        return mk("error", f"评分器计时时出错：{str(why)[:300]}")
    return perf_result(p, mk)


def perf_result(p: dict, mk) -> TestResult:
    ok = all(isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool) and p.get(k) > 0
             for k in ("ours_ms", "target_ms"))
    if not ok:
        raise BadRecord("perf record missing or invalid")
    speed = p["target_ms"] / p["ours_ms"]  # fraction of the textbook solution's speed
    frac = min(1.0, max(0.0, (speed - PERF_ZERO) / (PERF_FULL - PERF_ZERO)))
    unit = str(p.get("unit", ""))[:10]
    msg = (f"你的 kernel {p['ours_ms'] * 1e3:.1f} us，课程的参考答案（教科书式 kernel）{p['target_ms'] * 1e3:.1f} us："
           f"速度是它的 {speed:.2f} 倍（≥ {PERF_FULL} 倍满分，≤ {PERF_ZERO} 倍 0 分）。")
    if isinstance(p.get("tuned_rate"), (int, float)):
        msg += f"供参考：调优过的 tcourse.kernels 达到 {p['tuned_rate']:.0f} {unit}，你的 {p.get('ours_rate', 0):.0f} {unit}。"
    result = mk("passed" if frac >= 1.0 else "failed", msg)
    result.points = round(result.max_points * frac, 2)
    return result


def skipped(case, why: str) -> TestResult:
    return TestResult(case.name, "skipped", 0.0, case.points, why, "hidden" if case.hidden else "visible")
