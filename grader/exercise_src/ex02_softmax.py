# %% [markdown] id=ex02-intro
# # 练习 2：按行 softmax（列数不是 2 的幂）
#
# 对二维张量 `x`（形状 `(n_rows, n_cols)`）的每一行做 softmax：
# `out[i, j] = exp(x[i, j] - max_j x[i, :]) / sum_j exp(x[i, j] - max_j x[i, :])`。
#
# **要做的事**
#
# 1. 写 `softmax_kernel`：一个 program 处理一整行（`BLOCK_SIZE` 是不小于 `n_cols` 的 2 的幂）。
# 2. 写包装函数 `softmax(x, out=None)`：选 `BLOCK_SIZE`、算 grid、启动 kernel，返回 `out`。
#
# **规则**（评分器会检查）
#
# - 结果必须由你的 Triton kernel 算出来；用 `torch.softmax`、`torch.exp` 等记 0 分。
# - 写进参数 `out` 并返回它；不要修改 `x`。行与行之间可能有 stride（用 `x.stride(0)`）；
#   `out` 也可能是行间有空隙的视图（用 `out.stride(0)`，它和 `x.stride(0)` 不一定相同）。
# - float16 输入也要支持：在 kernel 里先转成 float32 再算（`x.to(tl.float32)`），存回时 `tl.store` 会按 `out` 的类型转换。
# - 列数最多 8192。评分器会测：列数 1、质数、127/129、781、4096 以上（GPU 上还有 1000 列的 bfloat16），以及数值很大的输入（约 ±150）、
#   每行整体平移不同大数（-400 到 400）的输入、每行都在 -2e4 到 -2e12 之间的输入、每行都是 float32 范围底部的同一个值
#   （-2^100 到 -2^127，约 -1.7e38）的输入、沿行从 0 增大到约 400 的宽行，
#   以及含 -inf 的行（被遮住的位置，可能连着一千多列；每行至少有一个有限值）。行数也可能是 533（比 GPU 上常用的 program 数多）。
# %% id=ex02-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex02-spec-md
# ## 规格（纯 torch）
# %% id=ex02-spec role=given
def softmax_spec(x: torch.Tensor) -> torch.Tensor:
    z = x.double() - x.double().max(dim=1, keepdim=True).values
    e = z.exp()
    return (e / e.sum(dim=1, keepdim=True)).to(x.dtype)
# %% [markdown] id=ex02-kernel-md
# ## 你的 kernel
# 提示：`cols = tl.arange(0, BLOCK_SIZE)`，`mask = cols < n_cols`。被 mask 掉的位置读进来应该是多少，
# 才不会影响最大值和求和？
# %% id=ex02-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK_SIZE: tl.constexpr):
    ### BEGIN SOLUTION
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    tl.store(out_ptr + row * stride_out + cols, e / tl.sum(e, axis=0), mask=mask)
    ### STUB
    # TODO: 读一行（带 mask），减去最大值，exp，除以总和，写回（带 mask）
    pass
    ### END SOLUTION


def softmax(x, out=None):
    out = torch.empty_like(x) if out is None else out
    ### BEGIN SOLUTION
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE)
    ### STUB
    # TODO: BLOCK_SIZE = ?；grid = ?；softmax_kernel[grid](...)
    raise NotImplementedError("TODO: launch softmax_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex02-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex02_softmax.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex02_softmax.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex02-selfcheck-md
# ## 自检
#
# **最常见的错误**：mask 掉的列用 `other=0.0` 读进来。0 会参与最大值和 `sum(exp(...))`，
# 每一行的分母都多了一些 `exp(0 - max)`，结果整体偏小。应该用 `other=float("-inf")`：`exp(-inf) = 0`。
# 第二常见：不减最大值直接 `exp`，输入一大就溢出成 `inf`，最后得到 `nan`。
# %% id=ex02-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex02_softmax", globals())
# %% id=ex02-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "列数不是 2 的幂：BLOCK_SIZE = triton.next_power_of_2(n_cols)，多出来的列要 mask，而且 other=-inf（不是 0）。"
WIDE = ("这一行比 1024 列还宽（也比你可能写死的 BLOCK_SIZE 宽）：BLOCK_SIZE 要按 n_cols 选"
        "（triton.next_power_of_2(n_cols)），或者在 kernel 里按块循环整行。")
BIG = "这个测试的输入很大（约 ±150）：不先减去每行的最大值，exp 会溢出成 inf（数值不稳定）。"
ROWS = ("这个测试每行整体平移了不同的量（-400 到 400 之间）：要减的是每一行自己的最大值，"
        "不是一个对所有行都一样的数（那样有的行 exp 溢出成 inf，有的行全部下溢成 0）。")
STRIDE = "这个测试的行之间有空隙（x.stride(0) > n_cols）：行的起点要用 row * x.stride(0)，不要用 row * n_cols。"
VERY_WIDE = ("这一行超过 4096 列（最多 8192）：BLOCK_SIZE = triton.next_power_of_2(n_cols)，不要给它设一个更小的上限"
             "（超出上限的列就没有算）。")
FAR = ("这个测试每行的值都在 -2e4 到 -2e12 附近：被 mask 掉的列要读成 -inf（other=-float('inf')），"
       "-1e4、-1e6 这样的“很小的数”比这一行所有的值都大，会被当成最大值。")
BOTTOM = ("这个测试每行都是同一个值，在 float32 范围的底部（-2^100 到 -2^127，约 -1e30 到 -1.7e38），结果是均匀的 1/列数："
          "补齐的列要读成 -inf（other=-float('inf')），最大值的初值也是 -inf。-1e30、-1e38 这样的“很小的数”比这些行的值大，"
          "会被当成最大值，exp 之后整行是 0，0/0 是 NaN。")
RAMP = ("这一行很宽，值沿行从 0 增大到约 400：减去的必须是整行的最大值。按块处理一行时，每一块都要更新最大值并把之前的和"
        "乘 exp(m_old - m_new)；只用第一块的最大值，后面的块 exp 会溢出成 inf。")
NEG_INF = ("这个测试每行前 55% 的值是 -inf（被遮住的位置，可能连着一千多列），后面是有限值：按块处理一行时，整块都是 -inf 的"
           "块的最大值也是 -inf，exp(-inf - (-inf)) 是 NaN。更新最大值和和之前先看新的最大值是不是 -inf（或者一次读进整行）。")
OSTRIDE = ("这个测试的 out 是行间有空隙的视图（out.stride(0) > n_cols，x 是连续的）：写回时行的起点要用 "
           "row * out.stride(0)，不要用 row * n_cols 或 row * x.stride(0)。")


MANY_ROWS = ("533 行，比 GPU 上常用的 program 数（132、4 × 132 = 528）多，也不是它们的整数倍：每一行都要有 program 处理。"
             "持久化写法里每个 program 按 row += tl.num_programs(0) 循环，或者处理 cdiv(行数, program 数) 行，不能向下取整。")


def cases(device, rng):
    def one(m, n, dt, fill="randn", hint=None, layout="contig", out_layout="contig", **kw):
        hint = (TAIL if n & (n - 1) else "") if hint is None else hint  # TAIL is about a width that is no power of 2
        tag = (" 大数值" if fill == "large" else "") + (" 每行偏移不同" if fill == "row_offsets" else "") + \
            (" 每行都很负" if fill == "far_negative" else "") + (" 沿行递增到约 400" if fill == "ramp" else "") + \
            (" 每行是 float32 底部的同一个值" if fill == "float32_bottom" else "") + \
            (" 每行前 55% 是 -inf" if fill == "neg_inf_head" else "") + \
            (" 行间有空隙" if layout == "padded" else "") + \
            (" out 行间有空隙" if out_layout == "padded" else "")
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout),), call=("x",),
                    outputs=(Tensor("out", (m, n), layout=out_layout),), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(3, 7, "float32", public=True), one(4, 127, "float32"),
          one(4, 129, "float32", public=True), one(9, 781, "float32"), one(8, 333, "float32", "large", BIG, public=True),
          one(6, 100, "float32", hint=STRIDE, layout="padded"), one(3, 7, "float16", public=True),
          one(5, 333, "float16", "large", BIG),
          one(6, 100, "float32", hint=OSTRIDE, out_layout="padded", public=True),
          one(5, 129, "float16", "large", OSTRIDE, out_layout="padded"), one(7, 200, "float32", "row_offsets", ROWS),
          one(2, 2000, "float32", "neg_inf_head", NEG_INF)]
    cs += [one(rng.randint(2, 5), n, "float32", hint=WIDE, hidden=True) for n in sizes(rng, 1025, 3000)]
    cs += [one(rng.randint(2, 5), n, "float32", hint=WIDE, hidden=True)
           for n in near_multiples(rng, (1024, 2048), 1, (1, 2), above=1024)]
    cs += [one(rng.randint(2, 6), n, "float16", hint=TAIL, hidden=True)
           for n in near_multiples(rng, (64, 128, 256), 1, offsets=(-1, 1))]
    cs += [one(rng.randint(3, 9), n, "float32", "large", BIG, layout="padded", hidden=True) for n in sizes(rng, 200, 900)]
    cs += [one(rng.randint(2, 6), n, "float32", hint=OSTRIDE, out_layout="padded", hidden=True) for n in sizes(rng, 30, 600)]
    cs += [one(rng.randint(6, 12), n, "float16", "row_offsets", ROWS, hidden=True) for n in sizes(rng, 50, 400)]
    cs += [one(rng.randint(2, 3), n, "float32", hint=VERY_WIDE, hidden=True) for n in sizes(rng, 4097, 8192)]
    cs += [one(2, 8192, "float32", hint=VERY_WIDE)]  # the widest row allowed: a multiple of every chunk width up to it
    cs += [one(533, 16, "float32", hint=MANY_ROWS)]
    # the special rows at the widest width too: a kernel may take another path (chunks) for wide rows
    cs += [one(2, 8192, "float32", "ramp", RAMP), one(2, 8192, "float32", "neg_inf_head", NEG_INF),
           one(2, 2000, "float32", "far_negative", FAR), one(4, 3000, "float32", "row_offsets", ROWS + " " + WIDE),
           one(4, 2000, "float32", "float32_bottom", BOTTOM), one(6, 8191, "float32", "float32_bottom", BOTTOM),
           one(3, 2000, "float32", hint=OSTRIDE + " " + WIDE, out_layout="padded")]
    cs += [one(rng.randint(2, 6), n, "float32", "far_negative", FAR, hidden=True)
           for n in sizes(rng, 30, 600, avoid=tuple(1 << i for i in range(10)))]
    cs += [one(rng.randint(2, 4), n, "float32", "ramp", RAMP, hidden=True) for n in sizes(rng, 1025, 3000)]
    cs += [one(rng.randint(4, 8), n, "float32", "float32_bottom", BOTTOM, hidden=True)
           for n in sizes(rng, 30, 600, avoid=tuple(1 << i for i in range(10)))]
    if device == "cuda":
        cs += [one(17, 1000, "bfloat16"),
               Case("性能 (4096, 4000) float32", "float32", mode="perf", points=2.0,
                    perf={"shapes": {"x": [4096, 4000]}, "outputs": {"out": [4096, 4000]}, "call": ["x"], "nbytes": 2 * 4 * 4096 * 4000})]
    return cs


EXERCISE = Exercise(
    title="按行 softmax（列数不是 2 的幂）", func="softmax", reference=softmax_spec, cases=cases, perf_ref="softmax",
    tolerances={"float32": (1e-6, 1e-5), "float16": (1e-3, 1e-2), "bfloat16": (4e-3, 2e-2)},
    forbid=("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
            "torch.exp", "torch.Tensor.exp"))
