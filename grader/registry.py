"""What each exercise is graded on: test cases, points, dtypes, tolerances, torch references.

Everything here runs in the grader's own process. A :class:`Case` is plain data (it travels to the
worker as JSON inside ``plan.json``); the reference of an exercise is a torch function of the case's
inputs, evaluated in float64 by :mod:`grader.compare`, never in the student's kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

CPU_DTYPES = ("float32", "float16")  # bf16 under the interpreter is silently wrong: GPU only


@dataclass(frozen=True)
class Tensor:
    """One input tensor: shape, how it is filled and how it is laid out in memory.

    layout: ``contig``; ``padded`` (rows of a 2-D tensor sit ``pad`` elements apart: stride(0) > shape[1]);
    ``transposed`` (a ``.t()`` view of a contiguous tensor, stride (1, M)).
    fill: ``randn``, ``large`` (randn * 50: exp() overflows without a max subtraction), ``offset``
    (1000 + randn: E[x^2] - E[x]^2 cancels), ``weight`` (1 + 0.1 randn).
    """

    name: str
    shape: tuple[int, ...]
    fill: str = "randn"
    layout: str = "contig"


@dataclass
class Case:
    name: str                      # shown to the student, e.g. "n=1025 float32"
    dtype: str                     # dtype of inputs and output
    inputs: tuple[Tensor, ...] = ()
    scalars: dict = field(default_factory=dict)
    call: tuple[str, ...] = ()     # positional arguments: input or scalar names
    kwargs: tuple[str, ...] = ()   # scalar names passed by keyword
    out_shape: tuple[int, ...] = ()
    mode: str = "tensor"           # tensor | python_map (call a plain function for every pid) | perf
    func: str = ""                 # student's function; defaults to the exercise's
    points: float = 1.0
    gpu_only: bool = False
    needs_launch: bool = True
    hint: str = ""                 # what this case is about, shown when it fails
    combos: tuple = ()             # python_map: (num_pid_m, num_pid_n, GROUP_M) triples
    perf: dict = field(default_factory=dict)  # perf: reference kernel name, sizes, bytes/flops
    tol: tuple[float, float] | None = None     # (atol, rtol) overriding the exercise's for this case


@dataclass
class Exercise:
    id: str
    title: str
    func: str = ""
    reference: Callable | None = None            # (inputs: dict[str, float64 tensor], scalars) -> tensor
    tolerances: dict = field(default_factory=dict)  # "float16" or "float32@cuda" -> (atol, rtol)
    poison: tuple[str, ...] = ()                   # torch ops that must not be called by the solution
    cases: Callable[[str], list[Case]] | None = None  # device -> cases
    written: bool = False                          # written answer: not auto-graded

    def tolerance(self, dtype: str, device: str) -> tuple[float, float]:
        return self.tolerances.get(f"{dtype}@{device}", self.tolerances[dtype])

    def cases_for(self, device: str) -> list[Case]:
        cs = self.cases(device)
        for c in cs:
            c.func = c.func or self.func
            c.gpu_only = c.gpu_only or c.dtype == "bfloat16"
        return cs


# --- references (float64 in, float64 out) -------------------------------------------------------

def _axpy(t, s):
    return s["a"] * t["x"] + t["y"]


def _softmax(t, s):
    return torch.softmax(t["x"], dim=-1)


def _matmul(t, s):
    return t["a"] @ t["b"]


def _layernorm(t, s):
    return torch.nn.functional.layer_norm(t["x"], t["x"].shape[-1:], t["weight"], t["bias"], s["eps"])


def _transpose(t, s):
    return t["x"].t()


def _attention(t, s):
    q, k, v = t["q"], t["k"], t["v"]
    scale = s.get("sm_scale") or q.shape[-1] ** -0.5
    p = (q @ k.transpose(-1, -2)) * scale
    if s["causal"]:
        S = q.shape[-2]
        p = p.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(p, dim=-1) @ v


def _swizzle_map(t, s):
    """Tile order of the GROUP_M swizzle: groups of GROUP_M rows, column by column inside a group."""
    m, n, g = s["num_pid_m"], s["num_pid_n"], s["GROUP_M"]
    order = [(pm, pn) for g0 in range(0, m, g) for pn in range(n) for pm in range(g0, min(g0 + g, m))]
    return torch.tensor(order, dtype=torch.float64).reshape(m * n, 2)


def swizzle_spec(num_pid_m: int, num_pid_n: int, GROUP_M: int) -> list[tuple[int, int]]:
    """``order[pid] == (pid_m, pid_n)`` for the swizzle (used by python_map cases)."""
    return [tuple(int(v) for v in row) for row in _swizzle_map({}, {"num_pid_m": num_pid_m, "num_pid_n": num_pid_n,
                                                                     "GROUP_M": GROUP_M}).tolist()]


# --- cases ----------------------------------------------------------------------------------------

def _perf(name, points=2.0, **perf):
    return Case(name=name, dtype=perf.pop("dtype"), mode="perf", points=points, gpu_only=True, perf=perf,
                hint="性能分：和参考 kernel 在同一次运行里用 do_bench 交替计时，按时间比给分（>=0.9 倍参考速度满分，<=0.5 倍 0 分）。")


def _axpy_cases(device):
    def one(n, dt, hint=""):
        return Case(f"n={n} {dt}", dt, (Tensor("x", (n,)), Tensor("y", (n,))), {"a": -1.75},
                    ("a", "x", "y"), out_shape=(n,), hint=hint)

    tail = "n 不是 BLOCK_SIZE 的整数倍：最后一个 program 只有一部分元素有效，tl.load/tl.store 都要 mask=offs < n。"
    cs = [one(1, "float32", "只有一个元素：grid 至少要有 1 个 program，而且要 mask。"), one(7, "float32", tail),
          one(1023, "float32", tail), one(1025, "float32", tail), one(4099, "float32", tail),
          one(100003, "float32", tail + "（较大的 n：grid 要用 triton.cdiv(n, BLOCK_SIZE)）"),
          one(7, "float16", tail), one(1025, "float16", tail), one(100003, "float16", tail)]
    if device == "cuda":
        cs += [one(1025, "bfloat16", tail), one(100003, "bfloat16", tail),
               _perf("性能 n=2^24 float32", ref="axpy", dtype="float32", shapes={"x": [1 << 24], "y": [1 << 24]},
                     scalars={"a": -1.75}, call=["a", "x", "y"], nbytes=3 * 4 * (1 << 24))]
    return cs


STRIDE_ROWS = "这个测试的行之间有空隙（x.stride(0) > n_cols）：行的起点要用 row * x.stride(0)，不要用 row * n_cols。"


def _softmax_cases(device):
    def one(m, n, dt, fill="randn", hint="", layout="contig"):
        tag = (" 大数值" if fill == "large" else "") + (" 行间有空隙" if layout == "padded" else "")
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout),), call=("x",), out_shape=(m, n),
                    hint=hint)

    tail = "列数不是 2 的幂：BLOCK_SIZE = triton.next_power_of_2(n_cols)，多出来的列要 mask，而且 other=-inf（不是 0）。"
    big = "这个测试的输入很大（约 ±150）：不先减去每行的最大值，exp 会溢出成 inf（数值不稳定）。"
    cs = [one(1, 1, "float32"), one(3, 7, "float32", hint=tail), one(4, 127, "float32", hint=tail),
          one(4, 129, "float32", hint=tail), one(17, 1000, "float32", hint=tail), one(9, 781, "float32", hint=tail),
          one(8, 333, "float32", "large", big), one(6, 100, "float32", hint=STRIDE_ROWS, layout="padded"),
          one(3, 7, "float16", hint=tail), one(17, 1000, "float16", hint=tail), one(8, 333, "float16", "large", big)]
    if device == "cuda":
        cs += [one(17, 1000, "bfloat16", hint=tail),
               _perf("性能 (4096, 4000) float32", ref="softmax", dtype="float32", shapes={"x": [4096, 4000]},
                     call=["x"], nbytes=2 * 4 * 4096 * 4000)]
    return cs


def _matmul_cases(device):
    def one(m, n, k, dt, a_layout="contig", b_layout="contig", hint=""):
        lay = {"padded": " a 行间有空隙", "transposed": " b 是转置视图"}
        tag = lay.get(a_layout, "") + lay.get(b_layout, "")
        return Case(f"M={m} N={n} K={k} {dt}{tag}", dt,
                    (Tensor("a", (m, k), layout=a_layout), Tensor("b", (k, n), layout=b_layout)),
                    call=("a", "b"), out_shape=(m, n), hint=hint)

    tail = "M/N/K 不是块大小的整数倍：A、B 的 tl.load 要按 M/N 和 K 两个方向 mask（other=0.0），C 的 tl.store 按 M/N mask。"
    stride = "这个测试的输入不是连续存放的：指针偏移必须用 a.stride(0)/a.stride(1)/b.stride(0)/b.stride(1)，不要假设 stride。"
    cs = [one(1, 1, 1, "float32", hint=tail), one(7, 13, 5, "float32", hint=tail),
          one(33, 31, 65, "float32", hint=tail), one(100, 60, 130, "float32", hint=tail),
          one(257, 129, 190, "float32", hint=tail), one(45, 37, 70, "float32", b_layout="transposed", hint=stride),
          one(30, 50, 40, "float32", a_layout="padded", hint=stride),
          one(33, 31, 65, "float16", hint=tail), one(100, 60, 130, "float16", hint=tail)]
    if device == "cuda":
        cs += [one(100, 60, 130, "bfloat16", hint=tail),
               _perf("性能 4096^3 float16", ref="matmul", dtype="float16", shapes={"a": [4096, 4096], "b": [4096, 4096]},
                     call=["a", "b"], flops=2 * 4096 ** 3,
                     tuning={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3})]
    return cs


def _swizzle_cases(device):
    def combos(pred):
        return tuple((m, n, g) for m in (1, 2, 3, 5, 8, 13) for n in (1, 4, 7) for g in (1, 2, 3, 4, 8) if pred(m, g))

    def py(name, pred, hint, pts):
        return Case(name, "int32", mode="python_map", func="pid_to_tile", combos=combos(pred), needs_launch=False,
                    points=pts, hint=hint)

    def kernel(m, n, g):
        return Case(f"kernel num_pid_m={m} num_pid_n={n} GROUP_M={g}", "int32", out_shape=(m * n, 2),
                    scalars={"num_pid_m": m, "num_pid_n": n, "GROUP_M": g}, call=("num_pid_m", "num_pid_n", "GROUP_M"),
                    func="swizzle_map", hint="kernel 里每个 program 用 tl.program_id(0) 算出 (pid_m, pid_n)，写到 out[pid, 0] 和 out[pid, 1]。")

    return [
        py("pid_to_tile GROUP_M=1", lambda m, g: g == 1, "GROUP_M=1 时每组只有一行，顺序就是按行：pid_m = pid // num_pid_n，pid_n = pid % num_pid_n。", 1.0),
        py("pid_to_tile num_pid_m 是 GROUP_M 的倍数", lambda m, g: g > 1 and m % g == 0,
           "组内按列走：先走完一组里的 GROUP_M 行，再换下一列。", 2.0),
        py("pid_to_tile 最后一组不满", lambda m, g: g > 1 and m % g != 0,
           "最后一组可能不足 GROUP_M 行：group_size_m = min(num_pid_m - first_pid_m, GROUP_M)，取模和除法都要用它。", 2.0),
        kernel(1, 1, 1), kernel(5, 7, 2), kernel(8, 3, 4),
    ]


def _layernorm_cases(device):
    def one(m, n, dt, fill="randn", hint="", layout="contig"):
        tag = (" 均值很大" if fill == "offset" else "") + (" 行间有空隙" if layout == "padded" else "")
        # fp32 itself holds 1000 + x only to ~6e-5: the stable formula is that close, E[x^2] - E[x]^2 is far off
        tol = (1e-3, 1e-3) if fill == "offset" else None
        return Case(f"({m}, {n}) {dt}{tag}", dt,
                    (Tensor("x", (m, n), fill, layout), Tensor("weight", (n,), "weight"), Tensor("bias", (n,))),
                    {"eps": 1e-5}, ("x", "weight", "bias", "eps"), out_shape=(m, n), hint=hint, tol=tol)

    tail = ("列数不是 2 的幂：被 mask 掉的列不能参与均值和方差。均值要除以 n_cols（不是 BLOCK_SIZE），"
            "方差要用 tl.where(mask, x - mean, 0.0)。")
    big = "这个测试的每行均值约为 1000：用 E[x^2] - E[x]^2 求方差会严重抵消（数值不稳定），请先减均值再平方。"
    cs = [one(1, 1, "float32"), one(3, 7, "float32", hint=tail), one(4, 127, "float32", hint=tail),
          one(4, 129, "float32", hint=tail), one(17, 1000, "float32", hint=tail), one(9, 781, "float32", hint=tail),
          one(8, 300, "float32", "offset", big), one(6, 100, "float32", hint=STRIDE_ROWS, layout="padded"),
          one(3, 7, "float16", hint=tail), one(17, 1000, "float16", hint=tail)]
    if device == "cuda":
        cs += [one(17, 1000, "bfloat16", hint=tail),
               _perf("性能 (8192, 4096) float16", ref="layernorm", dtype="float16",
                     shapes={"x": [8192, 4096], "weight": [4096], "bias": [4096]}, scalars={"eps": 1e-5},
                     call=["x", "weight", "bias", "eps"], nbytes=2 * 2 * 8192 * 4096)]
    return cs


def _transpose_cases(device):
    def one(m, n, dt, layout="contig", hint=""):
        tag = {"padded": " 行间有空隙", "transposed": " 输入本身是转置视图"}.get(layout, "")
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), layout=layout),), call=("x",),
                    out_shape=(n, m), hint=hint)

    tail = "行数或列数不是块大小的整数倍：二维 mask 是 (rows < M)[:, None] & (cols < N)[None, :]，读和写都要。"
    stride = "输入不是连续的：读 x 时用 x.stride(0)、x.stride(1)，写 out 时用 out.stride(0)、out.stride(1)。"
    cs = [one(1, 1, "float32", hint=tail), one(7, 13, "float32", hint=tail), one(33, 31, "float32", hint=tail),
          one(100, 60, "float32", hint=tail), one(257, 129, "float32", hint=tail),
          one(40, 50, "float32", "padded", stride), one(37, 45, "float32", "transposed", stride),
          one(33, 31, "float16", hint=tail), one(100, 60, "float16", hint=tail)]
    if device == "cuda":
        cs += [one(100, 60, "bfloat16", hint=tail),
               _perf("性能 (8192, 8192) float32", ref="transpose", dtype="float32", shapes={"x": [8192, 8192]},
                     call=["x"], nbytes=2 * 4 * 8192 * 8192, tuning={"BLOCK_M": 64, "BLOCK_N": 64})]
    return cs


def _attention_cases(device):
    def one(b, h, s, d, dt, causal, fill="randn", hint=""):
        tag = (" causal" if causal else "") + (" 大数值" if fill == "large" else "")
        shape = (b, h, s, d)
        # q * 50 is there to catch exp() overflow (NaN/inf). On a GPU, tl.dot rounds fp32 to TF32: scores
        # of size ~50 carry errors of ~0.03, so this case gets a loose value tolerance.
        tol = (0.2, 0.1) if fill == "large" else None
        return Case(f"B={b} H={h} S={s} D={d} {dt}{tag}", dt,
                    (Tensor("q", shape, fill), Tensor("k", shape), Tensor("v", shape)), {"causal": causal},
                    ("q", "k", "v"), ("causal",), out_shape=shape, hint=hint, tol=tol)

    tail = "S 不是 BLOCK_N 的整数倍：超出 S 的 key 的分数要设成 -inf（不是 0），最后一块的 load 也要 mask。"
    causal = tail + " causal=True：query i 只能看到 key j <= i，其余分数设成 -inf。"
    online = "online softmax：每处理一个新的 K/V 块，之前的 acc 和 l 都要乘 alpha = exp(m_old - m_new)。"
    big = "这个测试的 q 很大（约 ±50）：分数要先减去当前的行最大值再取 exp，否则会溢出（数值不稳定）。"
    cs = [one(1, 1, 1, 16, "float32", False, hint=tail), one(1, 2, 17, 16, "float32", False, hint=tail),
          one(1, 2, 17, 16, "float32", True, hint=causal), one(2, 1, 65, 32, "float32", False, hint=online),
          one(2, 1, 65, 32, "float32", True, hint=causal), one(1, 1, 100, 64, "float32", True, hint=causal),
          one(1, 1, 40, 32, "float32", False, "large", big), one(1, 2, 33, 32, "float16", True, hint=causal),
          one(1, 1, 64, 16, "float16", False, hint=online)]
    if device == "cuda":
        cs += [one(1, 2, 100, 64, "bfloat16", True, hint=causal),
               _perf("性能 B=4 H=16 S=2048 D=64 float16 causal", ref="attention", dtype="float16",
                     shapes={"q": [4, 16, 2048, 64], "k": [4, 16, 2048, 64], "v": [4, 16, 2048, 64]},
                     scalars={"causal": True}, call=["q", "k", "v"], kwargs=["causal"],
                     flops=2 * 2 * 4 * 16 * 2048 * 2048 * 64 // 2, tuning={"BLOCK_M": 64, "BLOCK_N": 64})]
    return cs


_EXACT = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0), "int32": (0.0, 0.0)}
_SOFTMAX_OPS = ("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.exp",
                "torch.Tensor.exp", "torch.nn.functional.scaled_dot_product_attention")
_MATMUL_OPS = ("torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.Tensor.__matmul__",
               "torch.Tensor.matmul", "torch.Tensor.mm")

EXERCISES: dict[str, Exercise] = {e.id: e for e in [
    Exercise("ex01_axpy", "AXPY: z = a * x + y", "axpy", _axpy,
             {"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (6e-2, 2e-2)},
             ("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.__mul__", "torch.mul",
              "torch.Tensor.__rmul__", "torch.Tensor.copy_", "torch.addcmul"), _axpy_cases),
    Exercise("ex02_softmax", "按行 softmax（列数不是 2 的幂）", "softmax", _softmax,
             {"float32": (1e-6, 1e-5), "float16": (1e-3, 1e-2), "bfloat16": (4e-3, 2e-2)},
             _SOFTMAX_OPS + ("torch.Tensor.copy_",), _softmax_cases),
    Exercise("ex03_matmul", "最小 matmul：BLOCK_M/N/K、num_warps、num_stages", "matmul", _matmul,
             {"float32": (1e-4, 1e-4), "float32@cuda": (5e-2, 1e-2), "float16": (2e-2, 1e-2),
              "bfloat16": (1e-1, 2e-2)}, _MATMUL_OPS + ("torch.Tensor.copy_",), _matmul_cases),
    Exercise("ex04_group_m_swizzle", "GROUP_M 程序编号重排（pid -> (pid_m, pid_n)）", "", _swizzle_map, _EXACT,
             ("torch.Tensor.copy_",), _swizzle_cases),
    Exercise("ex05_layernorm", "LayerNorm 前向", "layernorm", _layernorm,
             {"float32": (2e-5, 2e-5), "float16": (5e-3, 5e-3), "bfloat16": (4e-2, 2e-2)},
             ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.mean", "torch.Tensor.mean", "torch.var",
              "torch.Tensor.var", "torch.rsqrt", "torch.Tensor.copy_"), _layernorm_cases),
    Exercise("ex06_transpose", "二维带 stride 的转置", "transpose", _transpose, _EXACT,
             ("torch.Tensor.copy_", "torch.Tensor.contiguous", "torch.Tensor.clone"), _transpose_cases),
    Exercise("ex07_flash_attention", "FlashAttention 风格的注意力前向", "attention", _attention,
             {"float32": (1e-4, 1e-4), "float32@cuda": (2e-2, 2e-2), "float16": (1e-2, 1e-2),
              "bfloat16": (3e-2, 3e-2)}, _SOFTMAX_OPS + _MATMUL_OPS + ("torch.Tensor.copy_",), _attention_cases),
    Exercise("ex08_tilelang_mapping", "用 Triton 和 TileLang 画同一个 GEMM tile（书面题）", written=True),
]}


def get(exercise_id: str) -> Exercise:
    return EXERCISES[exercise_id]
