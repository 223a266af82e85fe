# %% [markdown] id=dr06-intro
# # 基本功 6：在寄存器里转置一个 tile（`tl.trans`）
#
# 一个 tile 的形状就是它的指针块的形状：按 `y` 的行、列读进来的块是 `(BLOCK_N, BLOCK_M)`，
# 要和 `(BLOCK_M, BLOCK_N)` 的块相加，得先在寄存器里把它转过来：`tl.trans(block)`。
# 第 6 章的 attention 算 `q @ k^T` 时就是这样处理 `k` 的 tile。
#
# 给定 `x`（形状 `(M, N)`）和 `y`（形状 `(N, M)`），算 `out = x + y.T`（形状 `(M, N)`）。`x`、`y` 可能是 float32、float16，
# 也可能是 int32（值远超 2^24，和仍在 int32 里）。
#
# **要做的事**
#
# 1. 写 `add_transposed_kernel`：program `(pid_m, pid_n)` 负责 `out` 的一个 `BLOCK_M x BLOCK_N` 块；
#    `y` 的对应块按 `y` 自己的行、列读成 `(BLOCK_N, BLOCK_M)`，用 `tl.trans` 转置后再加。
# 2. 写包装函数 `add_transposed(x, y, out=None, BLOCK_M=32, BLOCK_N=16)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进 `out`；在包装函数里转置 `y`（`y.t()`、`y.T`、`y.mT`、`transpose`、`permute`、
#   `swapdims`、`movedim`、`as_strided` 等）、`.contiguous()` 和 torch 的加法记 0 分。
# - `BLOCK_M` 和 `BLOCK_N` 默认不相等：形状搞错时 Triton 会直接报形状不匹配，而不是悄悄算错。
# - `y` 可能行间有空隙，也可能本身是转置视图或别的 stride（例如隔列取的 `base[:, ::2]`）：用 `y` 的 stride。`x` 和 `out` 也一样不一定连续，
#   都用它们自己的 stride；测试还会传入别的 `BLOCK_M`、`BLOCK_N`。
# %% id=dr06-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr06-spec-md
# ## 规格（纯 torch）
# %% id=dr06-spec role=given
def add_transposed_spec(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y.T
# %% [markdown] id=dr06-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - `out` 块覆盖 `x` 的行 `rm`、列 `rn`；它需要的是 `y[rn, rm]`：`y` 块的指针是
#   `y_ptr + rn[:, None] * stride_yn + rm[None, :] * stride_ym`，形状 `(BLOCK_N, BLOCK_M)`，mask 也按这个形状写。
# - `tl.trans(yb)` 的形状是 `(BLOCK_M, BLOCK_N)`，和 `x` 块一样。
# %% id=dr06-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def add_transposed_kernel(x_ptr, y_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_yn, stride_ym,
                          stride_om, stride_on, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    xb = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    yb = tl.load(y_ptr + rn[:, None] * stride_yn + rm[None, :] * stride_ym,
                 mask=(rn[:, None] < N) & (rm[None, :] < M))
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, xb + tl.trans(yb), mask=mask)
    ### STUB
    # TODO: rm、rn；读 x 块 (BLOCK_M, BLOCK_N)；按 y 的行 rn、列 rm 读 y 块 (BLOCK_N, BLOCK_M)；
    #       tl.trans 之后相加；写回（mask）
    pass
    ### END SOLUTION


def add_transposed(x, y, out=None, BLOCK_M=32, BLOCK_N=16):
    M, N = x.shape
    assert y.shape == (N, M), "y must have shape (N, M)"
    out = torch.empty((M, N), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    add_transposed_kernel[grid](x, y, out, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    ### STUB
    # TODO: 二维 grid；x、y、out 的 stride 都传进去（y.stride(0) 是沿 N 的，y.stride(1) 是沿 M 的）
    raise NotImplementedError("TODO: launch add_transposed_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr06-selfcheck-md
# ## 自检
#
# **最常见的错误**：`y` 块按 `(rm, rn)` 的顺序读，相当于读了 `y[rm, rn]`：方阵上形状对得上，值却是错的。
# 第二常见：`y` 块的 mask 照抄 `x` 块的，形状是 `(BLOCK_M, BLOCK_N)`，和 `(BLOCK_N, BLOCK_M)` 的指针块对不上。
# %% id=dr06-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr06_tile_transpose", globals())
# %% id=dr06-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "M 或 N 不是块大小的整数倍：x 块和 out 块的 mask 是 (rm[:, None] < M) & (rn[None, :] < N)，y 块的是 (rn[:, None] < N) & (rm[None, :] < M)。"
TRANS = "out[i, j] = x[i, j] + y[j, i]：y 块要按 y 的行 rn、列 rm 读，再 tl.trans。"
STRIDE = "y 不是连续的（行间有空隙或转置视图）：y 的地址用 y.stride(0)（沿 N）和 y.stride(1)（沿 M）。"
XSTRIDE = "x 不是连续的（转置视图或行间有空隙）：x 的地址用 rm * x.stride(0) + rn * x.stride(1)，不要用 N 和 1。"
WIDEINT = "x、y 是 int32，值超过 2^24：读进来直接转置、相加，不要 .to(tl.float32)（float32 只有 24 位有效数字，加出来的和差几十）。"
OUT = "out 不是连续的（行间有空隙或转置视图）：写 out 的地址用 rm * out.stride(0) + rn * out.stride(1)，不要用 N 和 1。"
ODD = ("这个测试的 x、y、out 的 stride 既不是 (列数, 1) 也不是 (1, 行数)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "六个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
BLOCKS = ("换了 BLOCK_M、BLOCK_N：grid 是 (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，"
          "行块用 BLOCK_M、列块用 BLOCK_N，不要混用。")


def cases(device, rng):
    def one(m, n, dt, layout="contig", hint=TAIL, x="contig", out="contig", blocks=None, fill="randn", **kw):
        lay = {"padded": " {} 行间有空隙", "transposed": " {} 是转置视图", "transposed_padded": " {} 是行间有空隙的矩阵的转置",
               "step2": " {} 隔列取", "contig": ""}
        tag = lay[x].format("x") + lay[layout].format("y") + lay[out].format("out") + (" 值超过 2^24" if fill == "half_int32" else "")
        if blocks:
            tag += f" BLOCK_M={blocks[0]} BLOCK_N={blocks[1]}"
            kw.update(scalars={"BLOCK_M": blocks[0], "BLOCK_N": blocks[1]}, kwargs=("BLOCK_M", "BLOCK_N"))
        return Case(f"M={m} N={n} {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout=x), Tensor("y", (n, m), fill, layout=layout)),
                    call=("x", "y"), outputs=(Tensor("out", (m, n), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(5, 7, "float32", hint=TRANS, public=True),
          one(32, 32, "float32", hint=TRANS), one(33, 17, "float32", public=True),
          one(40, 50, "float32", "padded", STRIDE, public=True), one(37, 45, "float32", "transposed", STRIDE),
          one(33, 31, "float16", public=True),
          one(30, 50, "float32", hint=XSTRIDE, x="transposed", public=True),
          one(45, 40, "float32", "transposed", XSTRIDE + " " + OUT, x="padded", out="padded"),
          one(50, 70, "float32", hint=BLOCKS + " " + OUT, out="transposed", blocks=(16, 64)),
          one(5, 7, "int32", hint=WIDEINT, fill="half_int32")]
    m, n = near_multiples(rng, (64, 128), 2, (1, 2))
    cs += [one(m, n, "float32", hint=TRANS, hidden=True),
           one(*sizes(rng, 65, 160, 2), "float32", "padded", STRIDE, hidden=True),
           one(*sizes(rng, 3, 9, 1), *sizes(rng, 257, 500, 1), "float32", hint=TRANS, hidden=True),
           one(*sizes(rng, 65, 160, 2), "float16", "transposed", STRIDE, hidden=True),
           one(29, 37, "float32", "step2", ODD, x="transposed_padded", out="step2"),
           one(*sizes(rng, 20, 100, 2), "float32", "transposed_padded", ODD, x="step2", out="transposed_padded", hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 6：在寄存器里转置一个 tile（tl.trans）", func="add_transposed",
                    reference=add_transposed_spec, cases=cases,
                    tolerances={"float32": (1e-6, 1e-6), "float16": (2e-3, 2e-3), "bfloat16": (2e-2, 1e-2)},
                    # the add, a copy, and every torch way to a transposed view of y (the kernel reads y by its strides)
                    forbid=("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.contiguous",
                            *(f"torch.{op}" for op in ("t", "transpose", "permute", "swapdims", "swapaxes", "movedim",
                                                      "moveaxis", "adjoint", "as_strided")),
                            *(f"torch.Tensor.{op}" for op in ("t", "transpose", "permute", "swapdims", "swapaxes",
                                                             "movedim", "moveaxis", "adjoint", "as_strided", "T", "mT",
                                                             "H", "mH"))))
