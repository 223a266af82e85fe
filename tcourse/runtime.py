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
        graded = os.environ.get("TCOURSE_GRADING_FLOATS", "")  # set by the grader: compute as its replay does
        prepare_interpreter(grading=graded.isdigit(), float_seed=int(graded) if graded.isdigit() else None)
    mode = "gpu" if gpu else "cpu"
    v = versions.installed()
    v["python"] = platform.python_version()
    warns = known_bad(mode, v, interpreter_after_import) + versions.out_of_range(v)
    rt = Runtime(mode, _gpu_info() if gpu else None, v, warns)
    _RUNTIME = rt
    if not quiet:
        print(rt.table())
    return rt


def prepare_interpreter(grading: bool = False, float_seed: int | None = None) -> None:
    """What the course changes in Triton's interpreter, in the learner's notebook and in the grader's replay alike:
    one speed-up, and the places where the interpreter computed something other than a GPU build of the same kernel
    (each found by writing a kernel that takes one branch on a CPU and the other on a GPU, 2026-12-07). ``grading``
    (the grader's replay, and the learner's notebook while the grader runs it): bfloat16 arithmetic on values too, and
    float arithmetic as a GPU build does it (``tcourse.gpu_floats``, keyed with ``float_seed``: approximate results
    moved within their error bound, subnormals flushed, most multiply-adds fused, GPU reduction and scan orders, casts
    to bfloat16 and fp8 rounded to nearest), int arguments of 1 as constants, integer division by zero an error;
    chapter 0 shows learners that the interpreter's bfloat16 is not to be trusted, and the course runs bfloat16 only
    on a GPU."""
    skip_discarded_overflow_checks()
    round_float16_accumulators_along_k()
    float32_dots_read_tf32()
    block_truth_is_an_error()
    scalar_arguments_typed_as_on_a_gpu()
    float_to_int_casts_saturate()
    python_numbers_in_kernels_are_tensors()
    if grading:
        import secrets

        from tcourse import gpu_floats

        bfloat16_arithmetic_rounds_from_float32()
        gpu_floats.install(secrets.randbits(32) if float_seed is None else float_seed)
        int_arguments_of_one_are_constants()
        integer_division_by_zero_is_an_error()


def block_truth_is_an_error() -> bool:
    """``bool()`` of a block raises, as compiling ``if block:`` does; True if done. (A one-element tensor's
    ``__index__`` is set here too, for Triton 3.6 with NumPy 2.5.)

    The interpreter calls every block true, so ``mask_a and mask_b`` gave ``mask_b`` and ``max(x, y)`` gave ``y``,
    where a GPU build takes ``and``/``or``/``not`` and Python's ``min``/``max`` element by element. A kernel that
    relied on either was right on one and wrong on the other. A one-element tensor keeps its truth value, and so
    does a block where Triton's own code asks (it means "was given" there).
    """
    from triton.runtime import interpreter

    patch_tensor = getattr(interpreter, "_patch_lang_tensor", None)
    if patch_tensor is None or getattr(patch_tensor, "strict_truth", False):
        return patch_tensor is not None

    import os
    import sys

    import triton

    own = os.path.dirname(triton.__file__) + os.sep

    def truth(self):
        data = self.handle.data
        # Triton's own code asks for a block's truth where it means "given" (``other.handle if other else None``)
        if data.size != 1 and not sys._getframe(1).f_code.co_filename.startswith(own):
            raise TypeError(f"一个块（形状 {list(data.shape)}）没有真假值：块上的与、或、非写 &、|、~（不要用 and、or、not），"
                            "逐元素取较大、较小写 tl.maximum、tl.minimum（不要用 max、min），选值写 tl.where")
        return bool(data.reshape(())) if data.size == 1 else True

    def patch_with_strict_truth(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__bool__", truth)
        # a loop bound or an index: Triton 3.6 took int() of the one-element array, which NumPy 2.5 refuses
        # (every kernel with a range() loop failed on Triton 3.6 with NumPy 2.5, the GPU node's pair)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(())))

    patch_with_strict_truth.strict_truth = True
    interpreter._patch_lang_tensor = patch_with_strict_truth
    return True


def python_numbers_in_kernels_are_tensors() -> bool:
    """A ``range``/``tl.range`` loop variable, each element of ``a, b = 1, 2`` and the value of ``x: tl.int32 = 1`` are
    int32 (or int64) scalars, as a GPU build makes them; True if done. The interpreter turns only ``x = 1`` into a
    tensor and kept Python ints there, whose ``%`` and ``//`` round toward minus infinity and never overflow: ``(i - 1)
    % 2`` was 1 on a CPU and -1 on a GPU for ``i = 0``. A ``tl.static_range`` loop keeps its Python ints (a GPU build
    makes them constants too), and so does ``x: tl.constexpr = 1``."""
    import ast

    from triton.runtime import interpreter

    transformer = getattr(interpreter, "ASTTransformer", None)
    if transformer is None or getattr(transformer, "tensor_numbers", False):
        return transformer is not None

    def tensor(value: ast.expr) -> ast.expr:  # what the interpreter's own rewrite of ``x = value`` writes
        return ast.Call(func=ast.Attribute(value=ast.Name(id="interpreter_semantic", ctx=ast.Load()), attr="to_tensor",
                                           ctx=ast.Load()), args=[value, ast.Constant(value=False)], keywords=[])

    assign = transformer.visit_Assign

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
            node.value = ast.Tuple(elts=[tensor(self.visit(e)) for e in node.value.elts], ctx=ast.Load())
            node.targets = [self.visit(node.targets[0])]
            return node
        return assign(self, node)

    def visit_AnnAssign(self, node):
        node = self.generic_visit(node)
        if node.value is not None and not ast.unparse(node.annotation).endswith("constexpr"):
            node.value = tensor(node.value)
        return node

    def visit_For(self, node):
        node = self.generic_visit(node)
        static = isinstance(node.iter, ast.Call) and ast.unparse(node.iter.func).endswith("static_range")
        if isinstance(node.target, ast.Name) and not static:
            node.body.insert(0, ast.copy_location(ast.Assign(targets=[ast.Name(id=node.target.id, ctx=ast.Store())],
                                                             value=tensor(ast.Name(id=node.target.id, ctx=ast.Load()))),
                                                  node))
        return node

    transformer.visit_Assign, transformer.visit_AnnAssign, transformer.visit_For = visit_Assign, visit_AnnAssign, visit_For
    transformer.tensor_numbers = True
    return True


def scalar_arguments_typed_as_on_a_gpu() -> bool:
    """A float argument is a float32 scalar and an int in [2^31, 2^32) an int64, as a GPU launch types them; True if
    done. The interpreter kept the float as Python's (a float64, and weakly typed: ``a * x`` stayed float16 for a
    float16 ``x``, where a GPU computes it in float32) and stored the int as uint32 under an int64 type (``n + n``
    wrapped)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is None or getattr(convert, "gpu_typed", False):
        return convert is not None

    def as_on_a_gpu(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        if isinstance(arg, int) and not isinstance(arg, bool) and 2**31 <= arg < 2**32:
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.int64), tl.int64), tl.int64)
        return convert(arg)

    as_on_a_gpu.gpu_typed = True
    interpreter._implicit_cvt = as_on_a_gpu
    return True


def int_arguments_of_one_are_constants() -> bool:
    """An int argument equal to 1 reaches the kernel as the constant 1, as a GPU launch specialises it; True if done.

    Triton compiles a kernel anew for an int argument of 1 with the value folded in, so arithmetic on it is Python's
    (``stride * 2147483647 * 2`` is 4294967294, not a wrapped int32): a kernel could store only where the wrapped value
    is negative, every element in the interpreter and none on a GPU (hostile round 10, 2026-12-07)."""
    from triton.runtime import interpreter

    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is None or getattr(convert, "ones_constant", False):
        return convert is not None
    inside_descriptor = [0]  # a tensor descriptor's shape and strides are run-time values on a GPU too

    def specialised(arg):
        if not inside_descriptor[0] and type(arg) is int and arg == 1:
            return 1  # a plain int, as the interpreter passes a tl.constexpr parameter (tl.constexpr(1) + a block
            # would wrap the block: range() of it failed in a right persistent loop). Inside a tuple too: the
            # launcher specialises a tuple's elements as it does an argument's (hostile round 15: (1, 2) as cfg)
        nested = isinstance(arg, interpreter.TensorDescriptor)
        inside_descriptor[0] += nested
        try:
            return convert(arg)
        finally:
            inside_descriptor[0] -= nested

    specialised.ones_constant = True
    interpreter._implicit_cvt = specialised
    run = interpreter.InterpretedFunction.run

    def run_unspecialised(self, *args, grid, warmup, **kwargs):
        """``do_not_specialize`` keeps an int of 1 a run-time int32, as the launcher does (hostile round 15:
        ``(stride - 8) // 2`` floored in the grade and truncated on a GPU)."""
        keep = unspecialised(self.arg_names, self.kwargs.get("do_not_specialize"))
        if keep:
            args = tuple(RuntimeInt(a) if type(a) is int and name in keep else a for a, name in zip(args, self.arg_names))
            kwargs = {k: RuntimeInt(v) if type(v) is int and k in keep else v for k, v in kwargs.items()}
        return run(self, *args, grid=grid, warmup=warmup, **kwargs)

    interpreter.InterpretedFunction.run = run_unspecialised
    return True


def unspecialised(arg_names: list[str], do_not_specialize) -> set[str]:
    """The parameters ``triton.jit(do_not_specialize=...)`` leaves unspecialised, by Triton's own test (a position
    ``i in``, or a name ``in`` the list: -2 names none, 5.0 names the sixth; hostile round 16)."""
    dns = list(do_not_specialize or ())
    return {name for i, name in enumerate(arg_names) if i in dns or name in dns}


class RuntimeInt(int):
    """An int argument that a launch leaves unspecialised (``do_not_specialize``): converted to an int32 tensor."""


def integer_division_by_zero_is_an_error() -> bool:
    """``//`` and ``%`` of integers by 0 raise; True if done. NumPy gives 0, and LLVM takes a division by zero as
    impossible (undefined behaviour) and folds the code around it away: ``(i + 7) // zero == 0`` held in the
    interpreter and never on a GPU (hostile round 10)."""
    import numpy as np
    from triton.runtime import interpreter

    b = getattr(interpreter, "interpreter_builder", None)
    if b is None or getattr(b, "division_checked", False):
        return b is not None

    def checked(name):
        original = getattr(b, name)

        def op(lhs, rhs):
            if np.issubdtype(np.asarray(rhs.data).dtype, np.integer) and (np.asarray(rhs.data) == 0).any():
                raise ZeroDivisionError("kernel 里有整数除以 0（// 或 %）：在 GPU 上这是未定义行为，编译器会假定它不发生。"
                                        "除数为 0 的位置（比如 mask 之外的元素）要先用 tl.where 换成 1。")
            return original(lhs, rhs)

        setattr(b, name, op)

    for name in ("create_idiv", "create_srem", "create_urem"):
        checked(name)
    b.division_checked = True
    return True


def float_to_int_casts_saturate() -> bool:
    """A float cast to an integer type saturates at the type's range and NaN becomes 0, as the GPU's ``cvt.rzi``
    does; True if done. NumPy's cast gave the type's smallest value for anything out of range. There is no ``cvt`` to
    8 bits: sm_90 converts to 16 (``cvt.rzi.s16.f32``, saturating there) and keeps the low byte, so 300.0 to int8 is
    44, not 127 (hostile round 14 relied on the saturation)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    cast = getattr(builder, "cast_impl", None)
    if cast is None or getattr(cast, "saturates", False):
        return cast is not None

    def saturating_cast(self, src, dst_type):
        dst = dst_type.scalar
        if not (np.issubdtype(src.data.dtype, np.floating) and dst.is_int() and not dst.is_bool()):
            return cast(self, src, dst_type)
        np_dst = interpreter._get_np_dtype(dst)
        if np.dtype(np_dst).itemsize == 1:  # through 16 bits (saturating there), then the low byte
            wide = saturating_cast(self, src, tl.uint16 if dst.is_int_unsigned() else tl.int16)
            return interpreter.TensorHandle(wide.data.astype(np_dst), dst)
        info, x = np.iinfo(np_dst), np.nan_to_num(src.data.astype(np.float64), nan=0.0)
        # the ends by comparison: float64 rounds 2^63 - 1 up to 2^63, which a cast would wrap
        out = np.where(x >= float(info.max), info.max, np.where(x <= float(info.min), info.min, 0)).astype(np_dst)
        inside = (x > float(info.min)) & (x < float(info.max))
        out[inside] = x[inside].astype(np_dst)
        return interpreter.TensorHandle(out, dst)

    saturating_cast.saturates = True
    builder.cast_impl = saturating_cast
    return True


def bfloat16_arithmetic_rounds_from_float32() -> bool:
    """Arithmetic on bfloat16 works on the values, computed in float32 and rounded back to bfloat16 (what a GPU's
    bfloat16 instructions give); True if done. The interpreter stores bfloat16 as its 16 bits in a uint16 and added
    those: 1.5 + 1.5 was inf."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    binary = getattr(builder, "binary_op", None)
    if binary is None or getattr(binary, "bf16_values", False):
        return binary is not None

    def in_float32(h):
        if h.dtype.scalar != tl.bfloat16:
            return h
        return interpreter.TensorHandle(interpreter._convert_float(h.data, tl.bfloat16, tl.float32, None)
                                        .view(np.float32), tl.float32)

    def binary_on_values(self, lhs, rhs, op):
        if tl.bfloat16 not in (lhs.dtype.scalar, rhs.dtype.scalar):
            return binary(self, lhs, rhs, op)
        out = binary(self, in_float32(lhs), in_float32(rhs), op)
        if out.dtype.scalar != tl.float32:  # a comparison: its booleans
            return out
        return interpreter.TensorHandle(interpreter._convert_float(out.data.astype(np.float32), tl.float32,
                                                                   tl.bfloat16, None).view(np.uint16), tl.bfloat16)

    binary_on_values.bf16_values = True
    builder.binary_op = binary_on_values
    return True


MMA_K = {2: 16, 1: 32, 4: 8}  # the products one MMA step adds into its accumulator, by operand bytes: 16-bit, fp8, TF32


def mma_steps(a, b, step: int, handle):
    """The operands of an interpreter ``tl.dot`` (handles of [..., M, K] and [..., K, N]) cut along K into the slices
    one MMA step reads: K = 64 of float16 is four steps of 16."""
    for k0 in range(0, a.data.shape[-1], step):
        yield handle(a.data[..., k0:k0 + step], a.dtype), handle(b.data[..., k0:k0 + step, :], b.dtype)


def round_float16_accumulators_along_k() -> bool:
    """Make ``tl.dot`` into a float16 accumulator round after every MMA step along K (``MMA_K``), as a GPU does; True if done.

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
        step = MMA_K.get(a.data.dtype.itemsize, k)
        if acc.data.dtype != np.float16 or k <= step:
            return dot(a, b, acc, *rest)
        for a_k, b_k in mma_steps(a, b, step, interpreter.TensorHandle):
            acc = dot(a_k, b_k, acc, *rest)
        return acc

    dot_rounding_along_k.__dict__.update(getattr(dot, "__dict__", {}))
    dot_rounding_along_k.rounds_along_k = True
    builder.create_dot = dot_rounding_along_k
    return True


TF32_KEPT_BITS = 0xFFFFE000  # a TF32 operand: float32's sign, exponent and top 10 mantissa bits


def float32_dots_read_tf32() -> bool:
    """Make ``tl.dot`` of float32 operands read them as TF32, as a GPU's tensor cores do; True if done.

    Triton's default ``input_precision`` for float32 is ``"tf32"``, and the PTX it emits hands the float32 bits to
    ``wgmma``/``mma`` unconverted: the tensor cores read the top 19 bits, i.e. each operand truncated to 10 mantissa
    bits (measured on an H100, both paths, ``results/h100/logs/probe_tf32.log``). The interpreter multiplied exactly,
    so a kernel could be right on a laptop and off by 1e-3 on a GPU, or tell the two apart and branch.
    ``input_precision="ieee"`` (and ``"tf32x3"``, within float32's rounding) stay exact.
    """
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    dot = getattr(builder, "create_dot", None)
    tf32 = getattr(getattr(ir, "INPUT_PRECISION", None), "TF32", None)
    if dot is None or tf32 is None or getattr(dot, "reads_tf32", False):
        return dot is not None and tf32 is not None

    def as_tf32(h):
        if h.dtype != tl.float32:
            return h
        return interpreter.TensorHandle((h.data.view(np.uint32) & np.uint32(TF32_KEPT_BITS)).view(np.float32), h.dtype)

    def dot_reading_tf32(a, b, acc, input_precision, *rest):
        if input_precision == tf32:
            a, b = as_tf32(a), as_tf32(b)
        return dot(a, b, acc, input_precision, *rest)

    dot_reading_tf32.__dict__.update(getattr(dot, "__dict__", {}))  # the marks of the wraps inside it
    dot_reading_tf32.reads_tf32 = True
    builder.create_dot = dot_reading_tf32
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
