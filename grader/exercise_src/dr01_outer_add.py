# %% [markdown] id=dr01-intro
# # 基本功 1：二维广播（outer add）
#
# 第 3 章里一个 program 处理一行，下标只有一维。第 4 章的 matmul 里一个 program 处理 `out` 的一个
# **二维 tile**：行下标和列下标各是一个向量，用 `[:, None]` 和 `[None, :]` 广播成一个二维的指针块和 mask。
# 这道题只练这一步。
#
# 给定 `x`（长度 `M`）和 `y`（长度 `N`），算 `out[i, j] = x[i] + y[j]`（形状 `(M, N)`）。`x`、`y` 可能是 float32、float16，
# 也可能是 int32（值远超 2^24，和仍在 int32 里）。
#
# **要做的事**
#
# 1. 写 `outer_add_kernel`：program `(pid_m, pid_n)` 负责 `out` 的一个 `BLOCK_M x BLOCK_N` 块。
# 2. 写包装函数 `outer_add(x, y, out=None, BLOCK_M=32, BLOCK_N=32)`：二维 grid，启动 kernel，返回 `out`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进参数 `out`，最后 `return out`；不要修改 `x`、`y`。
# - 评分器会用没见过的 `M`、`N`（1、质数、64/128/256 的整数倍和 ±1、比 `BLOCK_M`/`BLOCK_N` 大得多），
#   还会检查有没有读写到张量外面（即使读出来的值后来被 mask 掉了）。
# - 测试会传入不同的 `BLOCK_M`、`BLOCK_N`（两者不一定相等）；`out` 可能是行间有空隙的视图或转置视图：
#   写 `out` 用它的两个 stride。
# %% id=dr01-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr01-spec-md
# ## 规格（纯 torch）
# %% id=dr01-spec role=given
def outer_add_spec(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x[:, None] + y[None, :]
# %% [markdown] id=dr01-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - `rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)`，`rn` 同理；`rm[:, None]` 是一列、`rn[None, :]` 是一行，
#   两者相加、相比较都会广播成 `(BLOCK_M, BLOCK_N)`。
# - `x` 只需要读 `BLOCK_M` 个元素、`y` 只需要读 `BLOCK_N` 个：一维的 load，各用一维的 mask。
# - 写 `out` 时 mask 是二维的：`(rm[:, None] < M) & (rn[None, :] < N)`；地址用 `out` 的两个 stride。
# %% id=dr01-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def outer_add_kernel(x_ptr, y_ptr, out_ptr, M, N, stride_om, stride_on,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + rm, mask=rm < M)
    y = tl.load(y_ptr + rn, mask=rn < N)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, x[:, None] + y[None, :],
             mask=(rm[:, None] < M) & (rn[None, :] < N))
    ### STUB
    # TODO: rm、rn；一维 load x 和 y（带 mask）；广播相加；二维 mask 写回
    pass
    ### END SOLUTION


def outer_add(x, y, out=None, BLOCK_M=32, BLOCK_N=32):
    M, N = x.numel(), y.numel()
    out = torch.empty((M, N), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    outer_add_kernel[grid](x, y, out, M, N, out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    ### STUB
    # TODO: 二维 grid = (行方向几个块, 列方向几个块)；outer_add_kernel[grid](...)
    raise NotImplementedError("TODO: launch outer_add_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr01-selfcheck-md
# ## 自检
#
# **最常见的错误**：grid 只有一维（`(triton.cdiv(M, BLOCK_M),)`），每个 program 只算前 `BLOCK_N` 列：
# `N <= BLOCK_N` 时看不出来。第二常见：写 `out` 时只 mask 行，最后一个列块写到下一行开头或张量外面。
# %% id=dr01-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr01_outer_add", globals())
# %% id=dr01-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "M 或 N 不是块大小的整数倍：写 out 时 mask 要两个方向都有，(rm[:, None] < M) & (rn[None, :] < N)。"
WIDE = "N 比 BLOCK_N 大：grid 的第二维是 triton.cdiv(N, BLOCK_N)，列块的起点是 tl.program_id(1) * BLOCK_N。"
EXACT = "M、N 正好是 64/128/256 的整数倍或差 1：grid 用 triton.cdiv，块之间不重叠也不留空。"
BLOCKS = ("BLOCK_M 和 BLOCK_N 不相等：grid 是 (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，"
          "行块用 BLOCK_M、列块用 BLOCK_N，不要混用。")
WIDEINT = "x、y 是 int32，值超过 2^24：读进来直接相加，不要 .to(tl.float32)（float32 只有 24 位有效数字，加出来的和差几十）。"
OUT = "out 不是连续的（行间有空隙或转置视图）：写 out 的地址用 rm * out.stride(0) + rn * out.stride(1)，不要用 N 和 1。"


def cases(device, rng):
    def one(m, n, dt, hint=TAIL, blocks=None, out="contig", fill="randn", **kw):
        tag = {"padded": " out 行间有空隙", "transposed": " out 是转置视图"}.get(out, "")
        tag += " 值超过 2^24" if fill == "half_int32" else ""
        if blocks:
            tag += f" BLOCK_M={blocks[0]} BLOCK_N={blocks[1]}"
            kw.update(scalars={"BLOCK_M": blocks[0], "BLOCK_N": blocks[1]}, kwargs=("BLOCK_M", "BLOCK_N"))
        return Case(f"M={m} N={n} {dt}{tag}", dt, (Tensor("x", (m,), fill), Tensor("y", (n,), fill)), call=("x", "y"),
                    outputs=(Tensor("out", (m, n), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(5, 7, "float32", public=True), one(33, 65, "float32", public=True),
          one(70, 3, "float32"), one(3, 100, "float32", WIDE, public=True), one(40, 31, "float16", public=True),
          one(70, 50, "float32", BLOCKS, (64, 16), public=True), one(45, 70, "float32", BLOCKS + " " + OUT, (16, 64), "transposed"),
          one(40, 50, "float32", OUT, out="padded"), one(5, 7, "int32", WIDEINT, fill="half_int32")]
    m, n = near_multiples(rng, (64, 128, 256), 2, (1, 2))
    cs += [one(m, n, "float32", EXACT, hidden=True),
           one(*sizes(rng, 2, 20, 1), *sizes(rng, 257, 700, 1), "float32", WIDE, hidden=True),
           one(*sizes(rng, 65, 300, 2), "float16", hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 1：二维广播（outer add）", func="outer_add", reference=outer_add_spec, cases=cases,
                    tolerances={"float32": (1e-6, 1e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 1e-2)},
                    forbid=("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.outer"))
