# %% [markdown] id=ex06-intro
# # 练习 6：二维带 stride 的转置
#
# 给定二维 `x`（形状 `(M, N)`，**不一定连续**），写出连续的 `out = x.T`（形状 `(N, M)`）。
# 每个 program 负责一个 `BLOCK_M x BLOCK_N` 的块：按 `x` 的 stride 读进来，转置后按 `out` 的 stride 写出去。
#
# **要做的事**：`transpose_kernel` 和 `transpose(x, out=None, BLOCK_M=32, BLOCK_N=32)`。
#
# **规则**：结果由 Triton kernel 写（`x.t().contiguous()`、`out.copy_(...)`、`.clone()` 记 0 分）；写进 `out` 并返回；
# 不修改 `x`。测试里有行之间有空隙的 `x`（`x.stride(0) > N`）、本身就是转置视图的 `x`（`x.stride() == (1, M)`），
# 也有别的 stride（例如隔列取的 `base[:, ::2]`），也会传入不同的 `BLOCK_M`、`BLOCK_N`（例如 `BLOCK_M=64, BLOCK_N=16`）。
# 转置只搬数据，结果必须**逐位相等**（-0.0 仍是 -0.0）：`x` 可能是 float32、float16，也可能是 int32（值用满 int32 的范围，远超 2^24），
# 不要经过 float32。
# %% id=ex06-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex06-spec-md
# ## 规格（纯 torch）
# %% id=ex06-spec role=given
def transpose_spec(x: torch.Tensor) -> torch.Tensor:
    return x.t().contiguous()
# %% [markdown] id=ex06-kernel-md
# ## 你的 kernel
# 提示：`x` 块的指针是 `x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn`；
# 写 `out[n, m]` 的指针是 `out_ptr + rn[None, :] * stride_on + rm[:, None] * stride_om`
#（不用 `tl.trans` 也可以：直接用转置后的指针写）。
# %% id=ex06-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def transpose_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_on, stride_om,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rn[None, :] * stride_on + rm[:, None] * stride_om, tile, mask=mask)
    ### STUB
    # TODO: 这个 program 的行块 rm、列块 rn；二维 mask；按 x 的 stride 读；按 out 的 stride 写到 (rn, rm)
    pass
    ### END SOLUTION


def transpose(x, out=None, BLOCK_M=32, BLOCK_N=32):
    M, N = x.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    transpose_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    ### STUB
    # TODO: 二维 grid；把 x 和 out 的 stride 都传进去
    raise NotImplementedError("TODO: launch transpose_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex06-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex06_transpose.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex06_transpose.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex06-selfcheck-md
# ## 自检
#
# **最常见的错误**：假设 `x` 是连续的，用 `N` 代替 `x.stride(0)`、用 1 代替 `x.stride(1)`。对连续的 `x` 结果正确，
# 换成切片或转置视图就错了。第二常见：只 mask 一个方向，行数或列数不是块大小的整数倍时越界。
# %% id=ex06-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex06_transpose", globals())
# %% id=ex06-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "行数或列数不是块大小的整数倍：二维 mask 是 (rows < M)[:, None] & (cols < N)[None, :]，读和写都要。"
STRIDE = "输入不是连续的：读 x 时用 x.stride(0)、x.stride(1)，写 out 时用 out.stride(0)、out.stride(1)。"
EXACT = "M、N 正好是块大小的整数倍（或差 1）：每个 tile 的起点是 pid * BLOCK，tile 之间不重叠也不留空。"
BLOCKS = ("这个测试传入了 BLOCK_M != BLOCK_N：grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，"
          "rm 用 BLOCK_M、rn 用 BLOCK_N，不要混用。")
ODD = ("这个测试的 x 的 stride 既不是 (N, 1) 也不是 (1, M)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "两个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
WIDEINT = ("int32 的值超过 2^24（用满整个范围）：读进来的块原样转置写回，不要 .to(tl.float32)"
           "（float32 只有 24 位有效数字，大整数会被舍入）。")


def cases(device, rng):
    def one(m, n, dt, layout="contig", hint=None, blocks=None, fill="randn", **kw):
        bm, bn = blocks or (32, 32)
        hint = (TAIL if m % bm or n % bn else EXACT) if hint is None else hint
        tag = {"padded": " 行间有空隙", "transposed": " 输入本身是转置视图", "transposed_padded": " 输入是行间有空隙的矩阵的转置",
               "step2": " 输入隔列取"}.get(layout, "") + (" 值用满 int32" if fill == "full_int32" else "") + (" 含 -0.0" if fill == "signed_zeros" else "")
        scalars, kwargs = {}, ()
        if blocks:
            scalars = {"BLOCK_M": blocks[0], "BLOCK_N": blocks[1]}
            kwargs = ("BLOCK_M", "BLOCK_N")
            tag += f" BLOCK_M={blocks[0]} BLOCK_N={blocks[1]}"
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout),), scalars, call=("x",),
                    kwargs=kwargs, out_shape=(n, m), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(7, 13, "float32", public=True), one(33, 31, "float32", public=True),
          one(100, 60, "float32", fill="signed_zeros"), one(40, 50, "float32", "padded", STRIDE, public=True),
          one(37, 45, "float32", "transposed", STRIDE), one(33, 31, "float16", public=True),
          one(70, 50, "float32", hint=BLOCKS, blocks=(64, 16), public=True),
          one(50, 70, "float16", "transposed", BLOCKS, blocks=(16, 64)),
          one(30, 45, "int32", "padded", WIDEINT, fill="full_int32")]
    m, n = near_multiples(rng, (64, 128, 256), 2, (1, 2))
    cs += [one(m, n, "float32", hint=EXACT, hidden=True), one(*sizes(rng, 130, 300, 2), "float32", hidden=True),
           one(*sizes(rng, 65, 200, 2), "float16", "transposed", STRIDE, hidden=True),
           one(*sizes(rng, 30, 150, 2), "float32", "padded", BLOCKS, blocks=tuple(rng.sample((16, 32, 64, 128), 2)),
               hidden=True),
           one(29, 37, "float32", "transposed_padded", ODD), one(*sizes(rng, 30, 150, 2), "float32", "step2", ODD, hidden=True)]
    if device == "cuda":
        cs += [one(100, 60, "bfloat16"),
               Case("性能 (8192, 8192) float32", "float32", mode="perf", points=2.0,
                    perf={"shapes": {"x": [8192, 8192]}, "outputs": {"out": [8192, 8192]}, "call": ["x"], "nbytes": 2 * 4 * 8192 * 8192,
                          "tuning": {"BLOCK_M": 64, "BLOCK_N": 64}})]
    return cs


EXERCISE = Exercise(
    title="二维带 stride 的转置", func="transpose", reference=transpose_spec, cases=cases, perf_ref="transpose",
    tolerances={}, forbid=("torch.Tensor.contiguous", "torch.Tensor.clone"))
