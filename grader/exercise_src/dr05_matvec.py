# %% [markdown] id=dr05-intro
# # 基本功 5：矩阵乘向量（matvec）
#
# 把前面几道题拼起来：二维块（基本功 1）、沿一个方向循环累加（基本功 2）、任意 stride（基本功 3）。
# 结果就是第 4 章 matmul 的骨架，只是 `B` 只有一列，所以还不需要 `tl.dot`：逐元素乘完按行求和。
#
# 给定 `a`（形状 `(M, K)`，stride 任意）和 `v`（长度 `K`），算 `out = a @ v`（长度 `M`）。
#
# **要做的事**
#
# 1. 写 `matvec_kernel`：一个 program 负责 `BLOCK_M` 行，沿 K 每次读 `BLOCK_K` 列，累加到 float32 的 `acc`。
# 2. 写包装函数 `matvec(a, v, out=None, BLOCK_M=32, BLOCK_K=128)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进 `out`；`a @ v`、`torch.mv`、`torch.matmul` 记 0 分。
# - `K` 可能远大于 `BLOCK_K`（也大于 256）；`a` 可能是转置视图或行间有空隙；float16 输入要用 float32 算乘积、块内的和与累加（部分和可能超过 float16 的最大值 65504）。
# - 测试会传入不同的 `BLOCK_M`、`BLOCK_K`（比如 `BLOCK_M=16`，或 `BLOCK_K` 比 `BLOCK_M` 小）。
# %% id=dr05-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr05-spec-md
# ## 规格（纯 torch）
# %% id=dr05-spec role=given
def matvec_spec(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return a @ v
# %% [markdown] id=dr05-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - 循环外：`rm`，`acc = tl.zeros((BLOCK_M,), dtype=tl.float32)`。
# - 循环 `for k0 in range(0, K, BLOCK_K)`：`rk = k0 + tl.arange(0, BLOCK_K)`；读 `a` 的 `(BLOCK_M, BLOCK_K)` 块和
#   `v` 的 `BLOCK_K` 个元素，**两个都**按 K mask、`other=0.0`；`acc += tl.sum(block * vk[None, :], axis=1)`。
# %% id=dr05-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def matvec_kernel(a_ptr, v_ptr, out_ptr, M, K, stride_am, stride_ak, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    ### BEGIN SOLUTION
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    acc = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        block = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                        mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0).to(tl.float32)
        vk = tl.load(v_ptr + rk, mask=rk < K, other=0.0).to(tl.float32)
        acc += tl.sum(block * vk[None, :], axis=1)
    tl.store(out_ptr + rm, acc, mask=rm < M)
    ### STUB
    # TODO: rm 和 float32 的 acc；沿 K 循环：读 a 块和 v 段（都按 K mask，other=0.0），乘、按行求和、累加；写回
    pass
    ### END SOLUTION


def matvec(a, v, out=None, BLOCK_M=32, BLOCK_K=128):
    M, K = a.shape
    out = torch.empty((M,), device=a.device, dtype=a.dtype) if out is None else out
    ### BEGIN SOLUTION
    matvec_kernel[(triton.cdiv(M, BLOCK_M),)](a, v, out, M, K, a.stride(0), a.stride(1),
                                              BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K)
    ### STUB
    # TODO: 一维 grid（行方向几个块）；a 的两个 stride 传进去
    raise NotImplementedError("TODO: launch matvec_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr05-selfcheck-md
# ## 自检
#
# **最常见的错误**：读 `a` 时按 K mask 了，读 `v` 时没有（或者反过来）。K 不是 `BLOCK_K` 的整数倍时，
# 多读的那几个 `v` 元素来自张量外面，哪怕 `a` 那边是 0，`0 * NaN` 仍然是 NaN。
# %% id=dr05-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr05_matvec", globals())
# %% id=dr05-grading role=grading
from grader.spec import HALVES_TOL, Case, Exercise, Tensor, near_multiples, sizes

WRAP = ("v 里有一个 +inf，K 比 BLOCK_K 小：读 v 也要 mask（other=0.0）。用 % K 绕回来、指望 a 补的 0 把多出来的项抵消，"
        "碰上 inf 就是 0 * inf = NaN。")
TAIL = "M 或 K 不是块大小的整数倍：a 块按 M 和 K 两个方向 mask，v 段按 K mask，都用 other=0.0。"
KLOOP = "K 远大于 BLOCK_K（也大于 256）：沿 K 循环 for k0 in range(0, K, BLOCK_K)，每一段都累加进 acc。"
STRIDE = "a 不是连续的（转置视图或行间有空隙）：地址用 rm * a.stride(0) + rk * a.stride(1)。"
ACC = "float16 输入、K 很大、元素全为正：累加器必须是 float32，读进来先 .to(tl.float32)。"
CANCEL = ("float16 输入，a 的前一半列约 +100、后一半约 -100，v 约 100：每个乘积约 ±1e4，沿 K 的部分和超过 float16 的最大值 "
          "65504，结果却不大。乘积和块内的 tl.sum 都要在 float32 里算（先 .to(tl.float32)），只在 store 时转回 float16。")
BLOCKS = ("换了 BLOCK_M、BLOCK_K：grid 是 (triton.cdiv(M, BLOCK_M),)，不要写死 32；"
          "沿 K 循环的步长和每次读的列数都是 BLOCK_K，不要和 BLOCK_M 混用。")

ODD = ("这个测试的 a 的 stride 既不是 (K, 1) 也不是 (1, M)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "两个 stride 都用 .stride() 传进 kernel，不要按布局去猜哪个是 1。")


def cases(device, rng):
    def one(m, k, dt, layout="contig", hint=TAIL, fill="randn", blocks=None, vfill=None, **kw):
        tag = {"padded": " a 行间有空隙", "transposed": " a 是转置视图", "transposed_padded": " a 是行间有空隙的矩阵的转置",
               "step2": " a 隔列取"}.get(layout, "") + (" 全正" if fill == "positive" else "") + \
            (" a 前一半列约 +100、后一半约 -100，v 约 100" if fill == "halves" else "") + (" v 里有一个 +inf" if vfill == "one_inf" else "")
        if blocks:
            tag += f" BLOCK_M={blocks[0]} BLOCK_K={blocks[1]}"
            kw.update(scalars={"BLOCK_M": blocks[0], "BLOCK_K": blocks[1]}, kwargs=("BLOCK_M", "BLOCK_K"))
        return Case(f"M={m} K={k} {dt}{tag}", dt, (Tensor("a", (m, k), fill, layout), Tensor("v", (k,), vfill or fill)),
                    call=("a", "v"), out_shape=(m,), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(7, 5, "float32", public=True), one(33, 65, "float32", public=True),
          one(7, 5, "float32", hint=WRAP, vfill="one_inf"),
          one(40, 300, "float32", hint=KLOOP, public=True), one(45, 70, "float32", "transposed", STRIDE, public=True),
          one(30, 100, "float32", "padded", STRIDE), one(33, 65, "float16", public=True),
          one(70, 50, "float32", hint=BLOCKS, blocks=(16, 128), public=True),
          one(70, 300, "float32", "transposed", BLOCKS, blocks=(64, 16)),
          one(20, 96, "float16", hint=CANCEL, fill="halves", vfill="near_100", tol=HALVES_TOL)]
    m = near_multiples(rng, (64, 128), 1, (1, 2))[0]
    cs += [one(m, k, "float32", hint=KLOOP, hidden=True) for k in near_multiples(rng, (256, 512), 1, (1, 3), above=256)]
    cs += [one(*sizes(rng, 257, 400, 1), *sizes(rng, 257, 700, 1), "float32", "transposed", STRIDE, hidden=True),
           one(*sizes(rng, 20, 40, 1), 4096, "float16", fill="positive", hint=ACC, tol=(0.5, 1e-4), hidden=True)]
    cs += [one(29, 37, "float32", "step2", ODD),
           one(*sizes(rng, 30, 150, 2), "float32", "transposed_padded", ODD, hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 5：矩阵乘向量（matvec）", func="matvec", reference=matvec_spec, cases=cases,
                    tolerances={"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-1, 2e-2)},
                    forbid=("torch.matmul", "torch.mv", "torch.mm", "torch.einsum", "torch.Tensor.__matmul__",
                            "torch.Tensor.matmul", "torch.Tensor.mv", "torch.sum", "torch.Tensor.sum"))
