# %% [markdown] id=dr02-intro
# # 基本功 2：按列求和（沿一个方向循环）
#
# 第 3 章最后一节讲了“一行放不进一个 block”时怎么办：在 kernel 里按块循环，把结果累加起来。
# 第 4 章 matmul 的 K 循环是同一个动作：固定一个输出块，沿一个方向一块一块地读，累加进 float32 的 `acc`。
# 这道题只练这个循环。
#
# 给定二维 `x`（形状 `(M, N)`，**不一定连续**），算每一列的和：`out[j] = sum_i x[i, j]`（长度 `N`）。
#
# **要做的事**
#
# 1. 写 `col_sum_kernel`：一个 program 负责 `BLOCK_N` 列，沿行方向每次读 `BLOCK_M` 行，累加。
# 2. 写包装函数 `col_sum(x, out=None, BLOCK_M=32, BLOCK_N=32)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进 `out`，`return out`；`x.sum(...)`、`torch.sum` 记 0 分。
# - `M` 可能远大于 `BLOCK_M`（几百到近万行）；有的测试里 `x` 的行之间有空隙，有的 `x` 是转置视图。
# - 测试会传入不同的 `BLOCK_M`、`BLOCK_N`（两者不一定相等）。
# - float16 输入也要对：读进来先转成 float32，块内的和与累加器都用 float32（一列的部分和可能超过 float16 的最大值 65504），存回时 `tl.store` 会转换成 `out` 的类型。
# %% id=dr02-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr02-spec-md
# ## 规格（纯 torch）
# %% id=dr02-spec role=given
def col_sum_spec(x: torch.Tensor) -> torch.Tensor:
    return x.sum(dim=0)
# %% [markdown] id=dr02-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - 循环外：`rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)`，`acc = tl.zeros((BLOCK_N,), dtype=tl.float32)`。
# - 循环 `for m0 in range(0, M, BLOCK_M)`：`rm = m0 + tl.arange(0, BLOCK_M)`，读一个 `(BLOCK_M, BLOCK_N)` 块
#   （二维 mask，`other=0.0`，地址用 `x` 的两个 stride），`acc += tl.sum(block, axis=0)`。
# - 被 mask 掉的行读成 0，才不会加进总和。
# %% id=dr02-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def col_sum_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for m0 in range(0, M, BLOCK_M):
        rm = m0 + tl.arange(0, BLOCK_M)
        block = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn,
                        mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
        acc += tl.sum(block.to(tl.float32), axis=0)
    tl.store(out_ptr + rn, acc, mask=rn < N)
    ### STUB
    # TODO: rn 和 float32 的 acc；沿行循环：读一块（二维 mask，other=0.0），按列求和累加；写回 acc（mask）
    pass
    ### END SOLUTION


def col_sum(x, out=None, BLOCK_M=32, BLOCK_N=32):
    M, N = x.shape
    out = torch.empty((N,), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    col_sum_kernel[(triton.cdiv(N, BLOCK_N),)](x, out, M, N, x.stride(0), x.stride(1),
                                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    ### STUB
    # TODO: 一维 grid（列方向几个块）；把 x 的两个 stride 传进去
    raise NotImplementedError("TODO: launch col_sum_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr02-selfcheck-md
# ## 自检
#
# **最常见的错误**：没有循环，只读了前 `BLOCK_M` 行——`M <= BLOCK_M` 时看不出来。
# 第二常见：把 `stride_xm` 写成 `N`、`stride_xn` 写成 1，`x` 是连续的时候对，换成转置视图就错了。
# 第三常见：float16 输入用 float16 的累加器：近万行的和每加一次就舍入一次。
# %% id=dr02-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr02_col_sum", globals())
# %% id=dr02-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

WRAP = ("x 里有一个 +inf，M 比 BLOCK_M 小：越界的行用 mask 关掉（other=0.0），不要用 % M 绕回来再乘 0"
        "（0 * inf = NaN）。")
TAIL = "M 或 N 不是块大小的整数倍：读块时 mask 两个方向，而且 other=0.0；写 out 时按列 mask。"
LOOP = "M 比 BLOCK_M 大得多：要沿行循环 for m0 in range(0, M, BLOCK_M)，每一块都累加进 acc。"
STRIDE = "x 不是连续的（行间有空隙或者是转置视图）：地址用 rm * x.stride(0) + rn * x.stride(1)。"
ACC = "float16 输入、近万行、元素全为正：累加器必须是 float32（tl.zeros(..., dtype=tl.float32)，读进来先 .to(tl.float32)）。"
CANCEL = ("float16 输入，前一半行约 +3000、后一半约 -3000：每列的部分和超过 float16 的最大值 65504，整列的和却不大。"
          "读进来先 .to(tl.float32)，块内的 tl.sum 和累加都在 float32 里做，只在 store 时转回 float16。")
BLOCKS = ("BLOCK_M 和 BLOCK_N 不相等：grid 是 (triton.cdiv(N, BLOCK_N),)，列块用 BLOCK_N；"
          "沿行循环的步长和每次读的行数都是 BLOCK_M，不要混用。")

ODD = ("这个测试的 x 的 stride 既不是 (N, 1) 也不是 (1, M)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "两个 stride 都用 .stride() 传进 kernel，不要按布局去猜哪个是 1。")


def cases(device, rng):
    def one(m, n, dt, layout="contig", hint=TAIL, fill="randn", blocks=None, **kw):
        tag = {"padded": " 行间有空隙", "transposed": " 转置视图", "transposed_padded": " x 是行间有空隙的矩阵的转置",
               "step2": " x 隔列取"}.get(layout, "") + (" 全正" if fill == "positive" else "") + \
            (" 前一半行约 +3000、后一半约 -3000" if fill == "row_halves" else "") + (" 有一个 +inf" if fill == "one_inf" else "")
        if blocks:
            tag += f" BLOCK_M={blocks[0]} BLOCK_N={blocks[1]}"
            kw.update(scalars={"BLOCK_M": blocks[0], "BLOCK_N": blocks[1]}, kwargs=("BLOCK_M", "BLOCK_N"))
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout),), call=("x",),
                    out_shape=(n,), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(7, 5, "float32", public=True), one(7, 5, "float32", hint=WRAP, fill="one_inf"),
          one(100, 33, "float32", hint=LOOP,
                                                                                     public=True),
          one(65, 70, "float32", "padded", STRIDE, public=True), one(50, 40, "float32", "transposed", STRIDE),
          one(70, 20, "float16", hint=LOOP, public=True),
          one(60, 70, "float32", hint=BLOCKS, blocks=(64, 16), public=True),
          one(100, 90, "float32", "transposed", BLOCKS, blocks=(16, 64)), one(128, 40, "float16", hint=CANCEL, fill="row_halves"),
          one(2048, 40, "float16", hint=CANCEL, fill="row_halves")]
    m, n = near_multiples(rng, (64, 128, 256), 2, (1, 3))
    cs += [one(m, n, "float32", hint=LOOP, hidden=True),
           one(*sizes(rng, 300, 900, 1), *sizes(rng, 33, 90, 1), "float32", "transposed", STRIDE, hidden=True),
           one(*sizes(rng, 100, 200, 1), *sizes(rng, 257, 400, 1), "float32", "padded", STRIDE, hidden=True),
           one(*sizes(rng, 8000, 12_000, 1), *sizes(rng, 33, 64, 1), "float16", fill="positive", hint=ACC,
               tol=(1.0, 1e-3), hidden=True)]
    cs += [one(29, 37, "float32", "step2", ODD),
           one(*sizes(rng, 30, 150, 2), "float32", "transposed_padded", ODD, hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 2：按列求和（沿一个方向循环）", func="col_sum", reference=col_sum_spec, cases=cases,
                    tolerances={"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-1, 2e-2)},
                    forbid=("torch.sum", "torch.Tensor.sum"))
