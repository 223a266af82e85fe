# %% [markdown] id=ex05-intro
# # 练习 5：LayerNorm 前向
#
# 对二维 `x`（`(n_rows, n_cols)`）的每一行：`mean = x.mean()`，`var = ((x - mean)**2).mean()`，
# `out = (x - mean) / sqrt(var + eps) * weight + bias`（`weight`、`bias` 形状 `(n_cols,)`）。
#
# **要做的事**
#
# 1. `layernorm_kernel`：一个 program 处理一行（`BLOCK_SIZE` = 不小于 `n_cols` 的 2 的幂），在 float32 里算。
# 2. `layernorm(x, weight, bias, eps=1e-5, out=None)`：启动 kernel，返回 `out`。
#
# **规则**：结果由 Triton kernel 算（`torch.nn.functional.layer_norm`、`torch.mean`、`torch.var` 记 0 分）；
# 写进 `out` 并返回；不修改输入。列数最多 8192。测试包括列数 1、7、127、129、781、1000、4096 以上，float16，以及每行均值约 1000 的输入
#（也有几千列的宽行）
#（float32 和 float16）和每行均值各不相同（-400 到 400）的输入、每行第一列是 3e4 的输入；`eps` 每个测试可能不同；`out` 可能是行间有空隙的视图
#（用 `out.stride(0)`）。行数也可能是 533（比 GPU 上常用的 program 数多）。
# %% id=ex05-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex05-spec-md
# ## 规格（纯 torch）
# %% id=ex05-spec role=given
def layernorm_spec(x, weight, bias, eps=1e-5):
    xd = x.double()
    mean = xd.mean(dim=1, keepdim=True)
    var = ((xd - mean) ** 2).mean(dim=1, keepdim=True)
    return ((xd - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()).to(x.dtype)
# %% [markdown] id=ex05-kernel-md
# ## 你的 kernel
# %% id=ex05-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, stride_x, stride_out, eps, BLOCK_SIZE: tl.constexpr):
    ### BEGIN SOLUTION
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_out + cols, xc * rstd * w + b, mask=mask)
    ### STUB
    # TODO: 读一行（mask），均值，方差（只算有效列！），归一化，乘 weight 加 bias，写回（mask）
    pass
    ### END SOLUTION


def layernorm(x, weight, bias, eps=1e-5, out=None):
    out = torch.empty_like(x) if out is None else out
    ### BEGIN SOLUTION
    n_rows, n_cols = x.shape
    layernorm_kernel[(n_rows,)](x, weight, bias, out, n_cols, x.stride(0), out.stride(0), eps,
                                BLOCK_SIZE=triton.next_power_of_2(n_cols))
    ### STUB
    # TODO: grid = 每行一个 program；BLOCK_SIZE = triton.next_power_of_2(n_cols)
    raise NotImplementedError("TODO: launch layernorm_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex05-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex05_layernorm.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex05_layernorm.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex05-selfcheck-md
# ## 自检
#
# **最常见的错误**：mask 掉的列也进了方差。`other=0.0` 读进来的 0 在 `x - mean` 之后变成 `-mean`，
# 平方后加进方差里。要用 `tl.where(mask, x - mean, 0.0)`，并且除以 `n_cols` 而不是 `BLOCK_SIZE`。
# 另一个：用 `E[x^2] - E[x]^2` 求方差，均值大时两项几乎相等，float32 里相减只剩噪声。
# %% id=ex05-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex05_layernorm", globals())
# %% id=ex05-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = ("列数不是 2 的幂：被 mask 掉的列不能参与均值和方差。均值要除以 n_cols（不是 BLOCK_SIZE），"
        "方差要用 tl.where(mask, x - mean, 0.0)。")
WIDE = "这一行比 1024 列还宽：BLOCK_SIZE 要按 n_cols 选（triton.next_power_of_2(n_cols)），或在 kernel 里按块循环整行。"
ROWS = ("这个测试每行的均值各不相同（-400 到 400 之间）：均值和方差要按行算，先减去这一行自己的均值再平方；"
        "减去一个对所有行都一样的数之后用 E[x^2] - E[x]^2，均值离 0 远的行仍然会严重抵消。")
BIG = "这个测试的每行均值约为 1000：用 E[x^2] - E[x]^2 求方差会严重抵消（数值不稳定），请先减均值再平方。"
STRIDE = "这个测试的行之间有空隙（x.stride(0) > n_cols）：行的起点要用 row * x.stride(0)，不要用 row * n_cols。"
OSTRIDE = ("这个测试的 out 是行间有空隙的视图（out.stride(0) > n_cols，x 是连续的）：写回时行的起点要用 "
           "row * out.stride(0)，不要用 row * n_cols 或 row * x.stride(0)。")
VERY_WIDE = ("这一行超过 4096 列（最多 8192）：BLOCK_SIZE = triton.next_power_of_2(n_cols)，不要给它设一个更小的上限"
             "（超出上限的列就没有算）。")
EPS = ("这个测试的 eps 不是 1e-5，而且每行的方差和 eps 差不多大：rstd = 1 / sqrt(var + eps)，"
       "eps 要用传进来的参数（加在开方之前），不要写死 1e-5。")
EPS_DEFAULT = ("这个测试不传 eps，每行的方差（约 1e-5）和 eps 差不多大：签名里 eps 的默认值要和题目给的一样是 1e-5"
               "（不是 1e-6，也不是 0）。")
F16BIG = ("float16 输入、每行均值约 1000：一行的和远超 float16 的最大值 65504，"
          "load 之后先 .to(tl.float32)，均值、方差都在 float32 里算。")


def small(scale):  # rows whose variance is about scale**2: comparable to eps
    return lambda g, shape: scale * torch.randn(shape, generator=g, dtype=torch.float64)


MANY_ROWS = ("533 行，比 GPU 上常用的 program 数（132、4 × 132 = 528）多，也不是它们的整数倍：每一行都要有 program 处理。"
             "持久化写法里每个 program 按 row += tl.num_programs(0) 循环，或者处理 cdiv(行数, program 数) 行，不能向下取整。")
FIRST_FAR = ("每行第一列是 3e4，其余是标准正态的随机数（约 ±1）：方差要先减均值再平方。用某个元素（比如第一列）平移的一遍公式 "
             "E[(x - x0)^2] - E[x - x0]^2 在这个元素离群时同样相消，丢掉精度。")



def cases(device, rng):
    def one(m, n, dt, fill="randn", hint=None, layout="contig", eps=1e-5, out_layout="contig", **kw):
        hint = (TAIL if n & (n - 1) else "") if hint is None else hint  # TAIL is about a width that is no power of 2
        tag = (" 均值很大" if fill == "offset" else "") + (" 每行均值不同" if fill == "row_offsets" else "") + \
            (" 行间有空隙" if layout == "padded" else "") + \
            (f" eps={eps:g}" if eps not in (1e-5, None) else "") + (" 不传 eps" if eps is None else "") + \
            (" out 行间有空隙" if out_layout == "padded" else "") + (" 首列 3e4" if fill == "first_far" else "")
        # fp32 itself holds 1000 + x only to ~6e-5: the stable formula is that close, E[x^2] - E[x]^2 is far off
        tol = (1e-3, 1e-3) if fill in ("offset", "row_offsets") and dt == "float32" else None
        return Case(f"({m}, {n}) {dt}{tag}", dt,
                    (Tensor("x", (m, n), fill, layout), Tensor("weight", (n,), "weight"), Tensor("bias", (n,))),
                    {} if eps is None else {"eps": eps}, ("x", "weight", "bias") + (() if eps is None else ("eps",)),
                    outputs=(Tensor("out", (m, n), layout=out_layout),),
                    hint=hint, tol=tol, **kw)

    cs = [one(1, 1, "float32", public=True), one(3, 7, "float32", public=True), one(4, 127, "float32"),
          one(4, 129, "float32", public=True), one(9, 781, "float32"), one(8, 300, "float32", "offset", BIG, public=True),
          one(6, 100, "float32", hint=STRIDE, layout="padded"), one(3, 7, "float16", public=True),
          one(5, 1000, "float16"),
          one(4, 100, "float32", small(0.03), EPS, eps=1e-3, public=True),
          one(4, 100, "float32", small(0.003), EPS_DEFAULT, eps=None),
          one(5, 90, "float32", hint=OSTRIDE, out_layout="padded"),
          one(4, 128, "float16", "offset", F16BIG), one(2, 8192, "float16", "offset", F16BIG)]
    cs += [one(rng.randint(2, 5), n, "float32", hint=WIDE, hidden=True) for n in sizes(rng, 1025, 3000)]
    cs += [one(rng.randint(2, 5), n, "float32", hint=WIDE, hidden=True) for n in near_multiples(rng, (1024, 2048), 1, (1, 2), above=1024)]
    cs += [one(rng.randint(2, 6), n, "float32", "offset", BIG, layout="padded", hidden=True) for n in sizes(rng, 200, 1500)]
    cs += [one(rng.randint(2, 3), n, "float32", hint=VERY_WIDE, hidden=True) for n in sizes(rng, 4097, 8192)]
    cs += [one(2, 8192, "float32", hint=VERY_WIDE)]  # the widest row allowed: a multiple of every chunk width up to it
    cs += [one(533, 16, "float32", hint=MANY_ROWS), one(3, 8192, "float32", "first_far", FIRST_FAR)]
    # the special rows past 1024 columns too: a kernel may take another path (chunks) for wide rows
    cs += [one(3, 2000, "float32", small(0.03), EPS + " " + WIDE, eps=1e-3),
           one(2, 5000, "float32", small(0.003), EPS_DEFAULT + " " + WIDE, eps=None),
           one(4, 3000, "float32", "row_offsets", ROWS + " " + WIDE),
           one(3, 2000, "float32", hint=OSTRIDE + " " + WIDE, out_layout="padded")]
    cs += [one(rng.randint(2, 4), n, "float32", "offset", BIG + " " + WIDE, hidden=True) for n in sizes(rng, 2049, 6000)]
    cs += [one(rng.randint(2, 6), n, "float16", hidden=True) for n in near_multiples(rng, (64, 128, 256), 1)]
    cs += [one(rng.randint(6, 12), n, "float32", "row_offsets", ROWS, hidden=True) for n in sizes(rng, 100, 800)]
    eps = rng.choice((1e-4, 3e-4, 1e-3, 3e-3, 1e-2))
    cs += [one(rng.randint(2, 6), n, "float32", small(eps ** 0.5), f"{EPS}{OSTRIDE}", eps=eps,
               out_layout="padded", hidden=True)
           for n in sizes(rng, 30, 700)]
    if device == "cuda":
        cs += [one(17, 1000, "bfloat16"),
               Case("性能 (8192, 4096) float16", "float16", mode="perf", points=2.0,
                    perf={"shapes": {"x": [8192, 4096], "weight": [4096], "bias": [4096]}, "outputs": {"out": [8192, 4096]}, "scalars": {"eps": 1e-5},
                          "call": ["x", "weight", "bias", "eps"], "nbytes": 2 * 2 * 8192 * 4096})]
    return cs


EXERCISE = Exercise(
    title="LayerNorm 前向", func="layernorm", reference=layernorm_spec, cases=cases, perf_ref="layernorm",
    tolerances={"float32": (2e-5, 2e-5), "float16": (5e-3, 5e-3), "bfloat16": (4e-2, 2e-2)},
    forbid=("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.mean", "torch.Tensor.mean", "torch.var",
            "torch.Tensor.var", "torch.rsqrt"))
