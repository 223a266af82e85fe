"""The float arithmetic of a GPU build, for the grader's replay on a CPU.

Triton's interpreter computes every float operation as NumPy does: correctly rounded, subnormals kept, nothing fused.
The PTX that Triton emits for sm_90 (read 2026-12-07, Triton 3.9, ``TRITON_DEFAULT_FP_FUSION=1``) does not:

- ``/`` and ``tl.fdiv`` are ``div.full.f32``, ``tl.exp`` a ``mul.f32`` by log2(e) then ``ex2.approx.f32``, ``tl.exp2``
  ``ex2.approx.ftz.f32``, ``tl.sqrt`` ``sqrt.approx.ftz.f32``, ``tl.rsqrt`` ``rsqrt.approx.ftz.f32``; ``tl.log``,
  ``tl.log2``, ``tl.sin``, ``tl.cos`` and ``tl.erf`` are polynomials on ``.ftz`` instructions. None is correctly
  rounded, and the ``.ftz`` ones flush subnormal inputs and results to zero (sign kept); so do ``tl.floor`` and
  ``tl.ceil`` (``cvt.rmi.ftz``) and ``atom.add.f32`` (its input).
- a multiply that feeds an add or a subtract is one ``fma.rn.f32``;
- ``x % y`` is ``fma(-trunc(x / y), y, x)`` with a correctly rounded divide;
- float32 to bfloat16 rounds to nearest even (the interpreter truncated), and to fp8 rounds to nearest even and
  saturates at the largest finite value (``cvt.rn.satfinite``; the interpreter truncated and wrapped 1000 to 256).

A kernel could compare such a result with NumPy's value and compute the answer only when they agree: right in the
interpreter, wrong on a GPU (a hostile round, 2026-12-07: eleven notebooks with full marks on CPU). :func:`install`
makes the replay compute as a GPU does: fused, flushed and rounded as above, and each approximate result moved a few
units in the last place from NumPy's by a hash of its operands and a secret seed (the same operands give the same
value in every run of a replay, as on one GPU), so that no exact value of an approximate operation can be relied on.
A right kernel does not notice: its tolerance is far above 2 ulp.
"""
from __future__ import annotations

import numpy as np

ULPS = 2  # the most an approximate result moves: div.full.f32 is within 2 ulp, ex2.approx and sqrt.approx closer
FUSED = "tcourse_exact_product"  # TensorHandle.attr key: a float32 product's exact value, for a following add


def flush(x: np.ndarray) -> np.ndarray:
    """float32 subnormals to zero, sign kept."""
    sub = (np.abs(x) < np.float32(np.finfo(np.float32).tiny)) & (x != 0)
    return np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32) if sub.any() else x


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x7FEB352D)
    h = h ^ (h >> np.uint32(15))
    h = h * np.uint32(0x846CA68B)
    return h ^ (h >> np.uint32(16))


def nudge(r: np.ndarray, key: int, *operands: np.ndarray, exact: np.ndarray | bool = False) -> np.ndarray:
    """``r`` (float32) moved by -ULPS..ULPS units in the last place, chosen by a hash of ``key`` and the operands'
    bits; zeros, infinities, NaN, subnormals and values next to them stay, and so do ``exact`` ones (a quotient or
    a power that float32 holds exactly: 64 / 32, exp2(3.0); an index computed from one stays right)."""
    h = np.full(r.shape, np.uint32(key & 0xFFFFFFFF), dtype=np.uint32)
    for i, op in enumerate(operands):
        bits = np.broadcast_to(np.ascontiguousarray(op, dtype=np.float32).view(np.uint32), r.shape)
        h = _mix(h ^ (bits * np.uint32(2 * i + 0x9E3779B1)))
    steps = (h % np.uint32(2 * ULPS + 1)).astype(np.int32) - ULPS
    bits = np.ascontiguousarray(r, dtype=np.float32).view(np.int32)
    exponent = (bits >> 23) & 0xFF
    movable = (exponent > 1) & (exponent < 0xFE) & ~np.asarray(exact, dtype=bool)
    return np.where(movable, bits + steps, bits).astype(np.int32).view(np.float32).reshape(r.shape)


def _f64(h) -> np.ndarray:
    return np.asarray(h.data, dtype=np.float64)


def install(seed: int) -> bool:
    """Make Triton's interpreter compute float32 as a GPU build does (see the module's docstring); True if done."""
    import triton.language as tl
    from triton.runtime import interpreter

    b = getattr(interpreter, "interpreter_builder", None)
    if b is None or getattr(b, "gpu_floats", False):
        return b is not None
    Handle = interpreter.TensorHandle

    def f32(h) -> bool:
        return h.dtype.scalar == tl.float32

    def approximate(name, fn, ftz_in: bool, ftz_out: bool, key: int):
        original = getattr(b, name)

        def op(*args):
            if not all(f32(a) for a in args):
                return original(*args)
            ins = [flush(a.data) if ftz_in else a.data for a in args]
            with np.errstate(all="ignore"):
                r64 = fn(*[np.asarray(x, dtype=np.float64) for x in ins])
                r = r64.astype(np.float32)
            r = nudge(r, seed * 0x10001 + key, *ins, exact=r.astype(np.float64) == r64)
            return Handle(flush(r) if ftz_out else r, tl.float32)

        setattr(b, name, op)

    log2e = np.float64(np.float32(np.log2(np.e)))
    # an approximate exp: ex2.approx of x * log2(e) rounded to float32 (mul.f32 first, then ex2, not ftz)
    approximate("create_exp", lambda x: np.exp2((x * log2e).astype(np.float32).astype(np.float64)), False, False, 1)
    approximate("create_exp2", np.exp2, True, True, 2)
    approximate("create_sqrt", np.sqrt, True, True, 3)
    approximate("create_rsqrt", lambda x: 1.0 / np.sqrt(x), True, True, 4)
    approximate("create_log", np.log, True, True, 5)
    approximate("create_log2", np.log2, True, True, 6)
    approximate("create_sin", np.sin, True, True, 7)
    approximate("create_cos", np.cos, True, True, 8)
    approximate("create_fdiv", np.divide, True, True, 9)
    approximate("create_approx_divf", np.divide, True, True, 10)
    erf = b.create_erf
    approximate("create_erf", lambda x: erf(Handle(x.astype(np.float32), tl.float32)).data.astype(np.float64),
                True, True, 11)

    for name in ("create_floor", "create_ceil"):  # cvt.rmi.ftz / cvt.rpi.ftz
        def rounding(arg, _original=getattr(b, name)):
            return _original(Handle(flush(arg.data), arg.dtype) if f32(arg) else arg)
        setattr(b, name, rounding)

    fmul, fadd, fsub = b.create_fmul, b.create_fadd, b.create_fsub

    def multiply(lhs, rhs):
        out = fmul(lhs, rhs)
        if f32(lhs) and f32(rhs):
            out.attr[FUSED] = _f64(lhs) * _f64(rhs)  # exact: 24 + 24 bits
        return out

    def fused(plain, sign):
        def add(lhs, rhs):
            if not (f32(lhs) and f32(rhs)):
                return plain(lhs, rhs)
            if FUSED in lhs.attr:
                exact = lhs.attr[FUSED] + sign * _f64(rhs)
            elif FUSED in rhs.attr:
                exact = _f64(lhs) + sign * rhs.attr[FUSED]
            else:
                return plain(lhs, rhs)
            with np.errstate(all="ignore"):
                return Handle(np.asarray(exact).astype(np.float32), tl.float32)
        return add

    b.create_fmul, b.create_fadd, b.create_fsub = multiply, fused(fadd, 1.0), fused(fsub, -1.0)

    frem = b.create_frem

    def remainder(lhs, rhs):
        if not (f32(lhs) and f32(rhs)):
            return frem(lhs, rhs)
        x, y = _f64(lhs), _f64(rhs)
        with np.errstate(all="ignore"):
            q = np.trunc((x / y).astype(np.float32).astype(np.float64))
            r = (x - q * y).astype(np.float32)  # fma(-q, y, x): q * y exact in float64
        return Handle(np.where(np.isinf(y) & np.isfinite(x), lhs.data, r).astype(np.float32), tl.float32)

    b.create_frem = remainder

    rmw = b.create_atomic_rmw
    fadd_op = getattr(getattr(interpreter._ir, "ATOMIC_OP", None), "FADD", None)

    def atomic_rmw(op, ptr, val, *rest):
        if op == fadd_op and f32(val):
            val = Handle(flush(val.data), val.dtype)
        return rmw(op, ptr, val, *rest)

    b.create_atomic_rmw = atomic_rmw
    interpreter._convert_float = _rounding_convert(interpreter._convert_float)
    b.gpu_floats = True
    return True


def _fp8_table(exponent_bits: int, bias: int, nan_codes: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """The finite non-negative values of an 8-bit float format and their codes, ascending."""
    mant = 7 - exponent_bits
    codes, values = [], []
    for c in range(128):
        if c in nan_codes:
            continue
        e, m = c >> mant, c & ((1 << mant) - 1)
        v = (m / (1 << mant)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mant)) * 2.0 ** (e - bias)
        codes.append(c)
        values.append(v)
    return np.array(values), np.array(codes, dtype=np.uint8)


def _round_to_table(x: np.ndarray, values: np.ndarray, codes: np.ndarray, nan_code: int, toward_zero: bool):
    """Nearest (ties to the even code) or toward zero, saturating at the largest finite value; NaN stays NaN."""
    a = np.minimum(np.abs(x), values[-1])
    hi = np.clip(np.searchsorted(values, a), 0, len(values) - 1)
    lo = np.clip(hi - 1, 0, len(values) - 1)
    exact = values[hi] == a
    if toward_zero:
        pick = np.where(exact, hi, lo)
    else:
        dlo, dhi = a - values[lo], values[hi] - a
        pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(codes[lo] % 2 == 0, lo, hi)))
        pick = np.where(exact, hi, pick)
    out = codes[pick] | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(x), np.uint8(nan_code), out).astype(np.uint8)


def _rounding_convert(original):
    import triton.language as tl
    from triton.runtime import interpreter

    tables = {tl.float8e4nv: (_fp8_table(4, 7, {0x7F}), 0x7F), tl.float8e5: (_fp8_table(5, 15, {0x7C, 0x7D, 0x7E, 0x7F}), 0x7F)}
    rtz = getattr(getattr(interpreter._ir, "ROUNDING_MODE", None), "RTZ", None)

    def as_f64(data, dtype) -> np.ndarray | None:
        if dtype == tl.float32:
            return np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.float32).astype(np.float64).reshape(data.shape)
        if dtype == tl.float16:
            return np.asarray(data, dtype=np.float64)
        return None

    def convert(data, src, dst, rounding_mode):
        if dst == tl.bfloat16 and src == tl.float32 and rounding_mode != rtz:
            u = np.ascontiguousarray(data).view(np.uint32).astype(np.uint64)
            r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            return np.where(np.isnan(np.ascontiguousarray(data).view(np.float32)), ((u >> 16) | 0x40).astype(np.uint16),
                            r).reshape(np.shape(data))
        if dst in tables and (x := as_f64(data, src)) is not None:
            (values, codes), nan_code = tables[dst]
            return _round_to_table(x, values, codes, nan_code, rounding_mode == rtz).reshape(np.shape(data))
        return original(data, src, dst, rounding_mode)

    return convert
