# %% [markdown] id=ex01-intro
# # 练习 1：AXPY（`out = a * x + y`）
#
# 把向量加法改成 AXPY：每个元素 `out[i] = a * x[i] + y[i]`，`a` 是一个 Python 浮点数（float，可以超出 float16 的范围）。
#
# **要做的事**
#
# 1. 写 `axpy_kernel`：每个 program 处理连续的 `BLOCK_SIZE` 个元素。
# 2. 写包装函数 `axpy(a, x, y, out=None, BLOCK_SIZE=1024)`：算 grid，启动 kernel，返回 `out`。
#
# **规则**（评分器会检查）
#
# - 结果必须由你的 Triton kernel 算出来；在包装函数里用 torch 算（`a * x + y`、`torch.add`……）记 0 分。
# - 结果写进参数 `out`（模板已经写好分配 `out` 的那一行），最后 `return out`。不要修改 `x`、`y`。
# - 评分器会用没见过的长度（1、质数、BLOCK_SIZE±1、很大的 n）和 float32/float16（GPU 上还有 bfloat16）测试；
#   `a` 每个测试可能不同，有的测试还会传入别的 `BLOCK_SIZE`（例如 `BLOCK_SIZE=128`）。
# - 只有标记为答案的代码单元会被评分：辅助代码也要写在这些单元里。
# %% id=ex01-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex01-spec-md
# ## 规格（纯 torch）
# 评分器用的参考就是这个函数（在 float64 里算）。
# %% id=ex01-spec role=given
def axpy_spec(a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return a * x + y
# %% [markdown] id=ex01-kernel-md
# ## 你的 kernel
# 提示：`offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)`；最后一个 program 可能有一部分 `offs >= n`。
# %% id=ex01-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK_SIZE: tl.constexpr):
    ### BEGIN SOLUTION
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * x + y, mask=mask)
    ### STUB
    # TODO: 1) 这个 program 负责哪些元素？ 2) 哪些是有效的？ 3) load、计算、store
    pass
    ### END SOLUTION


def axpy(a, x, y, out=None, BLOCK_SIZE=1024):
    out = torch.empty_like(x) if out is None else out
    ### BEGIN SOLUTION
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)
    ### STUB
    # TODO: 算 grid（需要多少个 program？），然后 axpy_kernel[grid](...)
    raise NotImplementedError("TODO: launch axpy_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex01-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex01_axpy.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex01_axpy.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex01-selfcheck-md
# ## 自检
# 下面的单元用几个公开的形状检查你的 kernel（和评分器用同样的保护区和信息）。
#
# **最常见的错误**：忘了 `mask`。在 GPU 上越界访问可能直接报错，也可能悄悄写坏相邻的内存；
# 在 CPU 解释器上它**什么错都不报**，所以自检和评分器在输出前后放了保护区来抓它。
# %% id=ex01-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex01_axpy", globals())
# %% [markdown] id=ex01-bench-md
# ## BLOCK_SIZE 和带宽（只在 GPU 上计时）
# 在 GPU 上比较 `BLOCK_SIZE = 256 / 512 / 1024 / 2048` 的带宽，和 torch 在同一次运行里交替计时。torch 一侧用单个 kernel 的
# `torch.add(y, x, alpha=a)`（每元素 12 字节，和你的 kernel 一样）；`a * x + y` 是两个 kernel、每元素 20 字节，不公平。
# 在 CPU 上这个单元不计时（解释器的时间衡量的是 Python，不是 GPU），只显示 GPU 上记录的结果（还没有记录时只打印一句说明）。
#
# 记录（`results/h200/ex01_axpy_block_sweep.json`，H200，下面的单元会打印它的日期和版本）里四种块大小的中位数都和 torch
# 很接近。这份记录只存了中位数、没有离散度，所以它不能说明哪种块大小更快：差别要在你自己的 GPU 上交替多跑几轮，
# 和 p20–p80 的离散度比较之后才能下结论（第 2 章的扫描就是这样做的）。
# %% id=ex01-bench role=demo
def block_size_sweep():
    import tcourse.bench
    n = 1 << 24
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    rows = []
    for bs in (256, 512, 1024, 2048):
        c = tcourse.bench.compare(lambda: axpy(2.0, x, y, out, BLOCK_SIZE=bs), lambda: torch.add(y, x, alpha=2.0, out=out), nbytes=3 * 4 * n)
        rows.append({"BLOCK_SIZE": bs, "triton_GBs": c.rate(c.ours), "torch_GBs": c.rate(c.torch)})
    return rows


rows = rt.live_or_recorded("ex01_axpy_block_sweep", block_size_sweep, what="BLOCK_SIZE 带宽比较")
for row in rows or []:
    print(f"BLOCK_SIZE={row['BLOCK_SIZE']:5d}  triton {row['triton_GBs']:7.1f} GB/s   torch {row['torch_GBs']:7.1f} GB/s")
# %% id=ex01-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "n 不是 BLOCK_SIZE 的整数倍：最后一个 program 只有一部分元素有效，tl.load/tl.store 都要 mask=offs < n。"
EXACT = "n 正好是块大小的整数倍（或差 1）：grid = triton.cdiv(n, BLOCK_SIZE)，最后一个块也要算，也不能多算。"
BIG = "n 超过 2^20：偏移量 pid * BLOCK_SIZE + tl.arange(...) 覆盖所有元素，不要把 n 或 grid 限制在某个固定值。"
SCALAR = "这个测试的 a 不是 -1.75：kernel 要用传进来的参数 a，不要把某个数值写死在 kernel 或包装函数里。"
BLOCK = ("这个测试传入了 BLOCK_SIZE=... 关键字参数：grid = triton.cdiv(n, BLOCK_SIZE) 和 kernel 的 BLOCK_SIZE 都要用这个参数，"
         "不要写死 1024。")
SCALAR_FP32 = " 这个测试的 a 有六位小数（float16、bfloat16 都表示不了）：float32 输入时 a 在 kernel 里保持 float32，不要转成低精度。"


BIG_A = ("float16 的 x、y，a = 1e5（超过 float16 的最大值 65504），x 约为 ±1e-3，a * x 约为 ±100：a 是 float32 标量，"
         "a * x 在 float32 里算，不要把 a 转成 x 的 dtype（a.to(x.dtype) 是 inf）。")


def _milli(g, shape):
    return 1e-3 * torch.randn(shape, generator=g, dtype=torch.float64)


def cases(device, rng):
    def one(n, dt, hint=None, a=-1.75, block=None, x_fill="randn", **kw):
        hint = (TAIL if n % (block or 1024) else EXACT) if hint is None else hint
        tag = (f" a={a:g}" if a != -1.75 else "") + (f" BLOCK_SIZE={block}" if block else "")
        scalars, kwargs = {"a": a}, ()
        if block:
            scalars, kwargs = {"a": a, "BLOCK_SIZE": block}, ("BLOCK_SIZE",)
        return Case(f"n={n} {dt}{tag}", dt, (Tensor("x", (n,), x_fill), Tensor("y", (n,))), scalars, ("a", "x", "y"),
                    kwargs=kwargs, out_shape=(n,), hint=hint, **kw)

    cs = [one(1, "float32", "只有一个元素：grid 至少要有 1 个 program，而且要 mask。", public=True),
          one(7, "float32", public=True), one(1025, "float32", public=True), one(4099, "float32"),
          one(7, "float16", public=True), one(1025, "float16"),
          one(1000, "float32", SCALAR, a=2.5, public=True), one(777, "float16", SCALAR, a=-0.375),
          one(1000, "float32", BLOCK, a=0.75, block=128), one(999, "float16", BIG_A, a=1e5, x_fill=_milli)]
    cs += [one(n, "float32", EXACT, hidden=True) for n in near_multiples(rng, (1024, 2048, 4096), 2, (2, 8))]
    cs += [one(rng.randint(2, 8) * 1024, "float32", EXACT, hidden=True)]  # always one exact multiple
    cs += [one(n, "float32", BIG, hidden=True) for n in sizes(rng, (1 << 20) + 1, (1 << 20) + 70_000)]
    cs += [one(n, "float16", hidden=True) for n in sizes(rng, 100, 20_000)]
    # six decimals, exact in neither float16 nor bfloat16 (a kernel that rounds a is off by 1e-3 or more); never the
    # default, nor 1 (where a kernel that ignores a is right)
    a = rng.choice((-1, 1)) * round(rng.uniform(0.1, 4.0), 6)
    cs += [one(n, "float32", f"{SCALAR}{BLOCK}{SCALAR_FP32}", a=a, block=rng.choice((256, 512, 2048)), hidden=True)
           for n in sizes(rng, 3000, 9000)]
    if device == "cuda":
        # more than 65535 programs (the grid's limit in y and z, not in x): 60 s a launch in the CPU interpreter
        cs += [one(1025, "bfloat16"), one(100_003, "bfloat16"), one(65535 * 16 + 3001, "float32", BIG, block=16),
               Case("性能 n=2^24 float32", "float32", mode="perf", points=2.0,
                    perf={"shapes": {"x": [1 << 24], "y": [1 << 24]}, "outputs": {"out": [1 << 24]}, "scalars": {"a": -1.75},
                          "call": ["a", "x", "y"], "nbytes": 3 * 4 * (1 << 24)})]
    return cs


EXERCISE = Exercise(
    title="AXPY: z = a * x + y", func="axpy", reference=axpy_spec, cases=cases, perf_ref="axpy",
    tolerances={"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3), "bfloat16": (6e-2, 2e-2)},
    forbid=("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.__mul__", "torch.mul",
            "torch.Tensor.__rmul__", "torch.addcmul"))
