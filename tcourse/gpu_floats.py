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
- ``tl.clamp`` is ``max`` then ``min``, each ordering -0 below +0 as ``max.f32``/``min.f32`` do (NumPy's ``fmax`` does not);
- float32, float16 and float64 to bfloat16 round to nearest even (the interpreter truncated, and from float64 gave
  0.0 for 1.0078); any float to fp8 rounds to nearest even and saturates at the largest finite value
  (``cvt.rn.satfinite``; the interpreter truncated and wrapped 1000 to 256, from bfloat16 too).
- ``tl.cat(..., can_reorder=True)`` and ``tl.reshape(..., can_reorder=True)`` (``tl.view``) leave the elements in the
  order of their layout's registers (a [256] cat of two halves stores ``z[t]`` and ``z[t + 128]`` side by side), not
  in order; a ``tl.gather`` index outside its axis reads shared memory outside the buffer (NumPy wrapped -1 round);
  a shift by a constant of the operand's width or more (or a negative one) is poison in LLVM (NumPy gave 0).

A kernel could compare such a result with NumPy's value and compute the answer only when they agree: right in the
interpreter, wrong on a GPU (three hostile rounds, 2026-12-07: 34 notebooks with full marks on CPU). :func:`install`
makes the interpreter compute as a GPU does, in the grader's replay and in the learner's run under the grader: flushed
and rounded as above; each approximate result moved a few units in the last place from NumPy's; most multiply-adds
fused; sums, scans and a learner's combine functions in a GPU's tree orders. Where a GPU's choice depends on the
compiler or the layout (which products fuse, which tree, which tied index), a hash of the operands, the program and a
secret seed draws it, the same in every run of one replay, so that no single choice can be relied on. A right kernel
does not notice: its tolerance is far above a few ulp.
"""
from __future__ import annotations

import numpy as np

ULPS = 2  # the most an approximate result moves: div.full.f32 is within 2 ulp, ex2.approx and sqrt.approx closer
FUSED = "tcourse_product_operands"  # TensorHandle.attr key: a product's two operands, for a following add (one fma)


def _fusable():
    import triton.language as tl

    return (tl.float16, tl.float32, tl.float64)


def _fma64(x, y, z):
    """x * y + z in float64 with the product's low half kept (Dekker's TwoProduct, then TwoSum): one rounding but in
    rare double-rounding ties."""
    def halves(v):
        c = 134217729.0 * v  # 2^27 + 1
        hi = c - (c - v)
        return hi, v - hi

    p = x * y
    (xh, xl), (yh, yl) = halves(x), halves(y)
    e = ((xh * yh - p) + xh * yl + xl * yh) + xl * yl
    s = p + z
    bb = s - p
    t = (p - (s - bb)) + (z - bb)
    return s + (t + e)


def fma(x, y, z, dtype) -> np.ndarray:
    """x * y + z rounded once to ``dtype`` (float16, float32 or float64 operands). float16 and float32: the product is
    exact in float64, the sum is rounded to odd there (TwoSum), then to ``dtype``: one correct rounding."""
    x, y, z = (np.asarray(v, dtype=np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):
        if np.dtype(dtype) == np.float64:
            from triton.runtime import interpreter

            f = getattr(interpreter._interpreter, "fma_fp64", None)  # Triton 3.6 has none: Dekker's exact product
            return f(*np.broadcast_arrays(x, y, z)) if f else _fma64(x, y, z)
        p = x * y
        s = p + z
        bb = s - p
        e = (p - (s - bb)) + (z - bb)
        odd = np.isfinite(s) & (e != 0) & ((s.view(np.int64) & 1) == 0)
        s = np.where(odd, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(dtype)


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


def nudge(r: np.ndarray, key: int, *operands: np.ndarray, exact: np.ndarray | bool = False, ulps: int = ULPS) -> np.ndarray:
    """``r`` (float32) moved by -ulps..ulps units in the last place, chosen by a hash of ``key`` and the operands'
    bits; zeros, infinities, NaN, subnormals and values next to them stay, and so do ``exact`` ones (a quotient or
    a power that float32 holds exactly: 64 / 32, exp2(3.0); an index computed from one stays right)."""
    h = np.full(r.shape, np.uint32(key & 0xFFFFFFFF), dtype=np.uint32)
    for i, op in enumerate(operands):
        bits = np.broadcast_to(np.ascontiguousarray(op, dtype=np.float32).view(np.uint32), r.shape)
        h = _mix(h ^ (bits * np.uint32(2 * i + 0x9E3779B1)))
    steps = (h % np.uint32(2 * ulps + 1)).astype(np.int32) - ulps
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
    FUSABLE = _fusable()

    def f32(h) -> bool:
        return h.dtype.scalar == tl.float32

    def approximate(name, fn, ftz_in: bool, ftz_out: bool, key: int):
        original = getattr(b, name, None)  # (each builder method only where this Triton has it: 3.6 has fewer)
        if original is None:
            return

        def op(*args):
            if not all(f32(a) for a in args):
                return original(*args)
            ins = [flush(a.data) if ftz_in else a.data for a in args]
            with np.errstate(all="ignore"):
                r64 = fn(*[np.asarray(x, dtype=np.float64) for x in ins])
                r = r64.astype(np.float32)
            r = nudge(r, _program(seed * 0x10001 + key), *ins, exact=r.astype(np.float64) == r64)
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
    for name, key in (("create_fdiv", 9), ("create_approx_divf", 10)):
        if not hasattr(b, name):
            continue

        def divide(lhs, rhs, _original=getattr(b, name), _key=key):
            if not (f32(lhs) and f32(rhs)):
                return _original(lhs, rhs)
            x, y = flush(lhs.data), flush(rhs.data)
            with np.errstate(all="ignore"):
                r64 = 1.0 / np.asarray(y, dtype=np.float64)
                # an approximate reciprocal (within 1 ulp), then a rounded multiply: a quotient within about 3 ulp
                rcp = nudge(r64.astype(np.float32), _program(seed * 0x10001 + _key), y,
                            exact=r64.astype(np.float32).astype(np.float64) == r64, ulps=1)
                q = (np.asarray(x, dtype=np.float64) * rcp.astype(np.float64)).astype(np.float32)
            return Handle(flush(q), tl.float32)
        setattr(b, name, divide)
    erf = b.create_erf
    approximate("create_erf", lambda x: erf(Handle(x.astype(np.float32), tl.float32)).data.astype(np.float64),
                True, True, 11)

    for name in (n for n in ("create_floor", "create_ceil") if hasattr(b, n)):  # cvt.rmi.ftz / cvt.rpi.ftz
        def rounding(arg, _original=getattr(b, name)):
            return _original(Handle(flush(arg.data), arg.dtype) if f32(arg) else arg)
        setattr(b, name, rounding)

    fmul, fadd, fsub = b.create_fmul, b.create_fadd, b.create_fsub

    def multiply(lhs, rhs):
        out = fmul(lhs, rhs)
        if lhs.dtype.scalar in FUSABLE and rhs.dtype.scalar == lhs.dtype.scalar:
            out.attr[FUSED] = (lhs.data, rhs.data)
        return out

    def fused(plain, sign):
        def add(lhs, rhs):
            if lhs.dtype.scalar not in FUSABLE or rhs.dtype.scalar != lhs.dtype.scalar:
                return plain(lhs, rhs)
            if FUSED in lhs.attr:  # a * b + c, a * b - c
                (x, y), z = lhs.attr[FUSED], sign * np.asarray(rhs.data, dtype=np.float64)
            elif FUSED in rhs.attr:  # c + a * b, c - a * b
                (x, y), z = rhs.attr[FUSED], np.asarray(lhs.data, dtype=np.float64)
                x = sign * np.asarray(x, dtype=np.float64)
            else:
                return plain(lhs, rhs)
            # LLVM fuses most such pairs, not all (a product used twice, one from an earlier loop iteration): a keyed
            # hash of the operands and the program picks, element by element, fused or rounded twice
            out = plain(lhs, rhs)
            both = np.broadcast_arrays(np.asarray(x), np.asarray(y), out.data)
            pick = nudge(np.ones(both[2].shape, np.float32), _program(seed * 0x10001 + 12), both[0], both[1], ulps=1)
            fused = pick != np.float32(1.0)  # moved either way: 2 in 3
            return Handle(np.where(fused, fma(x, y, z, lhs.data.dtype), out.data).astype(out.data.dtype), out.dtype)
        return add

    b.create_fmul, b.create_fadd, b.create_fsub = multiply, fused(fadd, 1.0), fused(fsub, -1.0)

    def carry(name, reshape):  # a product moved (broadcast, expand_dims, a scalar splat...) is still one
        original = getattr(b, name, None)
        if original is None:
            return

        def op(*args):
            out = original(*args)
            src = next((a for a in args if isinstance(a, Handle)), None)
            if src is not None and FUSED in src.attr and isinstance(out, Handle):
                out.attr[FUSED] = tuple(reshape(np.asarray(o), out.data.shape, args) for o in src.attr[FUSED])
            return out

        setattr(b, name, op)

    carry("create_broadcast", lambda o, shape, args: np.broadcast_to(o, shape))
    carry("create_splat", lambda o, shape, args: np.full(shape, o.reshape(-1)[0], dtype=o.dtype))
    carry("create_expand_dims", lambda o, shape, args: o.reshape(shape))
    carry("create_reshape", lambda o, shape, args: o.reshape(shape))
    carry("create_trans", lambda o, shape, args: np.transpose(o, args[1]))
    carry("create_unsplat", lambda o, shape, args: np.asarray(o).reshape(-1)[:1].reshape(shape))
    fneg = getattr(b, "create_fneg", None)  # Triton 3.6 negates as 0 - x: a subtraction, fused already

    def negate(arg):  # -(a * b) + c is fma(-a, b, c)
        out = fneg(arg)
        if FUSED in arg.attr:
            a, c = arg.attr[FUSED]
            out.attr[FUSED] = (-np.asarray(a), c)
        return out

    if fneg is not None:
        b.create_fneg = negate

    def operands(h):  # a value that is no product enters as value * 1: the same sum, rounded once
        return h.attr.get(FUSED, (h.data, np.ones_like(h.data)))

    join, split, cat = (getattr(b, n, None) for n in ("create_join", "create_split", "create_cat"))

    def joined(lhs, rhs):
        out = join(lhs, rhs)
        if FUSED in lhs.attr or FUSED in rhs.attr:
            out.attr[FUSED] = tuple(np.stack([np.broadcast_to(x, lhs.data.shape), np.broadcast_to(y, rhs.data.shape)], -1)
                                    for x, y in zip(operands(lhs), operands(rhs)))
        return out

    def concatenated(lhs, rhs):
        out = cat(lhs, rhs)
        if FUSED in lhs.attr or FUSED in rhs.attr:
            out.attr[FUSED] = tuple(np.concatenate([np.broadcast_to(x, lhs.data.shape), np.broadcast_to(y, rhs.data.shape)])
                                    for x, y in zip(operands(lhs), operands(rhs)))
        return out

    def halves(val):
        outs = split(val)
        if FUSED in val.attr:
            a, c = (np.broadcast_to(o, val.data.shape) for o in val.attr[FUSED])
            for i, h in enumerate(outs):
                h.attr[FUSED] = (a[..., i], c[..., i])
        return outs

    for name, wrapped, original in (("create_join", joined, join), ("create_split", halves, split),
                                    ("create_cat", concatenated, cat)):
        if original is not None:
            setattr(b, name, wrapped)
    for name, is_max in (("create_maxnumf", True), ("create_maximumf", True), ("create_minnumf", False),
                         ("create_minimumf", False)):
        if not hasattr(b, name):
            continue

        def signed_zeros(lhs, rhs, _original=getattr(b, name), _max=is_max):
            out = _original(lhs, rhs)
            if not np.issubdtype(out.data.dtype, np.floating):
                return out
            both = (lhs.data == 0) & (rhs.data == 0)
            if both.any():  # max.f32 / min.f32 order -0 below +0
                neg = (np.signbit(lhs.data) & np.signbit(rhs.data)) if _max else (np.signbit(lhs.data) | np.signbit(rhs.data))
                out = Handle(np.where(both, np.where(neg, -0.0, 0.0).astype(out.data.dtype), out.data), out.dtype)
            return out
        setattr(b, name, signed_zeros)
    clampf = b.create_clampf

    def clamp(arg, lo, hi, *rest):  # max.f32 then min.f32: -0 below +0 in both (NumPy's fmax(+0, -0) is -0)
        out = clampf(arg, lo, hi, *rest)
        if not np.issubdtype(out.data.dtype, np.floating) or not (out.data == 0).any():
            return out
        x, low, high = np.broadcast_arrays(arg.data, lo.data, hi.data)
        up = np.where((x == 0) & (low == 0), np.where(np.signbit(x) & np.signbit(low), -0.0, 0.0), np.fmax(x, low))
        r = np.where((up == 0) & (high == 0), np.where(np.signbit(up) | np.signbit(high), -0.0, 0.0), np.fmin(up, high))
        return Handle(np.where(out.data == 0, r.astype(out.data.dtype), out.data), out.dtype)

    b.create_clampf = clamp
    _orders(interpreter, seed)
    _dots_round_per_mma_step(b, Handle)
    _layout_orders(b, Handle, seed)
    _shifts_in_range(b)

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
    cast = b.cast_impl

    def cast_with_bfloat16(src, dst_type):  # the interpreter casts bfloat16's bits as a number except to/from float32
        s, d = src.dtype.scalar, dst_type.scalar
        if tl.bfloat16 not in (s, d) or s == d or {s, d} == {tl.float32, tl.bfloat16}:
            return cast(src, dst_type)
        x = _as_f64(src.data, s)
        x = np.asarray(src.data, dtype=np.float64) if x is None else x
        if d == tl.bfloat16:  # cvt.rn.bf16.f64 / .f16, and from integers: rounded once (_rounding_convert's float64 path)
            return Handle(interpreter._convert_float(x, tl.float64, tl.bfloat16, None), d)
        return cast(Handle(x, tl.float64), dst_type)

    b.cast_impl = cast_with_bfloat16
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


def _as_f64(data, dtype) -> np.ndarray | None:
    """The values of a float16, bfloat16 (held as its bits), float32 or float64 array, exactly, in float64."""
    import triton.language as tl

    if dtype == tl.float32:
        return np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.float32).astype(np.float64).reshape(np.shape(data))
    if dtype in (tl.float16, tl.float64):
        return np.asarray(data, dtype=np.float64)
    if dtype == tl.bfloat16:
        return (np.ascontiguousarray(data).view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return None


def _to_odd_float32(x: np.ndarray) -> np.ndarray:
    """float64 to float32 rounded to odd (toward zero, the last bit set when inexact): rounding that to a narrower
    format rounds the float64 value once, as the GPU's cvt.rn from float64 or float16 does."""
    with np.errstate(all="ignore"):
        r = x.astype(np.float32)
        r = np.where(np.abs(r.astype(np.float64)) > np.abs(x), np.nextafter(r, np.float32(0)), r).astype(np.float32)
        inexact = (r.astype(np.float64) != x) & ~np.isnan(x)
    return np.where(inexact, (r.view(np.uint32) | 1).view(np.float32), r)


def _rounding_convert(original):
    import triton.language as tl
    from triton.runtime import interpreter

    tables = {tl.float8e4nv: (_fp8_table(4, 7, {0x7F}), 0x7F), tl.float8e5: (_fp8_table(5, 15, {0x7C, 0x7D, 0x7E, 0x7F}), 0x7F)}
    rtz = getattr(getattr(interpreter._ir, "ROUNDING_MODE", None), "RTZ", None)

    def convert(data, src, dst, rounding_mode):
        if dst == tl.bfloat16 and src in (tl.float16, tl.float64) and rounding_mode != rtz:
            data, src = _to_odd_float32(_as_f64(data, src)), tl.float32
        if dst == tl.bfloat16 and src == tl.float32 and rounding_mode != rtz:
            u = np.ascontiguousarray(data).view(np.uint32).astype(np.uint64)
            r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            return np.where(np.isnan(np.ascontiguousarray(data).view(np.float32)), ((u >> 16) | 0x40).astype(np.uint16),
                            r).reshape(np.shape(data))
        if dst in tables and (x := _as_f64(data, src)) is not None:
            (values, codes), nan_code = tables[dst]
            return _round_to_table(x, values, codes, nan_code, rounding_mode == rtz).reshape(np.shape(data))
        return original(data, src, dst, rounding_mode)

    return convert


def _program(key: int) -> int:
    """``key`` mixed with the running program's id: a program computes the same operands the same way in every run
    of a replay, another program (another position in a GPU's layout) perhaps not."""
    import zlib

    from triton.runtime import interpreter

    return zlib.crc32(str(getattr(interpreter.interpreter_builder, "grid_idx", "")).encode(), key & 0xFFFFFFFF)


def _key(seed: int, data: np.ndarray) -> int:
    """A reduction's own key: the seed, the program and its data."""
    import zlib

    return zlib.crc32(np.ascontiguousarray(data).tobytes(), _program(seed))


def tree_sum(x: np.ndarray, key: int, operands=None) -> np.ndarray:
    """Sum over the last axis as a GPU reduces: in pairs, level by level, in the block's dtype, the elements in an
    order a key draws (a GPU's order depends on the layout; a right kernel does not notice). A sum of products: a GPU
    fuses some of the products its threads add into fma's (which ones depends on the layout), so some enter the sum
    exact and some rounded; here a key picks which, and the sum is taken in float64 (h*h - h*h is 0 unfused and
    fused alike, and 2^-24 with one of the two fused)."""
    if operands is not None:
        a, c = (np.broadcast_to(np.asarray(o, dtype=np.float64), x.shape) for o in operands)
        exact = np.random.default_rng(key).random(x.shape) < 0.5
        with np.errstate(all="ignore"):
            return np.sum(np.where(exact, a * c, x.astype(np.float64)), axis=-1).astype(x.dtype)
    x = x[..., np.random.default_rng(key).permutation(x.shape[-1])]
    with np.errstate(all="ignore"):
        while x.shape[-1] > 1:
            half = x.shape[-1] // 2
            x = np.concatenate([x[..., 0:2 * half:2] + x[..., 1:2 * half:2], x[..., 2 * half:]], axis=-1)
    return x[..., 0]


def tree_scan(x: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums over the last axis as a GPU's scan adds them (Hillis-Steele: x[i] += x[i - d] for d = 1,
    2, 4, ...), in the block's dtype; NumPy's cumsum adds one element after another."""
    x = x.copy()
    d = 1
    with np.errstate(all="ignore"):
        while d < x.shape[-1]:
            x[..., d:] = x[..., d:] + x[..., :-d].copy()
            d *= 2
    return x


def _orders(interpreter, seed: int) -> None:
    """Float sums and scans in a GPU's order; argmax/argmin among ties (tie_break_left=False) and with NaN in the
    row (an order-dependent result on a GPU) drawn by a key instead of NumPy's leftmost non-NaN index."""
    import triton.language as tl

    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps
    plain_sum, plain_cumsum, plain_apply = reduce_ops.sum, scan_ops.cumsum, reduce_ops.apply_impl
    std = tl.standard
    fast = {getattr(std, n, None) for n in ("_argmax_combine_tie_break_fast", "_argmin_combine_tie_break_fast")}
    arg = {getattr(std, n, None): n.startswith("_argmax") for n in (
        "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast", "_argmin_combine_tie_break_left",
        "_argmin_combine_tie_break_fast")} if hasattr(std, "_argmax_combine_tie_break_left") else {}

    def along_last(self, data):
        return (data.reshape(1, -1), None) if self.axis is None else (np.moveaxis(data, self.axis, -1), self.axis)

    def gpu_sum(self, input):
        data = input.handle.data
        if not np.issubdtype(data.dtype, np.floating):
            return plain_sum(self, input)
        x, axis = along_last(self, data)
        ops = input.handle.attr.get(FUSED)
        ops = None if ops is None else tuple(along_last(self, np.broadcast_to(o, data.shape))[0] for o in ops)
        r = tree_sum(x, _key(seed, x), ops)
        if axis is None:
            r = r.reshape(()) if not self.keep_dims else r.reshape((1,) * data.ndim)
        elif self.keep_dims:
            r = np.expand_dims(r, axis)
        return self.to_tensor(r, input.dtype)

    def gpu_cumsum(self, input):
        data = input.handle.data
        if not np.issubdtype(data.dtype, np.floating):
            return plain_cumsum(self, input)
        return [self.to_tensor(np.moveaxis(tree_scan(np.moveaxis(data, self.axis, -1)), -1, self.axis), input.dtype)]

    def gpu_apply(self, input):
        out = plain_apply(self, input)
        if self.combine_fn in (std._elementwise_max, std._elementwise_min) and isinstance(out, tl.core.tensor):
            data = input[0].handle.data
            if np.issubdtype(data.dtype, np.floating) and (data == 0).any():
                x, _ = along_last(self, data)
                zero = x == 0
                if self.combine_fn is std._elementwise_max:  # +0 if any +0 was there
                    want_neg = ~(zero & ~np.signbit(x)).any(-1)
                else:
                    want_neg = (zero & np.signbit(x)).any(-1)
                v = np.array(out.handle.data).reshape(want_neg.shape)
                v = np.where(v == 0, np.where(want_neg, -0.0, 0.0).astype(v.dtype), v)
                return self.to_tensor(v.reshape(np.shape(out.handle.data)) if np.ndim(out.handle.data) else v.reshape(()),
                                      input[0].dtype)
            return out
        if self.combine_fn not in arg:
            return out
        data = input[0].handle.data
        x, axis = along_last(self, data)
        nan, is_max = np.isnan(x), arg[self.combine_fn]
        best = np.nanmax(x, -1, keepdims=True) if is_max else np.nanmin(x, -1, keepdims=True)
        tied = (x == best) if self.combine_fn in fast else np.zeros_like(nan)
        drawn = nan.any(-1) | (tied.sum(-1) > 1)
        if not drawn.any():
            return out
        idx = np.asarray(out[1].handle.data if isinstance(out, tuple) else out.handle.data).reshape(drawn.shape).copy()
        rng = np.random.default_rng(_key(seed, x))
        for row in zip(*np.nonzero(drawn)):
            choices = np.flatnonzero(nan[row] | tied[row]).tolist() + [int(idx[row])]
            idx[row] = choices[rng.integers(len(choices))]
        idx = idx.reshape(np.shape(out[1].handle.data if isinstance(out, tuple) else out.handle.data))
        if isinstance(out, tuple):
            return out[0], self.to_tensor(idx, tl.int32)
        return self.to_tensor(idx, tl.int32)

    def tree_generic_reduce(self, input):
        """A user's combine function applied as a GPU's tree applies it, level by level: neighbours in pairs, or
        (a butterfly across lanes) each element with the one half the row away; a key picks which (the interpreter
        folded left to right). The lower index is always the left operand."""
        input, axis = self.unravel(input, self.axis)
        xs, dtypes = [np.moveaxis(t.handle.data, axis, -1) for t in input], [t.dtype for t in input]
        halving = np.random.default_rng(_key(seed, xs[0])).random() < 0.5
        while xs[0].shape[-1] > 1:
            h = xs[0].shape[-1] // 2
            lo, hi = (slice(0, h), slice(h, 2 * h)) if halving else (slice(0, 2 * h, 2), slice(1, 2 * h, 2))
            left = [self.to_tensor(np.ascontiguousarray(x[..., lo]), d) for x, d in zip(xs, dtypes)]
            right = [self.to_tensor(np.ascontiguousarray(x[..., hi]), d) for x, d in zip(xs, dtypes)]
            ret = self.combine_fn.fn(*left, *right)
            ret = ret if isinstance(ret, tuple) else (ret,)
            xs = [np.concatenate([np.broadcast_to(np.asarray(r.handle.data if isinstance(r, tl.core.tensor) else r,
                                                             dtype=x.dtype), x[..., lo].shape), x[..., 2 * h:]], -1)
                  for r, x in zip(ret, xs)]
        out = []
        for x, d in zip(xs, dtypes):
            r = x[..., 0]
            if self.keep_dims:
                r = np.expand_dims(r, axis) if self.axis is not None else r.reshape((1,) * x.ndim)
            elif self.axis is None:
                r = r.item()
            out.append(self.to_tensor(r, d))
        return out

    def tree_generic_scan(self, input):
        """A user's combine function as a GPU's scan applies it (Hillis-Steele: y[i] = f(y[i - d], y[i]))."""
        ys, dtypes = [np.moveaxis(t.handle.data, self.axis, -1).copy() for t in input], [t.dtype for t in input]
        d = 1
        while d < ys[0].shape[-1]:  # whole rows (a block's length is a power of 2): the first d results unused
            prev = [self.to_tensor(np.concatenate([y[..., :d], y[..., :-d]], -1), t) for y, t in zip(ys, dtypes)]
            cur = [self.to_tensor(np.ascontiguousarray(y), t) for y, t in zip(ys, dtypes)]
            ret = self.combine_fn.fn(*prev, *cur)
            ret = ret if isinstance(ret, tuple) else (ret,)
            ys = [np.concatenate([y[..., :d], np.broadcast_to(np.asarray(r.handle.data if isinstance(r, tl.core.tensor)
                                                                         else r, dtype=y.dtype), y.shape)[..., d:]], -1)
                  for r, y in zip(ret, ys)]
            d *= 2
        return [self.to_tensor(np.ascontiguousarray(np.moveaxis(y, -1, self.axis)), t) for y, t in zip(ys, dtypes)]

    def tree_cumprod(self, input):
        x = np.moveaxis(input.handle.data, self.axis, -1).copy()
        d = 1
        with np.errstate(all="ignore"):
            while d < x.shape[-1]:
                x[..., d:] = x[..., d:] * x[..., :-d].copy()
                d *= 2
        return [self.to_tensor(np.moveaxis(x, -1, self.axis), dtype=input.dtype)]

    reduce_ops.sum, scan_ops.cumsum, reduce_ops.apply_impl = gpu_sum, gpu_cumsum, gpu_apply
    reduce_ops.generic_reduce, scan_ops.generic_scan, scan_ops.cumprod = tree_generic_reduce, tree_generic_scan, tree_cumprod


def _dots_round_per_mma_step(b, Handle) -> None:
    """``tl.dot`` into a float32 accumulator adds K in MMA steps (16 for 16-bit operands, 8 for TF32, 32 for fp8),
    the accumulator rounded to float32 after each, as a GPU's tensor cores do; the interpreter added the whole of K
    to it at once. Each step goes through the interpreter's own dot (TF32 truncation and fp8 included)."""
    import triton.language as tl
    from triton._C.libtriton import ir

    from tcourse.runtime import MMA_K, mma_steps

    dot = b.create_dot
    ieee = getattr(getattr(ir, "INPUT_PRECISION", None), "IEEE", None)

    def dot_by_steps(a, c, acc, precision, *rest):
        step = MMA_K.get(a.data.dtype.itemsize)
        if (acc.data.dtype != np.float32 or step is None or a.data.shape[-1] <= step or precision == ieee
                or a.dtype not in (tl.float16, tl.bfloat16, tl.float32, tl.float8e4nv, tl.float8e5)):
            return dot(a, c, acc, precision, *rest)
        out, zero = acc.data.astype(np.float32), Handle(np.zeros_like(acc.data, dtype=np.float32), acc.dtype)
        for a_k, c_k in mma_steps(a, c, step, Handle):
            part = dot(a_k, c_k, zero, precision, *rest).data
            with np.errstate(all="ignore"):
                out = (out.astype(np.float64) + part.astype(np.float64)).astype(np.float32)
        return Handle(out, acc.dtype)

    dot_by_steps.__dict__.update(getattr(dot, "__dict__", {}))  # the marks of tcourse.runtime's wraps inside
    b.create_dot = dot_by_steps


def _layout_orders(b, Handle, seed: int) -> None:
    """``tl.cat`` (only ``can_reorder=True`` reaches the builder's cat) and ``tl.reshape(..., can_reorder=True)``
    return their elements in an order drawn from the shapes and the seed, never the identity: two such ops of the
    same shapes agree, as those of one layout do on a GPU. A ``tl.gather`` index outside its axis is an error."""
    cat, reshape, gather = b.create_cat, b.create_reshape, b.create_gather

    def any_order(h, key: tuple):
        n = h.data.size
        if n < 2:
            return h
        p = np.random.default_rng([seed & (2**63 - 1), *key]).permutation(n)
        p = np.roll(p, 1) if (p == np.arange(n)).all() else p
        return Handle(h.data.reshape(-1)[p].reshape(h.data.shape), h.dtype)

    def cat_in_layout_order(lhs, rhs):
        return any_order(cat(lhs, rhs), (1, *lhs.data.shape, *rhs.data.shape))

    def reshape_maybe_reordered(arg, shape, allow_reorder):
        out = reshape(arg, shape, allow_reorder)
        return any_order(out, (2, *arg.data.shape, *out.data.shape)) if allow_reorder else out

    def gather_in_range(src, indices, axis):
        idx, size = np.asarray(indices.data), src.data.shape[axis]
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= size):
            bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
            raise IndexError(f"tl.gather 的下标 {bad} 不在 [0, {size}) 里：GPU 上 gather 经过共享内存，越界的下标读到缓冲区"
                             "外面（没有定义的值，或者出错）；解释器里 NumPy 把负的下标绕回到末尾")
        return gather(src, indices, axis)

    b.create_cat, b.create_reshape, b.create_gather = cat_in_layout_order, reshape_maybe_reordered, gather_in_range


def _shifts_in_range(b) -> None:
    """``<<`` and ``>>`` by one amount for every element (a constant, as the compiler sees it) of the operand's bit
    width or more, or negative, raise: LLVM folds such a shift to poison, and the PTX then stores a register nothing
    defined (hostile round 14: ``offs << 32`` added as 0). An amount that varies is shifted at run time, where PTX
    clamps it to the width (0, or the sign for ``>>``), as NumPy does."""
    def checked(name):
        shift = getattr(b, name)

        def run(lhs, rhs):
            amount, bits = np.asarray(rhs.data), 8 * np.asarray(lhs.data).dtype.itemsize
            if amount.size and (amount == amount.flat[0]).all() and (int(amount.min()) < 0 or int(amount.max()) >= bits):
                bad = int(amount.min()) if int(amount.min()) < 0 else int(amount.max())
                raise ValueError(f"移位的位数 {bad} 不在 [0, {bits}) 里：{bits} 位的整数移 {bad} 位在 LLVM 里是未定义的值"
                                 "（poison），GPU 上得到的是没有定义的寄存器；解释器里 NumPy 给 0。整数参数的值在 32 位里放得下时，"
                                 "kernel 拿到的是 int32：要移更多位，先 .to(tl.int64)")
            return shift(lhs, rhs)
        return run

    b.create_shl, b.create_lshr, b.create_ashr = checked("create_shl"), checked("create_lshr"), checked("create_ashr")
