# %% [markdown] id=dr07-intro
# # 基本功 7：小矩阵的批量乘法（`tl.dot`，三个方向都要 mask）
#
# `tl.dot(a, b)` 把一个 `(BLOCK_M, BLOCK_K)` 块乘一个 `(BLOCK_K, BLOCK_N)` 块，在 GPU 上用 Tensor Core。
# 三个块大小都要是 2 的幂（`tl.arange` 的要求）；`BLOCK_K` 还有下限：float16 输入至少 16，float32 在 Triton 3.9 上至少 8
# （`M`、`N` 方向 Triton 允许小到 1 的块，内部会补齐；本题三个块统一取至少 16，写法简单）。
# 所以矩阵的真实大小 `M`、`N`、`K` 不是 2 的幂时，三个方向都有多出来的部分：
# `M`、`N` 方向多出来的结果不能写回，`K` 方向多出来的部分必须读成 0，否则会被乘进结果里。
# 第 4 章的 matmul 在这个基础上再加两件事：`out` 切成很多 tile，K 方向循环。
#
# 给定 `a`（形状 `(B, M, K)`）和 `b`（形状 `(B, K, N)`），`M`、`N`、`K` 都不超过 64，算 `out[i] = a[i] @ b[i]`。
#
# **要做的事**
#
# 1. 写 `batched_dot_kernel`：一个 program 算一个批次的整个 `(M, N)` 结果，一次 `tl.dot`，不需要循环。
# 2. 写包装函数 `batched_dot(a, b, out=None)`：块大小取 `max(16, triton.next_power_of_2(维度))`，grid 是 `(B,)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进 `out`；`torch.bmm`、`@`、`torch.matmul` 记 0 分。
# - 测试的 `M`、`N`、`K` 从 1 到 64 都有（包括 17、33 这种刚过 2 的幂的和 63 这种差一点到的）；float32 和 float16，累加用 float32。
#   批次数 `B` 也可能是 533（比 GPU 上常用的 program 数多）。
# - `a`、`b`、`out` 不一定连续：批次之间、行之间可能有空隙，`a` 或 `b` 也可能是最后两维交换过的视图
#   （`.transpose(1, 2)`），或是别的 stride（例如最后一维隔一个取）。9 个 stride 都要用上。
# - float16 的乘积和部分和可能超过 float16 的最大值 65504（最后的结果却不大）：`tl.dot` 用默认的 float32 输出。
# %% id=dr07-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr07-spec-md
# ## 规格（纯 torch）
# %% id=dr07-spec role=given
def batched_dot_spec(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.bmm(a, b)
# %% [markdown] id=dr07-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - 批次 `i = tl.program_id(0)` 的起点是 `a_ptr + i * stride_ab`（`b`、`out` 同理）。
# - `rm`、`rn`、`rk` 各是一个 `tl.arange`；`a` 块的 mask 是 `(rm[:, None] < M) & (rk[None, :] < K)`，
#   `b` 块的是 `(rk[:, None] < K) & (rn[None, :] < N)`，两个都 `other=0.0`。
# - `acc = tl.dot(a_blk, b_blk)` 是 float32（float16 输入也是）；`tl.store` 写回时转成 `out` 的类型。
# %% id=dr07-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def batched_dot_kernel(a_ptr, b_ptr, out_ptr, M, N, K,
                       stride_ab, stride_am, stride_ak, stride_bb, stride_bk, stride_bn,
                       stride_ob, stride_om, stride_on,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    ### BEGIN SOLUTION
    i = tl.program_id(0)
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_blk = tl.load(a_ptr + i * stride_ab + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b_blk = tl.load(b_ptr + i * stride_bb + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.dot(a_blk, b_blk)
    tl.store(out_ptr + i * stride_ob + rm[:, None] * stride_om + rn[None, :] * stride_on, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
    ### STUB
    # TODO: 批次 i；rm、rn、rk；读 a 块和 b 块（各自的二维 mask，other=0.0）；tl.dot；写回（按 M、N mask）
    pass
    ### END SOLUTION


def batched_dot(a, b, out=None):
    B, M, K = a.shape
    assert b.shape[0] == B and b.shape[1] == K and M <= 64 and K <= 64 and b.shape[2] <= 64
    N = b.shape[2]
    out = torch.empty((B, M, N), device=a.device, dtype=a.dtype) if out is None else out
    ### BEGIN SOLUTION
    BLOCK_M, BLOCK_N, BLOCK_K = (max(16, triton.next_power_of_2(d)) for d in (M, N, K))
    batched_dot_kernel[(B,)](a, b, out, M, N, K, a.stride(0), a.stride(1), a.stride(2),
                             b.stride(0), b.stride(1), b.stride(2), out.stride(0), out.stride(1), out.stride(2),
                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    ### STUB
    # TODO: 三个块大小（至少 16 的 2 的幂）；grid = (B,)；9 个 stride 都传进去
    raise NotImplementedError("TODO: launch batched_dot_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr07-selfcheck-md
# ## 自检
#
# **最常见的错误**：K 方向只 mask 了 `a`，没有 mask `b`（或反过来）。多读的 `b` 行来自下一个批次或张量外面，
# `0 * 有限值` 是 0，看起来没事；一旦读到的是 NaN 或 inf（张量外面的内存），`0 * NaN` 就是 NaN。
# 第二常见：块大小写死成 32：`M`、`N` 或 `K` 超过 32 的那部分根本没算。
# %% id=dr07-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr07_batched_dot", globals())
# %% id=dr07-grading role=grading
from grader.spec import HALVES_TOL, PAST_FLOAT16_TOL, Case, Exercise, Tensor, sizes

WRAP = ("b 里有一个 +inf，K 比块小：a、b 沿 K 的读都要 mask（other=0.0）。用 % K 把越界的行绕回来、指望 a 补的 0 "
        "把它们抵消，碰上 inf 就是 0 * inf = NaN。")
TAIL = "M、N、K 有的比块小（块是至少 16 的 2 的幂）：a 块按 M、K mask，b 块按 K、N mask（都 other=0.0），写回按 M、N mask。"
SMALL_K = "float16 输入、K 只有 5：BLOCK_K 仍要至少 16（tl.dot 对 16 位输入的要求，GPU 上编译不过就记错）。"
BLOCKS = "有的维度超过 32：块大小按维度选，max(16, triton.next_power_of_2(d))，不要写死。"
BATCH = "批次之间有空隙：批次 i 的起点是 i * a.stride(0)（b、out 同理）：用 stride，不要用 M * K。"
STRIDE = "不是连续的张量：行内、行间、批次之间的距离各用各的 stride（a 的三个、b 的三个、out 的三个），不要假设哪一个是 1。"
ODD = ("这个测试的 a、b、out 的 stride 都不是连续、行间有空隙或转置视图那几种（例如最后一维隔一个取，或有空隙的矩阵的转置）："
       "9 个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
CANCEL = ("float16 输入，a 的前一半列约 +100、后一半约 -100，b 约 100：每个乘积约 ±1e4，部分和超过 float16 的最大值 65504，"
          "最后的结果却不大。tl.dot 用默认的 float32 输出，只在 store 时转回 float16（不要写 out_dtype=tl.float16）。")
TAG = {"padded": "有空隙", "transposed": "是转置视图", "transposed_padded": "是有空隙的矩阵的转置", "step2": "最后一维隔一个取"}


RANGE = ("float32 输入，a 约为 ±1e6（大多超过 float16 的最大值 65504），结果也一样大：float32 的 a、b 直接交给 tl.dot，"
         "不要先转成 float16（会变成 inf）；结果按 out 的 dtype 写回，也不要经过 float16。")
MANY_BATCHES = ("533 个批次，比 GPU 上常用的 program 数（132、4 × 132 = 528）多，也不是它们的整数倍：grid 就是 (B,)，"
                "每个批次一个 program；持久化写法也要让每个批次都有 program 处理（按 b += tl.num_programs(0) 循环）。")


def cases(device, rng):
    def one(bs, m, n, k, dt, hint=TAIL, a="contig", b="contig", out="contig", fills=("randn", "randn"), **kw):
        tags = "".join(f" {name} {TAG[lay]}" for name, lay in (("a", a), ("b", b), ("out", out)) if lay != "contig")
        tags += " a 前半 +100 后半 -100、b 约 100" if fills[0] == "halves" else ""
        tags += " a 约为 ±1e6" if fills[0] == "past_float16" else ""
        tags += " b 里有一个 +inf" if fills[1] == "one_inf" else ""
        return Case(f"B={bs} M={m} N={n} K={k} {dt}{tags}", dt,
                    (Tensor("a", (bs, m, k), fills[0], a), Tensor("b", (bs, k, n), fills[1], b)), call=("a", "b"),
                    outputs=(Tensor("out", (bs, m, n), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, 1, 1, "float32", public=True), one(3, 5, 7, 9, "float32", public=True),
          one(2, 3, 7, 5, "float32", WRAP, fills=("randn", "one_inf")),
          one(4, 16, 16, 16, "float32", BATCH, a="padded", out="padded"), one(2, 33, 17, 31, "float32", public=True),
          one(5, 64, 40, 63, "float32", BLOCKS, public=True), one(3, 20, 24, 33, "float16", public=True),
          one(3, 20, 24, 17, "float32", STRIDE, a="transposed", b="padded", public=True),
          one(4, 24, 20, 30, "float16", STRIDE, b="transposed", out="padded"), one(3, 5, 7, 5, "float16", SMALL_K),
          one(2, 9, 12, 40, "float16", CANCEL, fills=("halves", "near_100"), tol=HALVES_TOL),
          one(533, 2, 3, 2, "float32", MANY_BATCHES),
          one(3, 20, 24, 33, "float32", RANGE, fills=("past_float16", "randn"), tol=PAST_FLOAT16_TOL)]
    cs += [one(rng.randint(9, 20), *sizes(rng, 33, 64, 3), "float32", BLOCKS, hidden=True),
           one(rng.randint(5, 12), *sizes(rng, 2, 31, 3), "float32", TAIL, hidden=True),
           one(rng.randint(5, 12), *sizes(rng, 17, 64, 3), "float16", TAIL, hidden=True),
           one(3, 29, 37, 45, "float32", ODD, a="transposed_padded", b="step2", out="step2"),
           one(rng.randint(2, 6), *sizes(rng, 17, 64, 3), "float32", ODD, a="step2", b="transposed_padded",
               out="transposed_padded", hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 7：小矩阵的批量乘法（tl.dot）", func="batched_dot", reference=batched_dot_spec,
                    cases=cases,
                    tolerances={"float32": (5e-2, 1e-2), "float16": (2e-2, 1e-2),
                                "bfloat16": (1e-1, 2e-2)},
                    forbid=("torch.matmul", "torch.bmm", "torch.mm", "torch.einsum", "torch.baddbmm",
                            "torch.Tensor.__matmul__", "torch.Tensor.matmul", "torch.Tensor.bmm"))
