# %% [markdown] id=ex09-intro
# # 练习 9：带种子的 dropout（前向与反向用同一个 mask，mask 不存）
#
# `out[i] = x[i] / (1 - p)`（保留）或 `0`（丢弃）。元素 `i` 是否保留由 **`tl.rand(seed, i) > p`** 决定，
# `i` 是元素在整个张量里的下标（不是 block 内的下标）。这样：
#
# - 同一个 `seed`，换 `BLOCK_SIZE` 得到完全相同的 mask（评分器会用几种 BLOCK_SIZE 测）；
# - 反向不需要存 mask：`dropout_backward(dy, p, seed)` 用同一个种子重新生成它：保留的元素 `dx = dy / (1 - p)`，丢弃的是 `0`。
# - 丢弃的元素一定写 `0`，即使输入是 inf 或 NaN：用 `tl.where(keep, x / (1 - p), 0.0)`，不要乘 mask（`inf * 0` 是 NaN）。
#
# `seed` 可以是 0 到 2^63 - 1 之间的任何整数，`tl.rand` 用到它的全部 64 位：原样传给 kernel，不要截断或取模。
#
# **要做的事**：`dropout_kernel`，以及 `dropout(x, p, seed, out=None, BLOCK_SIZE=1024)` 和
# `dropout_backward(dy, p, seed, out=None, BLOCK_SIZE=1024)` 两个包装函数（提示：反向可以启动同一个 kernel）。
#
# **规则**：结果由 Triton kernel 算（`torch.nn.functional.dropout`、`torch.rand`、`torch.where`、`torch.bernoulli` 等记 0 分）；
# 写进 `out` 并返回；`x` 是一维连续张量。测试包括 n = 1、质数、BLOCK_SIZE 的倍数 ±1，p = 0、0.1、0.3、0.5、0.9、0.999，
# 也有 p 恰好等于某个 `tl.rand(seed, i)` 的情形（那个元素要丢弃：`>`，不是 `>=`），含 inf 和 NaN 的输入，float32 与 float16，
# 前向与反向都测。
# %% id=ex09-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex09-spec-md
# ## 规格
# 参考实现用课程的 `keep_mask`：它只是一个写出 `tl.rand(seed, i) > p` 的 Triton kernel（Philox 是整数运算，
# GPU 和解释器给出同一个 mask），其余部分是纯 torch。
# %% id=ex09-spec role=given
from tcourse.kernels.dropout_kernels import keep_mask


def dropout_spec(x, p, seed, BLOCK_SIZE=None):  # the mask does not depend on BLOCK_SIZE
    keep = keep_mask(x.numel(), p, seed, x.device).view_as(x)
    p32 = torch.tensor(p, dtype=torch.float32).item()  # p reaches the kernel as a float32, as it reaches keep_mask
    return torch.where(keep, x.double() / (1 - p32), 0.0).to(x.dtype)


def dropout_backward_spec(dy, p, seed, BLOCK_SIZE=None):
    return dropout_spec(dy, p, seed)  # the same mask, regenerated from the seed
# %% [markdown] id=ex09-kernel-md
# ## 你的 kernel
# 提示：`offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)`，`keep = tl.rand(seed, offs) > p`，`tl.where(keep, x / (1 - p), 0.0)`。
# %% id=ex09-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK_SIZE: tl.constexpr):
    ### BEGIN SOLUTION
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    keep = tl.rand(seed, offs) > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=mask)
    ### STUB
    # TODO: 全局下标 offs；mask；keep = tl.rand(seed, offs) > p；保留的元素除以 (1 - p)，其余写 0
    pass
    ### END SOLUTION


def dropout(x, p, seed, out=None, BLOCK_SIZE=1024):
    out = torch.empty_like(x) if out is None else out
    ### BEGIN SOLUTION
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, out, n, p, seed, BLOCK_SIZE=BLOCK_SIZE)
    ### STUB
    # TODO: grid = triton.cdiv(n, BLOCK_SIZE)；启动 dropout_kernel
    raise NotImplementedError("TODO: launch dropout_kernel")
    ### END SOLUTION
    return out


def dropout_backward(dy, p, seed, out=None, BLOCK_SIZE=1024):
    out = torch.empty_like(dy) if out is None else out
    ### BEGIN SOLUTION
    n = dy.numel()
    dropout_kernel[(triton.cdiv(n, BLOCK_SIZE),)](dy, out, n, p, seed, BLOCK_SIZE=BLOCK_SIZE)
    ### STUB
    # TODO: 反向用同一个种子重新生成 mask：保留的 dx = dy / (1 - p)，丢弃的 0
    raise NotImplementedError("TODO: launch the backward")
    ### END SOLUTION
    return out
# %% [markdown] id=ex09-selfcheck-md
# ## 自检
#
# **最常见的错误**：随机数的偏移用了 `tl.arange(0, BLOCK_SIZE)`（block 内下标）。每个 program 得到同一串随机数，
# 换 BLOCK_SIZE 后 mask 就变了；第二常见：保留的元素忘了除以 `1 - p`，期望值变成 `(1 - p) * x`。
# %% id=ex09-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex09_dropout", globals())
# %% id=ex09-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

OFFSETS = ("mask 和参考不同：元素 i 的随机数必须是 tl.rand(seed, i)，i 是全局下标 pid * BLOCK_SIZE + tl.arange(...)，"
           "不是 block 内下标；这样换 BLOCK_SIZE 结果也不变。")
SCALE = "保留的元素要除以 (1 - p)（期望值不变），丢弃的写 0。"
FP16 = "float16 的 x：随机数保持 float32 再和 p 比较（转成 float16 会把 p 附近的数舍入到 p 上，改变 mask）。"
BIG_SEED = "seed 至少 2^32：tl.rand 用 seed 的全部 64 位，原样传进 kernel，不要截断、取模或转成 32 位。"
TAIL = "n 不是 BLOCK_SIZE 的整数倍：最后一个 program 的 tl.load/tl.store 要 mask=offs < n。"
BACKWARD = "反向：用同一个 seed 重新生成 mask，保留的 dx = dy / (1 - p)，丢弃的 0（不要存 mask，也不要换种子）。"
NON_FINITE = ("这个测试的输入有 inf、-inf 和 NaN（各约一成）：丢弃的元素要写 0，保留的照常除以 (1 - p)（inf 还是 inf，NaN 还是 NaN）。"
              "用 tl.where(keep, x / (1 - p), 0.0)；x * keep / (1 - p) 在丢弃的 inf、NaN 上得到 NaN（inf * 0 是 NaN）。")
TIE = "p 恰好等于 tl.rand(seed, i)：元素 i 要丢弃。保留的条件是 tl.rand(seed, i) > p（严格大于），不是 >=。"


def rand_at(seed, i):
    """``tl.rand(seed, i)`` for an int32 offset ``i``, on the host: Philox-4x32 with 10 rounds, the first word, then
    Triton's uint-to-float conversion, in float32 as on the GPU. The tie case needs a p that is one of the numbers."""
    import numpy as np

    mask = 0xFFFFFFFF
    c0, c1, c2, c3, k0, k1 = i & mask, 0, 0, 0, seed & mask, (seed >> 32) & mask
    for _ in range(10):
        c0, c1, c2, c3 = ((0xCD9E8D57 * c2) >> 32) ^ c1 ^ k0, (0xCD9E8D57 * c2) & mask, \
            ((0xD2511F53 * c0) >> 32) ^ c3 ^ k1, (0xD2511F53 * c0) & mask
        k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
    x = c0 - (1 << 32) if c0 >= 1 << 31 else c0
    x = ~x if x < 0 else x
    return float(np.float32(x) * np.float32(4.6566127342e-10))


def cases(device, rng):
    def one(n, dt, p, seed, block=1024, hint=OFFSETS, func="dropout", fill="randn", **kw):
        name = "dy" if func == "dropout_backward" else "x"
        ref = dropout_backward_spec if func == "dropout_backward" else None
        tag = " 含 inf 和 NaN" if fill == "non_finite" else ""
        return Case(f"{func} n={n} p={p} BLOCK_SIZE={block} {dt}{tag}", dt, (Tensor(name, (n,), fill),),
                    {"p": p, "seed": seed, "BLOCK_SIZE": block}, (name, "p", "seed"), ("BLOCK_SIZE",),
                    out_shape=(n,), hint=hint, func=func, reference=ref, **kw)

    cs = [one(1, "float32", 0.5, 7, hint=TAIL, public=True), one(1000, "float32", 0.3, 1234, 128, public=True),
          one(1000, "float32", 0.3, 1234, 2048, public=True), one(4099, "float32", 0.0, 5, hint=SCALE),
          one(4099, "float32", 0.9, 5, 256, hint=SCALE), one(333, "float16", 0.1, 99, 128, public=True),
          one(5000, "float32", 0.999, 6, 1024, hint=SCALE),
          one(1000, "float32", 0.3, 1234, 512, hint=BACKWARD, func="dropout_backward", public=True),
          one(1500, "float32", 0.9, 77, 256, hint=BACKWARD + " 这个反向测试的 p、seed 和 BLOCK_SIZE 都和别的反向测试不同。",
              func="dropout_backward"),
          one(333, "float16", 0.1, 2024, 128, hint=BACKWARD + " float16 的 dy。", func="dropout_backward"),
          one(1000, "float32", 0.5, 31, 256, hint=NON_FINITE, fill="non_finite"),
          one(777, "float16", 0.3, 8, 128, hint=NON_FINITE, fill="non_finite"),
          one(1000, "float32", 0.5, 32, 256, hint=BACKWARD + " " + NON_FINITE, func="dropout_backward", fill="non_finite")]
    seed = rng.randint(0, 2**31 - 1)
    n_hidden = sizes(rng, 5_000, 20_000)[0]
    cs += [one(n_hidden, "float32", 0.5, seed, b, hidden=True) for b in (256, 1024, 4096)]  # one seed, three blocks
    cs += [one(n, "float32", 0.2, rng.randint(0, 2**31 - 1), 1024, TAIL, hidden=True)
           for n in near_multiples(rng, (1024, 2048), 2, (1, 8), offsets=(-1, 1))]
    cs += [one(sizes(rng, 1000, 5000)[0], "float32", 0.5, rng.randint(2**32, 2**63 - 1), 1024, BIG_SEED, hidden=True)]
    cs += [one(sizes(rng, 500, 3000)[0], "float32", rng.choice((0.3, 0.5)), rng.randint(0, 2**31 - 1), 512, NON_FINITE,
               fill="non_finite", hidden=True)]
    cs += [one(sizes(rng, 100_000, 200_000)[0], "float16", 0.3, rng.randint(0, 2**31 - 1), 512, FP16, hidden=True),
           one(sizes(rng, 100, 20_000)[0], "float32", rng.choice((0.1, 0.5, 0.9)), seed, 1024, BACKWARD,
               "dropout_backward", hidden=True),
           # the backward on its own: the forward's big seed and float16 rounding (it may launch a kernel of its own)
           one(sizes(rng, 1000, 5000)[0], "float32", 0.5, rng.randint(2**32, 2**63 - 1), 1024, BACKWARD + BIG_SEED,
               "dropout_backward", hidden=True),
           one(sizes(rng, 100_000, 200_000)[0], "float16", 0.3, rng.randint(0, 2**31 - 1), 512, BACKWARD + FP16,
               "dropout_backward", hidden=True)]
    n, tie_seed = sizes(rng, 2000, 8000)[0], rng.randint(0, 2**31 - 1)
    cs += [one(n, "float32", rand_at(tie_seed, rng.randrange(n)), tie_seed, 1024, TIE, hidden=True)]
    n, tie_seed = sizes(rng, 2000, 8000)[0], rng.randint(0, 2**31 - 1)  # the backward may have a kernel of its own
    cs += [one(n, "float32", rand_at(tie_seed, rng.randrange(n)), tie_seed, 1024, TIE, "dropout_backward", hidden=True)]
    if device == "cuda":
        cs += [one(100_003, "bfloat16", 0.3, 11),
               Case("性能 n=2^24 float32", "float32", mode="perf", points=2.0,
                    perf={"shapes": {"x": [1 << 24]}, "outputs": {"out": [1 << 24]}, "scalars": {"p": 0.5, "seed": 3}, "call": ["x", "p", "seed"],
                          "nbytes": 2 * 4 * (1 << 24)})]
    return cs


EXERCISE = Exercise(
    title="带种子的 dropout（mask 在反向时重新生成）", func="dropout", reference=dropout_spec, cases=cases,
    reference_on_device=True, host_scratch=False,  # a mask made before the call and only applied is not the kernel's work
    tolerances={"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)},
    forbid=("torch.nn.functional.dropout", "torch.dropout", "torch.rand", "torch.rand_like", "torch.bernoulli",
            "torch.where", "torch.Tensor.__mul__", "torch.Tensor.__truediv__", "torch.mul", "torch.div"))
