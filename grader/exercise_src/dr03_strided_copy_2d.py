# %% [markdown] id=dr03-intro
# # 基本功 3：按 stride 拷贝二维张量
#
# torch 张量的元素 `x[i, j]` 在内存里的位置是 `i * x.stride(0) + j * x.stride(1)`（以元素为单位）。
# 切片、`.t()`、带空隙的行都只改 stride，不搬数据。第 4 章的 matmul 把 `A`、`B`、`C` 的六个 stride
# 都当参数传进 kernel，就是为了不假设输入是连续的。这道题只练 stride。
#
# 给定二维 `x`（形状 `(M, N)`，**stride 任意**），把它拷贝到 `out`（形状相同）：`out[i, j] = x[i, j]`。
#
# **要做的事**
#
# 1. 写 `copy_2d_kernel`：一个 program 拷贝一个 `BLOCK_M x BLOCK_N` 块，读按 `x` 的 stride，写按 `out` 的 stride。
# 2. 写包装函数 `copy_2d(x, out=None, BLOCK_M=32, BLOCK_N=32)`。
#
# **规则**（评分器会检查）
#
# - 拷贝由你的 Triton kernel 完成；在包装函数里用 torch 拷贝（`out.copy_(x)`、`x.clone()`、`.contiguous()`）记 0 分。结果必须逐位相等（x 里有 -0.0）。
# - 测试里有连续的 `x`、行之间有空隙的 `x`（`x.stride(0) > N`）、转置视图（`x.stride() == (1, M)`）和别的 stride（例如隔列取的 `base[:, ::2]`），
#   还有 int32 和 int64 的 `x`（值会用满 int32、int64 的范围，远超 2^24、2^53）：同一个 kernel 对任何元素类型都能用，
#   不要经过 float32 或 float64。
# - `out` 也可能不是连续的（行间有空隙、转置视图或别的 stride，也可能和 `x` 的 stride 相同）；测试还会传入不同的 `BLOCK_M`、`BLOCK_N`（两者不一定相等）。
# %% id=dr03-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr03-spec-md
# ## 规格（纯 torch）
# %% id=dr03-spec role=given
def copy_2d_spec(x: torch.Tensor) -> torch.Tensor:
    return x.clone()
# %% [markdown] id=dr03-kernel-md
# ## 你的 kernel
#
# 先在 Python 里看一看三种布局的 stride：
#
# ```python
# base = torch.arange(12.0).reshape(3, 4)
# print(base.stride(), base[:, :3].stride(), base.t().stride())   # (4, 1) (4, 1) (1, 4)
# ```
#
# 提示：`x` 块的指针是 `x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn`，`out` 块同理；
# 读和写用同一个二维 mask。
# %% id=dr03-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def copy_2d_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    block = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, block, mask=mask)
    ### STUB
    # TODO: rm、rn、二维 mask；按 x 的 stride 读一块，按 out 的 stride 写回
    pass
    ### END SOLUTION


def copy_2d(x, out=None, BLOCK_M=32, BLOCK_N=32):
    M, N = x.shape
    out = torch.empty((M, N), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    copy_2d_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    ### STUB
    # TODO: 二维 grid；x 和 out 的 stride 都传进去
    raise NotImplementedError("TODO: launch copy_2d_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr03-selfcheck-md
# ## 自检
#
# **最常见的错误**：把 `x` 当成连续的，用 `rm * N + rn` 做地址。连续的 `x` 完全正确，
# 行间有空隙时读错行，转置视图时读到的是 `x.T` 的元素。
# %% id=dr03-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr03_strided_copy_2d", globals())
# %% id=dr03-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "M 或 N 不是块大小的整数倍：读和写都要二维 mask，(rm[:, None] < M) & (rn[None, :] < N)。"
STRIDE = "x 不是连续的：读 x 用 x.stride(0)、x.stride(1)，写 out 用 out.stride(0)、out.stride(1)，不要用 N 和 1。"
EXACT = "M、N 正好是 64/128/256 的整数倍或差 1：grid 用 triton.cdiv，块之间不重叠也不留空。"
BLOCKS = ("BLOCK_M 和 BLOCK_N 不相等：grid 是 (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，"
          "行块用 BLOCK_M、列块用 BLOCK_N，不要混用。")
OUT = "out 不是连续的（行间有空隙或转置视图）：写 out 的地址用 rm * out.stride(0) + rn * out.stride(1)，不要用 N 和 1。"
ODD = ("这个测试的 x、out 的 stride 既不是 (N, 1) 也不是 (1, M)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "四个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
SAME = ("x 和 out 的 stride 相同、但都不连续（行间有空隙）：不能把它们当成一段连续内存整段拷贝"
        "（会漏掉后面的元素、写进行间的空隙），仍然按 (i, j) 和各自的 stride 拷贝。")
WIDEINT = ("int32 的值超过 2^24（用满整个范围）：读进来的块原样写回，不要 .to(tl.float32)"
           "（float32 只有 24 位有效数字，大整数会被舍入）。")
WIDEINT64 = ("int64 的值超过 2^53（用满整个范围）：读进来的块原样写回，不要经过 float64 或 float32"
             "（float64 只有 53 位有效数字，大整数会被舍入）。")


def cases(device, rng):
    def one(m, n, dt, layout="contig", hint=TAIL, fill="randn", blocks=None, out="contig", **kw):
        odd = {"transposed_padded": " {}是行间有空隙的矩阵的转置", "step2": " {}隔列取"}
        tag = {"padded": " 行间有空隙", "transposed": " 转置视图", **odd}.get(layout, "").format("x ")
        tag += {"padded": " out 行间有空隙", "transposed": " out 是转置视图", **odd}.get(out, "").format("out ")
        tag += {"full_int32": " 值用满 int32", "full_int64": " 值用满 int64", "signed_zeros": " 含 -0.0"}.get(fill, "")
        if blocks:
            tag += f" BLOCK_M={blocks[0]} BLOCK_N={blocks[1]}"
            kw.update(scalars={"BLOCK_M": blocks[0], "BLOCK_N": blocks[1]}, kwargs=("BLOCK_M", "BLOCK_N"))
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout),), call=("x",),
                    outputs=(Tensor("out", (m, n), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(7, 13, "float32", public=True, fill="signed_zeros"),
          one(40, 50, "float32", "padded", STRIDE, public=True), one(37, 45, "float32", "transposed", STRIDE, public=True),
          one(33, 31, "float16", "transposed", STRIDE), one(20, 70, "int32", "padded", STRIDE, fill="large", public=True),
          one(60, 70, "float32", hint=BLOCKS, blocks=(64, 16), public=True),
          one(70, 45, "float32", hint=BLOCKS + " " + OUT, blocks=(16, 64), out="transposed"),
          one(40, 50, "float32", "transposed", OUT, out="padded"),
          one(20, 30, "int32", "padded", WIDEINT, fill="full_int32"), one(20, 30, "float32", "padded", SAME, out="padded"),
          one(23, 19, "int64", "transposed", WIDEINT64, fill="full_int64")]
    m, n = near_multiples(rng, (64, 128, 256), 2, (1, 2))
    cs += [one(m, n, "float32", hint=EXACT, hidden=True),
           one(*sizes(rng, 65, 200, 2), "float32", "transposed", STRIDE, hidden=True),
           one(*sizes(rng, 65, 200, 2), "float16", "padded", STRIDE, hidden=True),
           one(*sizes(rng, 3, 9, 1), *sizes(rng, 257, 700, 1), "float32", "padded", STRIDE, hidden=True),
           one(*sizes(rng, 257, 700, 1), *sizes(rng, 3, 9, 1), "float32", "transposed", STRIDE, hidden=True),
           one(*sizes(rng, 33, 200, 2), "int32", "transposed", STRIDE, fill="large", hidden=True),
           one(29, 37, "float32", "transposed_padded", ODD, out="step2"),
           one(*sizes(rng, 30, 150, 2), "float32", "step2", ODD, out="transposed_padded", hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 3：按 stride 拷贝二维张量", func="copy_2d", reference=copy_2d_spec, cases=cases,
                    tolerances={"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)},
                    forbid=("torch.Tensor.clone", "torch.clone", "torch.Tensor.contiguous"))
