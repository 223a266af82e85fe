# %% [markdown] id=dr08-intro
# # 基本功 8：按行前缀和（`tl.cumsum` 跨块）
#
# `tl.cumsum(v, axis=0)` 只在一个块里做前缀和。一行比块长时，后面的块要加上**前面所有块的总和**：
# 在沿行的循环里带一个 `carry`，每处理完一块就更新它。第 6 章的 online softmax 也是这样，
# 循环里带着“到目前为止的最大值和分母”，每来一块就更新一次。
#
# 给定二维 `x`（形状 `(M, N)`，行之间可能有空隙），算每一行的前缀和：`out[i, j] = x[i, 0] + ... + x[i, j]`。
#
# **要做的事**
#
# 1. 写 `cumsum_kernel`：一个 program 处理一整行，沿行每次读 `BLOCK` 个元素。
# 2. 写包装函数 `row_cumsum(x, out=None, BLOCK=128)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 算出来并写进 `out`；`torch.cumsum` 记 0 分。
# - `N` 可能比 `BLOCK` 大很多；float16 输入用 float32 累加。测试也会传入别的 `BLOCK`（比如 32）。行数 `M` 也可能是 533（比 GPU 上常用的 program 数多）。
# - `out` 也可能行间有空隙（`out.stride(0) > N`，`out.stride(1) == 1`）：写第 `row` 行用 `row * out.stride(0)`。
# - 一个 program 不能假定另一个 program 已经跑完，除非真的等到了它写的标志（见下面的提示）：不经原子操作就读别的 program
#   在同一次 launch 里写的元素，评分器直接报数据竞争。用了原子操作（标志、取号、累加）时，评分器还会让 grid 里的 program
#   **交错运行**再跑一遍（随机顺序开始，每次访存后都可能换别的 program 先跑，像在 GPU 上），并按 program 共享的元素
#   再交错两遍：后取号的 program 会抢在先取号的前面；共享元素上编号大的 program 先读写。
# - 同一个 program 里的元素也一样：先 `tl.store` 一块、再 `tl.load` 别的元素写的值（比如自己用全局内存做倍增扫描），
#   写和读之间要 `tl.debug_barrier()`（读完再覆盖之前也要）。解释器一次对整块执行一条语句，看不出问题；
#   GPU 上这些元素分在不同线程和 warp 上。评分器会检查这一点。
# %% id=dr08-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr08-spec-md
# ## 规格（纯 torch）
# %% id=dr08-spec role=given
def row_cumsum_spec(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x, dim=1)
# %% [markdown] id=dr08-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - 循环外 `carry = 0.0`（一个 float32 标量）。
# - 循环 `for n0 in range(0, N, BLOCK)`：读一块（mask，`other=0.0`，先 `.to(tl.float32)`），
#   `tl.cumsum(v, axis=0) + carry` 就是这一块的结果；然后 `carry += tl.sum(v, axis=0)`。
# - 为什么不能“让第 `j` 块的 program 去读第 `j-1` 块已经写好的最后一个结果”？GPU 上两个 program 同时跑，
#   读的时候它可能还没写。评分器让 program 交错运行，就是要抓这种只在顺序执行时才对的写法。
#   真要让 carry 在 program 之间传递，后一块就得**等**前一块：前一块写好自己的前缀和之后用 `tl.atomic_xchg`
#   置一个标志，后一块反复 `tl.atomic_add(flag, 0)`，读到 1 才往下走（decoupled look-back 的思路）。
#   这两个原子操作默认 `sem="acq_rel"`：置标志是 release（之前写的前缀和先对别人可见），读标志是 acquire
#   （之后读的前缀和不会早于标志）。写成 `sem="relaxed"`、或者用 `tl.load(flag, volatile=True)` 去等，GPU 上
#   可能先看到标志、后看到前缀和，评分器会按内存顺序报错。
#   交错运行时，在等的 program 会一直等到被等的那个写完，这种写法能通过；一行一个 program 的循环更简单。
#   标志要是永远等不到（忘了置标志，或者等的是编号更大的 program：解释器按编号顺序一个一个跑，它还没开始），
#   这个等待就不会结束。评分器不等到超时：同一个位置被连续读一万次、值一直不变，就报“等待不会结束”，
#   并写出是哪个 program 在等、读的是哪个张量。
# %% id=dr08-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def cumsum_kernel(x_ptr, out_ptr, N, stride_xm, stride_om, BLOCK: tl.constexpr):
    ### BEGIN SOLUTION
    row = tl.program_id(0)
    carry = 0.0
    for n0 in range(0, N, BLOCK):
        cols = n0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride_xm + cols, mask=cols < N, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride_om + cols, tl.cumsum(v, axis=0) + carry, mask=cols < N)
        carry += tl.sum(v, axis=0)
    ### STUB
    # TODO: carry = 0.0；沿行循环：读一块（mask），块内 cumsum 加 carry 写回，再把这一块的和加进 carry
    pass
    ### END SOLUTION


def row_cumsum(x, out=None, BLOCK=128):
    M, N = x.shape
    assert x.stride(1) == 1, "this drill expects rows stored contiguously (x.stride(1) == 1)"
    out = torch.empty((M, N), device=x.device, dtype=x.dtype) if out is None else out
    ### BEGIN SOLUTION
    cumsum_kernel[(M,)](x, out, N, x.stride(0), out.stride(0), BLOCK=BLOCK)
    ### STUB
    # TODO: 一行一个 program；cumsum_kernel[grid](...)
    raise NotImplementedError("TODO: launch cumsum_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr08-selfcheck-md
# ## 自检
#
# **最常见的错误**：没有 `carry`，每一块各自从 0 开始：`N <= BLOCK` 时完全正确。
# 第二常见：`carry` 加的是 `tl.cumsum` 的结果而不是这一块的和（多加了很多次）。
# %% id=dr08-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr08_cumsum", globals())
# %% id=dr08-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "N 不是 BLOCK 的整数倍：最后一块要 mask，读的时候 other=0.0，这样 carry 不会加进垃圾值。"
CARRY = "N 比 BLOCK 大：后面的块要加上前面所有块的和（循环里带一个 carry，每块结束时 carry += tl.sum(v)）。"
STRIDE = "行之间有空隙：第 row 行的起点是 row * x.stride(0)（写 out 用 out.stride(0)）。"
ONE_INF = ("这一行里有一个 +inf，之后的前缀和都是 +inf：carry 用 tl.sum(块) 累加，不要用乘一个 0/1 的掩码去挑最后一个前缀"
           "（inf * 0 是 NaN，后面的块就全是 NaN）。")
OUT = "out 行间有空隙：写第 row 行的起点是 row * out.stride(0)，不是 row * N。"
LONG = "float16 的长行（2 万列）：carry 要一直用 float32 累加，中途存成 float16 的误差会一块一块积累起来。"
BLOCK = "换了 BLOCK：循环的步长和每次读的元素个数都是参数 BLOCK，不要写死 128。"


MANY_ROWS = ("533 行，比 GPU 上常用的 program 数（132、4 × 132 = 528）多，也不是它们的整数倍：每一行都要有 program 处理。"
             "持久化写法里每个 program 按 row += tl.num_programs(0) 循环，或者处理 cdiv(行数, program 数) 行，不能向下取整。")


def cases(device, rng):
    def one(m, n, dt, layout="contig", hint=TAIL, out="contig", block=None, fill="randn", **kw):
        tag = " 行间有空隙" if layout == "padded" else ""
        tag += " 含一个 +inf" if fill == "one_inf" else ""
        tag += " out 行间有空隙" if out == "padded" else ""
        if block:
            tag += f" BLOCK={block}"
            kw.update(scalars={"BLOCK": block}, kwargs=("BLOCK",))
        return Case(f"({m}, {n}) {dt}{tag}", dt, (Tensor("x", (m, n), fill, layout=layout),), call=("x",),
                    outputs=(Tensor("out", (m, n), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, "float32", public=True), one(3, 7, "float32", public=True), one(4, 129, "float32", hint=CARRY, public=True),
          one(5, 300, "float32", hint=CARRY), one(6, 200, "float32", "padded", STRIDE, public=True),
          one(3, 100, "float16", public=True),
          one(4, 300, "float32", hint=OUT, out="padded", public=True), one(3, 100, "float32", "padded", BLOCK, block=32),
          one(2, 20_000, "float16", hint=LONG), one(533, 5, "float32", hint=MANY_ROWS),
          one(2, 300, "float32", hint=ONE_INF, fill="one_inf")]
    cs += [one(rng.randint(2, 6), n, "float32", hint=CARRY, hidden=True) for n in near_multiples(rng, (128, 256, 1024), 2, (1, 2), above=128)]
    cs += [one(rng.randint(3, 8), *sizes(rng, 300, 1500, 1), "float32", "padded", STRIDE, hidden=True),
           one(rng.randint(2, 5), *sizes(rng, 200, 800, 1), "float16", hint=CARRY, hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 8：按行前缀和（tl.cumsum 跨块）", func="row_cumsum", reference=row_cumsum_spec,
                    cases=cases,
                    tolerances={"float32": (1e-4, 1e-5), "float16": (2e-2, 5e-3), "bfloat16": (2e-1, 2e-2)},
                    forbid=("torch.cumsum", "torch.Tensor.cumsum", "torch.Tensor.cumsum_"))
