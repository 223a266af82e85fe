"""One notebook, two machines: decide GPU or CPU interpreter *before* Triton is imported.

``@triton.jit`` reads ``TRITON_INTERPRET`` when the decorator runs, and Triton's own library functions
(``tl.sum``, ``tl.cdiv``, ...) are ``@triton.jit`` functions decorated by ``import triton``: switched on
later, the interpreter cannot call them (checked in Triton 3.6, 3.8, 3.9).

Every notebook starts with::

    import tcourse
    rt = tcourse.setup()      # prints the environment table, turns the interpreter on when there is no GPU
    import triton, triton.language as tl

``TCOURSE_DEVICE=cpu|cuda|auto`` (default ``auto``) overrides the detection.
"""
from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from dataclasses import dataclass, field

from . import versions

class SetupError(RuntimeError):
    """The environment cannot give the mode that was asked for."""


@dataclass
class GPUInfo:
    name: str
    capability: tuple[int, int]
    sm_count: int
    memory_gib: float
    driver: str = ""


@dataclass
class Runtime:
    """What the notebook runs on. ``rt.gpu`` is the one switch a cell needs."""

    mode: str  # "gpu" or "cpu"
    gpu_info: GPUInfo | None
    versions: dict[str, str]
    warnings: list[str] = field(default_factory=list)

    @property
    def gpu(self) -> bool:
        return self.mode == "gpu"

    @property
    def device(self) -> str:
        return "cuda" if self.gpu else "cpu"

    def pick(self, cpu, gpu):
        """Problem size for this machine: small and odd under the interpreter, realistic on a GPU."""
        return gpu if self.gpu else cpu

    def label(self) -> str:
        if self.gpu_info:
            g = self.gpu_info
            where = f"{g.name} (sm_{g.capability[0]}{g.capability[1]})"
        else:
            where = "CPU interpreter (TRITON_INTERPRET=1)"
        v = self.versions
        return (f"{where} · {_dt.date.today().isoformat()} · torch {v.get('torch')} · "
                f"triton {v.get('triton')} · python {v.get('python')}")

    def table(self) -> str:
        rows = [
            ("Python", self.versions.get("python", "?")),
            ("torch", self.versions.get("torch", "?")),
            ("triton", self.versions.get("triton", "?")),
            ("numpy", self.versions.get("numpy", "?")),
        ]
        if self.gpu_info:
            g = self.gpu_info
            rows += [
                ("mode", "GPU (compiled kernels)"),
                ("GPU", g.name),
                ("compute capability", f"{g.capability[0]}.{g.capability[1]}"),
                ("SM count", str(g.sm_count)),
                ("memory", f"{g.memory_gib:.1f} GiB"),
            ]
            if g.driver:
                rows.append(("driver", g.driver))
        else:
            rows += [("mode", "CPU interpreter (TRITON_INTERPRET=1)"), ("GPU", "none")]
        rows.append(("date", _dt.date.today().isoformat()))
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    # -- GPU-only cells -------------------------------------------------------------
    def live_or_recorded(self, name: str, live, *, what: str = "这个单元"):
        """Run ``live()`` on a GPU (and save it when recording); on CPU return the H200 recording.

        On CPU nothing is timed: the recorded data is returned, with its device/date/versions
        printed, or ``None`` with a message when no recording exists yet.
        """
        from . import recorded

        if self.gpu:
            data = live()
            recorded.save_if_recording(name, data, self)
            return data
        print(f"[CPU] {what}需要 GPU（计时/bf16/autotune 在解释器下没有意义），下面显示记录的 GPU 结果。")
        try:
            rec = recorded.load(name)
        except recorded.NoRecording as e:
            print(f"[CPU] {e}")
            return None
        print(f"[记录] {rec.label()}")
        return rec.data


def _gpu_available(force: str) -> bool:
    if force == "cpu":
        return False
    import torch

    ok = torch.cuda.is_available()
    if force == "cuda" and not ok:
        raise SetupError("设置了 TCOURSE_DEVICE=cuda，但这台机器上 torch.cuda.is_available() 为 False")
    return ok


def _gpu_info() -> GPUInfo:
    import torch

    p = torch.cuda.get_device_properties(0)
    driver = ""
    try:
        import subprocess

        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip().splitlines()[0]
    except Exception:  # nvidia-smi is optional; the table just leaves the row out
        driver = ""
    return GPUInfo(p.name, (p.major, p.minor), p.multi_processor_count, p.total_memory / 2**30, driver)


def known_bad(mode: str, v: dict[str, str], interpreter_after_import: bool) -> list[str]:
    """Version and ordering combinations known to give wrong results or errors (messages in Chinese)."""
    out = []
    if interpreter_after_import:
        out.append(
            "triton 在 tcourse.setup() 之前已被 import：TRITON_INTERPRET 必须在 import triton 之前设置。"
            "你的 kernel 在 @triton.jit 执行时决定走编译还是解释器，但 tl.sum、tl.max、tl.cdiv 等库函数本身也是 "
            "@triton.jit 函数，在 import triton 时就已按 GPU 装饰；之后再打开解释器，用到它们的 kernel 会报 "
            "\"Cannot call @triton.jit'd outside of the scope of a kernel\"（Triton 3.6、3.8、3.9 实测）。"
            "请重启 kernel，先运行第一个单元。"
        )
    if mode == "cpu":
        out.append("解释器下的 bf16 结果是错的且不报错（tl.dot 和逐元素运算都是）：本课的 bf16 单元只在 GPU 上运行。")
        tri, npv = versions.parse(v.get("triton", "0")), versions.parse(v.get("numpy", "0"))
        if tri < versions.parse("3.8") and npv >= versions.parse("2.4"):
            out.append(
                f"triton {v['triton']} 的解释器配 numpy {v['numpy']}（>= 2.4）时，上界是张量的循环"
                "（`for k in range(0, tl.cdiv(K, BLOCK_K))`）抛 TypeError（实测 3.6.0 出错，3.8.0 和 3.9.0 正常）。"
                "请用 numpy<2.4，或 triton>=3.8。"
            )
    return out


_RUNTIME: Runtime | None = None


def setup(quiet: bool = False) -> Runtime:
    """Pick the mode, set TRITON_INTERPRET before Triton loads, print the environment table."""
    global _RUNTIME
    force = os.environ.get("TCOURSE_DEVICE", "auto").lower()
    if force not in ("auto", "cpu", "cuda"):
        raise SetupError(f"TCOURSE_DEVICE 只能是 auto、cpu 或 cuda，而不是 {force!r}")
    if os.environ.get("TRITON_INTERPRET") == "1" and force == "auto":
        force = "cpu"
    # Checked before torch loads: "the learner imported triton before the interpreter was switched on".
    triton_preimported = "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"
    gpu = _gpu_available(force)
    interpreter_after_import = triton_preimported and not gpu
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # triton 3.9 warns when unset
    import triton  # noqa: F401  (after the switch, on purpose)

    if not gpu:
        prepare_interpreter()
    mode = "gpu" if gpu else "cpu"
    v = versions.installed()
    v["python"] = platform.python_version()
    warns = known_bad(mode, v, interpreter_after_import) + versions.out_of_range(v)
    rt = Runtime(mode, _gpu_info() if gpu else None, v, warns)
    _RUNTIME = rt
    if not quiet:
        print(rt.table())
    return rt


def prepare_interpreter() -> None:
    """What the course changes in Triton's interpreter, in the learner's notebook and in the grader's replay alike."""
    skip_discarded_overflow_checks()
    round_float16_accumulators_along_k()


MMA_K = 16  # the products one MMA step adds into its accumulator (float16 and bfloat16 operands, Ampere and Hopper)


def round_float16_accumulators_along_k() -> bool:
    """Make ``tl.dot`` into a float16 accumulator round every 16 products along K, as a GPU's MMA does; True if done.

    The interpreter computes ``tl.dot(a, b, acc)`` as one NumPy matmul rounded once to ``acc``'s dtype. On a GPU, a
    float16 accumulator (``out_dtype=tl.float16``, or an ``acc`` in float16) is rounded at every MMA step, so a partial
    sum past 65504 overflows to inf even when the final result is small. Without this, such a kernel is right on a
    laptop and wrong on the GPU. A Triton whose interpreter has no ``create_dot`` is left alone.
    """
    import numpy as np
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    dot = getattr(builder, "create_dot", None)
    if dot is None or getattr(dot, "rounds_along_k", False):
        return dot is not None

    def dot_rounding_along_k(a, b, acc, *rest):
        k = a.data.shape[-1]
        if acc.data.dtype != np.float16 or k <= MMA_K:
            return dot(a, b, acc, *rest)
        for k0 in range(0, k, MMA_K):
            acc = dot(interpreter.TensorHandle(a.data[..., k0:k0 + MMA_K], a.dtype),
                      interpreter.TensorHandle(b.data[..., k0:k0 + MMA_K, :], b.dtype), acc, *rest)
        return acc

    dot_rounding_along_k.rounds_along_k = True
    builder.create_dot = dot_rounding_along_k
    return True


def skip_discarded_overflow_checks() -> bool:
    """Stop the interpreter from building integer-overflow checks that it throws away; True if it was switched off.

    For every integer ``+``, ``-`` and ``*`` on tensors narrower than 64 bits (all index arithmetic), Triton's
    interpreter widens both operands to int64, redoes the operation, compares it with the type's range and passes
    the result to ``device_assert``. That returns at once because the interpreter's options have ``debug=False``, and
    the interpreter never sets it (Triton 3.6 and 3.9). So the check cannot fire; building it made the reference
    matmul, softmax and attention 1.3-1.55x slower under the interpreter, and a matmul or attention exercise's grade
    about a fifth slower (2-core CPU, Triton 3.9, 2026-12-06). Switched off only where ``debug`` is off; a Triton
    whose interpreter lacks these options is left alone.
    """
    import dataclasses

    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if not dataclasses.is_dataclass(options) or getattr(options, "debug", True) \
            or not getattr(options, "sanitize_overflow", False):
        return False
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True


def current() -> Runtime:
    """The runtime chosen by ``setup()`` (calls it quietly if a module needs it first)."""
    return _RUNTIME if _RUNTIME is not None else setup(quiet=True)
