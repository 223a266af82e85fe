# %% [markdown] id=dr09-intro
# # 基本功 9：直方图（原子加，program 的顺序不能影响结果）
#
# 前面每道题里，`out` 的每个元素只由一个 program 写。直方图不一样：很多 program 都要给同一个桶加 1。
# 在 GPU 上它们**同时**运行，“读出来、加 1、写回去”会互相覆盖，丢掉计数。
# `tl.atomic_add(ptr, val, mask=...)` 把这三步合成一个不可分割的操作。
# 一个块里的重复值也一样：同一个桶在一次 `tl.atomic_add` 里出现几次，就加几次。
# 第 6 章之前练这个，是因为以后写 split-K、反向传播里的梯度累加时都会遇到“多个 program 写同一个地址”。
#
# 给定 int32 的 `x`（长度 `n`，每个值在 `[0, n_bins)` 里），算 `out[b] = x 中等于 b 的元素个数`（int32，长度 `n_bins`）。
#
# **要做的事**
#
# 1. 写 `histogram_kernel`：每个 program 处理 `BLOCK` 个元素，用原子加累加到 `out`。
# 2. 写包装函数 `histogram(x, n_bins, out=None, BLOCK=256)`：**先把 `out` 清零**（`out.zero_()`），再启动 kernel。
#
# **规则**（评分器会检查）
#
# - 计数由你的 Triton kernel 完成；`torch.bincount`、`torch.histc` 记 0 分。
# - 评分器传进来的 `out` 里不是 0；`n` 远大于 `BLOCK`，有的测试里几乎所有元素都落在同一个桶里。
# - 测试也会传入别的 `BLOCK`（比如 128）：grid 和 kernel 都要用参数 `BLOCK`。
# - CPU 解释器是一个 program 接一个地跑的，所以“不用原子操作”的写法在解释器上有时也能蒙对，在 GPU 上不行。
#   评分器会让 program 交错运行再跑几遍（每次访存后都可能换别的 program 先跑；共享的桶上让编号大的 program 先读写）；写法本身必须不依赖顺序，
#   也不能让两个 program 不经原子操作写同一个地址（先 atomic_add 读、再 atomic_xchg 写回也不行：中间会插进别的 program，评分器每次都让它插进去）。
# %% id=dr09-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr09-spec-md
# ## 规格（纯 torch）
# 评分器在 float64 里调用它，所以 `x` 到这里时是浮点数，先转成整数。
# %% id=dr09-spec role=given
def histogram_spec(x: torch.Tensor, n_bins: int) -> torch.Tensor:
    return torch.bincount(x.long(), minlength=n_bins).double()
# %% [markdown] id=dr09-kernel-md
# ## 你的 kernel
#
# 提示：`offs`、`mask` 和第 2 章一样；读进来的值就是桶号 `bins`，`out_ptr + bins` 就是要加 1 的那些地址。
# `tl.atomic_add` 也接受 `mask=`：被 mask 掉的元素绝不能加进任何桶（包括桶 0）。
# %% id=dr09-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    ### BEGIN SOLUTION
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    bins = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(out_ptr + bins, 1, mask=mask)
    ### STUB
    # TODO: offs、mask；读这一块的桶号；原子加 1（mask）
    pass
    ### END SOLUTION


def histogram(x, n_bins, out=None, BLOCK=256):
    out = torch.empty((n_bins,), device=x.device, dtype=torch.int32) if out is None else out
    ### BEGIN SOLUTION
    out.zero_()
    n = x.numel()
    histogram_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    ### STUB
    # TODO: 先清零 out；一维 grid；histogram_kernel[grid](...)
    raise NotImplementedError("TODO: zero out, launch histogram_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr09-selfcheck-md
# ## 自检
#
# **最常见的错误**：`c = tl.load(out_ptr + bins); tl.store(out_ptr + bins, c + 1)`。同一块里两个元素落在同一个桶，
# 两个都读到旧值、写回旧值 + 1，少算一次；GPU 上不同 program 之间也一样。
# 第二常见：忘了清零 `out`（`torch.empty` 分配的内存里是什么都有可能）。
# %% id=dr09-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr09_histogram", globals())
# %% id=dr09-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "n 不是 BLOCK 的整数倍：最后一块要 mask，被 mask 掉的元素不能加进任何桶（也不能加进桶 0）。"
ATOMIC = ("同一个桶被很多元素、很多 program 加：用 tl.atomic_add(out_ptr + bins, 1, mask=mask)；"
          "先 load 再 store 会丢计数（一个块里的重复值、同时运行的 program 都会）。")
MANY = "桶有上千个：桶数 n_bins 是参数，kernel 不能假定它小于某个固定值（比如按固定桶数先做块内直方图）。"
BINS16 = ("n_bins 超过 65535：桶号和地址都用读进来的 int32 算，不要转成 16 位整数（int16 在 32768 以上变成负数，"
          "uint16 在 65536 以上从 0 重来，都加到别的桶里）。")
ZERO = "out 传进来时不是 0：包装函数里先 out.zero_()，再启动 kernel。"
BLOCK = "换了 BLOCK：grid 是 (triton.cdiv(n, BLOCK),)，kernel 里每个 program 处理 BLOCK 个元素，不要写死 256。"


def bin_ids(n_bins, skew=False):
    """Bin numbers in [0, n_bins); skewed: nine in ten fall into one bin (heavy contention)."""
    def fill(g, shape):
        b = torch.randint(0, n_bins, shape, generator=g)
        if skew:
            b[torch.rand(shape, generator=g) < 0.9] = n_bins // 2
        b[0], b[-1] = n_bins - 1, 0
        return b.double()
    return fill


def cases(device, rng):
    def one(n, n_bins, hint=ATOMIC, skew=False, block=None, **kw):
        scalars, tag = {"n_bins": n_bins}, ""
        if block:
            scalars["BLOCK"], tag = block, f" BLOCK={block}"
            kw.update(kwargs=("BLOCK",))
        return Case(f"n={n} n_bins={n_bins}{' 集中在一个桶' if skew else ''}{tag}", "int32",
                    (Tensor("x", (n,), bin_ids(n_bins, skew)),), scalars, ("x", "n_bins"),
                    out_shape=(n_bins,), hint=hint, **kw)

    cs = [one(1, 1, ZERO, public=True), one(7, 3, TAIL, public=True), one(1000, 10, public=True),
          one(3000, 257, TAIL), one(2000, 16, skew=True, public=True), one(513, 1),
          one(1000, 10, BLOCK, block=128, public=True), one(5000, 70_000, BINS16)]
    cs += [one(n, nb, TAIL, hidden=True) for n, nb in zip(near_multiples(rng, (256, 1024), 2, (2, 8), offsets=(-1, 1)),
                                                        sizes(rng, 2, 300, 2))]
    cs += [one(*sizes(rng, 5000, 20_000, 1), *sizes(rng, 3, 64, 1), skew=True, hidden=True),
           one(*sizes(rng, 5000, 10_000, 1), *sizes(rng, 1000, 5000, 1), MANY, hidden=True),
           one(*sizes(rng, 2100, 4000, 1), *sizes(rng, 3, 64, 1), BLOCK, block=rng.choice((64, 128, 512, 1024)),
               hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 9：直方图（原子加）", func="histogram", reference=histogram_spec, cases=cases,
                    forbid=("torch.bincount", "torch.histc", "torch.histogram", "torch.Tensor.bincount",
                            "torch.Tensor.histc", "torch.Tensor.scatter_add_", "torch.Tensor.index_add_"))
