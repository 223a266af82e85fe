"""How an exercise declares what it is graded on, inside its own source file.

Everything about one exercise sits in ``grader/exercise_src/<id>.py``: the text, the stub, the
solution, the plain-torch spec (a ``role=given`` cell whose id ends in ``-spec``) and one
``role=grading`` cell that is never put into a notebook. The grading cell runs in the grader's own
process, with the spec cells' definitions already in its namespace, and must bind ``EXERCISE``::

    # %% id=ex02-grading role=grading
    from grader.spec import Case, Exercise, Tensor, sizes

    def cases(device, rng):
        ...  # list[Case]; rng is random.Random(secret seed of this run): draw the hidden sizes from it

    EXERCISE = Exercise(title="...", func="softmax", reference=softmax_spec, cases=cases,
                        tolerances={"float32": (1e-6, 1e-5), "float16": (1e-3, 1e-2)})

The reference is called like the learner's function (same positional arguments and keywords, the
outputs left out, and keywords it has no parameter for, such as block sizes, left out too), with every
tensor contiguous, in float64 (an integer tensor in int64); it returns one tensor per output
(a tuple when there are several). Nothing here runs in the learner's kernel.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
ODD_LAYOUTS = ("transposed_padded", "step2")  # strides that are neither (N, 1), (N + 3, 1) nor (1, M)
LAYOUTS = ("contig", "padded", "transposed") + ODD_LAYOUTS

def _signed_zeros(g, shape):
    """randn with about a fifth of the values -0.0 and a tenth +0.0: a copy that goes through arithmetic (x + 0) turns
    -0.0 into +0.0, which only a bit-for-bit comparison sees."""
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    return torch.randn(shape, generator=g, dtype=torch.float64).masked_fill(u < 0.2, -0.0).masked_fill((u >= 0.2) & (u < 0.3), 0.0)


def _non_finite(g, shape):
    u = torch.rand(shape, generator=g, dtype=torch.float64)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    return x.masked_fill(u < 0.1, float("inf")).masked_fill((u >= 0.1) & (u < 0.2), float("-inf")).masked_fill(
        (u >= 0.2) & (u < 0.3), float("nan"))


def _one_inf(g, shape):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    at = [int(torch.randint(0, d, (1,), generator=g)) for d in shape[:-1]]
    x[(*at, int(torch.randint(0, max(1, shape[-1] // 2), (1,), generator=g)))] = float("inf")
    return x


FILLS: dict[str, Callable] = {
    "randn": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64),
    "large": lambda g, shape: 50 * torch.randn(shape, generator=g, dtype=torch.float64),
    "offset": lambda g, shape: 1000 + torch.randn(shape, generator=g, dtype=torch.float64),
    # each row (last dim) shifted by its own amount in [-400, 400]: no one shift for all rows keeps exp() finite
    "row_offsets": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64)
    + 400 * (2 * torch.rand((*shape[:-1], 1), generator=g, dtype=torch.float64) - 1),
    "weight": lambda g, shape: 1 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64),
    "positive": lambda g, shape: torch.rand(shape, generator=g, dtype=torch.float64),
    # integers over the whole int32 range, most above 2^24 in size: float32 cannot hold them
    "full_int32": lambda g, shape: torch.randint(-2**31, 2**31, shape, generator=g, dtype=torch.int64).double(),
    # integers within +-2^29, most above 2^24 in size: float32 cannot hold them, and a sum of two stays an int32
    "half_int32": lambda g, shape: torch.randint(-2**29, 2**29, shape, generator=g, dtype=torch.int64).double(),
    # integers over the whole int64 range, most above 2^53 in size: float64 cannot hold them (drawn and carried as
    # int64: plan.draw keeps integer tensors in int64)
    "full_int64": lambda g, shape: torch.randint(-2**63, 2**63 - 1, shape, generator=g, dtype=torch.int64),
    # each row far below zero, shifted by -2e4 to -2e12 (log-uniform): "a very small number" such as -1e4 or -1e6 in
    # place of -inf is larger than all of a row's values
    "far_negative": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64)
    - 2e4 * 10 ** (8 * torch.rand((*shape[:-1], 1), generator=g, dtype=torch.float64)),
    # rising along each row from about 0 to about 400: the maximum of one part of a row is not the row's
    "ramp": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64)
    + torch.linspace(0, 400, shape[-1], dtype=torch.float64),
    # about +100 in the first half of the last dimension and -100 in the second: with "near_100" on the other
    # operand, every product is about +-1e4, partial sums pass float16's 65504 and the result is small
    "halves": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64)
    + 100 * torch.where(torch.arange(shape[-1]) < shape[-1] // 2, 1.0, -1.0).double(),
    "near_100": lambda g, shape: 100 + torch.randn(shape, generator=g, dtype=torch.float64),
    # about +-1e6: nineteen values in twenty past float16's 65504, which float32 (and TF32) hold
    "past_float16": lambda g, shape: 1e6 * torch.randn(shape, generator=g, dtype=torch.float64),
    "signed_zeros": _signed_zeros,
    # about +3000 in the first half of the rows (first dimension) and -3000 in the second: sums down a column pass
    # float16's 65504 after 22 rows, the column's total is small
    "row_halves": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64)
    + 3000 * torch.where(torch.arange(shape[0]) < shape[0] // 2, 1.0, -1.0).double().reshape(-1, *[1] * (len(shape) - 1)),
    # the first 55 % of each row -inf (masked positions), the rest finite: a row of 2000 starts with 1100 of them
    "neg_inf_head": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64).masked_fill(
        torch.arange(shape[-1]) < shape[-1] * 11 // 20, float("-inf")),
    # each row one value at the bottom of float32's range, -2^100 to -2^127 (half the rows -2^127, about -1.7e38):
    # every finite "very small number" a kernel may put in place of -inf (-1e30, -1e38) is above some row
    "float32_bottom": lambda g, shape: -(2.0 ** torch.where(
        torch.rand((*shape[:-1], 1), generator=g) < 0.5, 127, torch.randint(100, 127, (*shape[:-1], 1), generator=g)
    ).double()).expand(shape).clone(),
    # randn with one value in ten +inf, one -inf and one NaN
    "non_finite": _non_finite,
    # randn with one +inf, in a random row (first dimension) and the first half of the last: a 0 * inf (a reset
    # written acc * 0, a one-hot picked by a product) makes NaN where the result is inf, and a tensor of such NaNs
    # is no longer NaN everywhere as it is with "non_finite"
    "one_inf": _one_inf,
    # randn with 3e4 in each row's first column: a one-pass variance shifted by x[0] cancels there (ex05, ex10)
    "first_far": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64).index_fill(
        -1, torch.tensor([0]), 3e4),
}
# the tolerance of a "halves" @ "near_100" case: float32 partial sums of up to about 7e5 round by up to 0.03 at each
# step along K, so a result near 0 carries an error of a few units in any float32 accumulation order (a float16
# accumulator or a float16 dot result overflows to inf instead)
HALVES_TOL = (8.0, 1e-2)
# the tolerance of a float32 case with a "past_float16" operand: a right kernel's TF32 products are off by less than 2^-9
# of sum(|a||b|) (each operand truncated by under 2^-10 of itself; products of random signs cancel most of it), some
# 1e4 at 1e6 times randn; a value that passed through float16 anywhere is inf or NaN instead
PAST_FLOAT16_TOL = (1e5, 5e-2)


@dataclass(frozen=True)
class Tensor:
    """One input or output tensor.

    fill: a name of :data:`FILLS` or a function ``(generator, shape) -> float64 tensor`` (integer
    inputs: return integral values, float64 or int64). layout: ``contig``; ``padded`` (rows 3 elements further apart
    than their length, and the matrices of a batch 3 elements further apart than theirs);
    ``transposed`` (the last two dimensions of a contiguous tensor swapped, ``.transpose(-1, -2)``);
    ``transposed_padded`` and ``step2`` (strides that are neither of those: see ``buffers.layout_strides``).
    dtype: ``None`` means the case's dtype.
    """

    name: str
    shape: tuple[int, ...]
    fill: str | Callable = "randn"
    layout: str = "contig"
    dtype: str | None = None

    def dtype_in(self, case: "Case") -> str:
        return self.dtype or case.dtype


@dataclass
class Case:
    """One test. ``mode``: ``tensor`` (call the learner's function on tensors, replay its Triton
    launches on fresh inputs), ``python`` (call a plain function with each tuple of ``calls`` and
    compare what it returns with the reference's), ``perf`` (GPU only: time the replayed launches)."""

    name: str
    dtype: str = "float32"
    inputs: tuple[Tensor, ...] = ()
    scalars: dict = field(default_factory=dict)
    call: tuple[str, ...] = ()        # positional arguments: input or scalar names
    kwargs: tuple[str, ...] = ()      # scalar names passed by keyword
    out_shape: tuple[int, ...] = ()   # one output called ``out``; or give ``outputs``
    outputs: tuple[Tensor, ...] = ()  # each passed to the learner's function by keyword (name=view)
    mode: str = "tensor"
    func: str = ""                    # the learner's function; defaults to the exercise's
    points: float = 1.0
    gpu_only: bool = False
    public: bool = False              # run by the learner's self-check (fixed seed, in their notebook)
    hidden: bool = False              # drawn per run from the secret seed: students see it as "hidden"
    hint: str = ""                    # what the case is about, shown when it fails
    tol: tuple[float, float] | None = None  # (atol, rtol) for this case instead of the exercise's
    calls: tuple = ()                 # python mode: argument tuples
    perf: dict = field(default_factory=dict)  # perf mode: shapes, scalars, call, kwargs, nbytes/flops, tuning, ref_call
    order_check: bool = True          # CPU: also replay the grid with its programs interleaved (launches with atomics)
    max_programs: str = ""            # a scalar's name: one launch, with at most its value in programs (persistent)
    reference: Callable | None = None  # instead of the exercise's (a case of another function)
    bare: bool = False                # made by Exercise.cases_for: the outputs and optional keywords left out

    def __post_init__(self):
        if self.mode not in ("tensor", "python", "perf"):
            raise ValueError(f"{self.name}: unknown mode {self.mode!r}")
        if self.out_shape and not self.outputs:
            self.outputs = (Tensor("out", tuple(self.out_shape)),)
        for t in (*self.inputs, *self.outputs):
            if t.dtype_in(self) not in DTYPES or t.layout not in LAYOUTS:
                raise ValueError(f"{self.name}: tensor {t.name} has dtype {t.dtype_in(self)!r}, layout {t.layout!r}")
        if self.dtype == "bfloat16" or any(t.dtype == "bfloat16" for t in (*self.inputs, *self.outputs)):
            self.gpu_only = True  # bf16 under the interpreter is silently wrong
        if self.mode == "perf":
            self.gpu_only = True


@dataclass
class Exercise:
    """``cases(device, rng)`` lists the tests; ``forbid`` names torch ops that raise when the
    learner's code calls them (a clearer message than the replay's); ``needs`` says what a CPU run
    requires (for example ``"triton>=3.9"`` when older interpreters cannot run it).
    ``perf_ref`` names the tuned ``tcourse.kernels`` function whose speed is shown as information
    (the points are graded against the exercise's own solution: a textbook kernel); it is called with the
    perf case's ``ref_call`` inputs where the case gives them, else with the learner's ``call`` and ``kwargs``
    (``replay.perf_ref_call``). Empty: no tuned kernel computes what the exercise does."""

    title: str
    func: str = ""
    reference: Callable | None = None
    # dtype -> (atol, rtol); absent: exact. float32 through tl.dot is TF32 on a GPU and in the course's interpreter
    # (tcourse.runtime.float32_dots_read_tf32) alike: one tolerance for both
    tolerances: dict = field(default_factory=dict)
    cases: Callable[[str, random.Random], list[Case]] | None = None
    forbid: tuple[str, ...] = ()
    written: bool = False
    needs: str = ""
    perf_ref: str = ""
    reference_on_device: bool = False  # the reference calls a Triton kernel: on a GPU run, give it GPU tensors
    host_scratch: bool = True  # False: a buffer the wrapper filled with different values (a table) is not kept in the replay
    id: str = ""  # set by the registry from the file name

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype not in FLOAT_DTYPES:
            return (0.0, 0.0)
        return self.tolerances.get(dtype, (0.0, 0.0))

    def cases_for(self, device: str, seed: int) -> list[Case]:
        cs = [replace(c, func=c.func or self.func) for c in self.cases(device, random.Random(seed))]
        return cs + bare_cases(cs, self.reference)


BARE_TAG = "不传 out 和可选参数"  # in the name of each bare case
BARE_HINT = ("不传 out（和其他可选参数），函数要自己分配形状、dtype、device 都对的输出并返回它；"
             "可选参数的默认值要和题目给的签名一致。")


BARE_MAX_ELEMENTS = 1 << 18  # inputs of a bare case: one more interpreted call in the learner's notebook on CPU


def bare_cases(cases: list[Case], reference: Callable | None) -> list[Case]:
    """For each function with tensor cases, cases that call it the way a user would: the required arguments only,
    one for float32 and one for the next dtype in :data:`DTYPES` that its cases use (an output allocated as float32
    whatever the input is right only for float32). The outputs are left out (the function allocates and returns them), and so is
    every argument the spec takes with a default or does not take (``causal``, ``eps``, block sizes), by keyword or
    last in the positional ones: the reference then uses the spec's defaults, and the learner's function must use
    the same. Their launches are not replayed, so they count only when every other correctness case passed
    (``grade.py``). Each is made from the function's public case (else any) of its dtype whose sizes tell most
    apart, among those a CPU run also has."""
    import inspect

    def telling(c: Case):  # public first, then the sizes that tell most apart (no 1, unequal), then the larger
        dims = [d for t in c.inputs for d in t.shape]
        dims += [v for k, v in c.scalars.items() if k in c.call and type(v) is int]
        return (not c.public, -len({d for d in dims if d > 1}), -sum(math.prod(t.shape) for t in c.inputs))

    made, seen = [], {}  # function -> the dtypes it has bare cases for
    for c in sorted(cases, key=lambda c: (DTYPES.index(c.dtype) if c.dtype in DTYPES else len(DTYPES), telling(c))):
        if c.mode != "tensor" or not c.outputs or c.gpu_only or len(seen.get(c.func, ())) == 2 \
                or c.dtype in seen.get(c.func, ()) or sum(math.prod(t.shape) for t in c.inputs) > BARE_MAX_ELEMENTS:
            continue
        seen.setdefault(c.func, []).append(c.dtype)
        params = inspect.signature(c.reference or reference).parameters
        required = lambda k: k in params and params[k].default is inspect.Parameter.empty  # noqa: E731
        call = list(c.call)
        while call and call[-1] in params and not required(call[-1]):
            call.pop()
        kwargs = tuple(k for k in c.kwargs if required(k))
        shapes = " ".join(f"{t.name}{tuple(t.shape)}" for t in c.inputs) or " ".join(f"{k}={c.scalars[k]}"
                                                                                  for k in call)
        made.append(replace(c, name=f"{c.func}({', '.join(call + list(kwargs))}) {BARE_TAG}：{shapes} {c.dtype}",
                            call=tuple(call), kwargs=kwargs, bare=True, hint=BARE_HINT, max_programs="",
                            scalars={k: v for k, v in c.scalars.items() if k in call or k in kwargs}))
    return made


def sizes(rng: random.Random, lo: int, hi: int, k: int = 1, avoid: tuple[int, ...] = ()) -> list[int]:
    """``k`` distinct integers in [lo, hi] drawn from ``rng``, none of them in ``avoid``."""
    pool = [n for n in range(lo, hi + 1) if n not in avoid] if hi - lo < 100_000 else None
    if pool is not None:
        return rng.sample(pool, min(k, len(pool)))
    out: list[int] = []
    while len(out) < k:
        n = rng.randint(lo, hi)
        if n not in avoid and n not in out:
            out.append(n)
    return out


def near_multiples(rng: random.Random, bases=(64, 128, 256, 1024), k: int = 2, scale: tuple[int, int] = (1, 4),
                   offsets: tuple[int, ...] = (-1, 0, 1), above: int = 0):
    """``k`` sizes that are a multiple of one of ``bases`` or one off it (m*b - 1, m*b, m*b + 1), each larger than
    ``above``. ``offsets=(-1, 1)`` for a case about a tail (never a multiple), ``above`` for one about a size past a
    block (so that the case is what its hint says)."""
    out: list[int] = []
    for _ in range(50 * k):
        b, m, d = rng.choice(bases), rng.randint(*scale), rng.choice(offsets)
        if max(1, m * b + d) not in out and m * b + d > above:
            out.append(max(1, m * b + d))
        if len(out) == k:
            break
    return out

