# %% [markdown] id=ex10-intro
# # 练习 10：LayerNorm 反向（dx、dw、db）
#
# 前向对二维 `x`（`(M, N)`）的每一行：`xhat = (x - mean) * rstd`，`rstd = 1 / sqrt(var + eps)`，`y = xhat * w + b`。
# 给定 `dy`，求
#
# - `dx = rstd * (g - mean(g) - xhat * mean(g * xhat))`，其中 `g = dy * w`，两个 mean 都在一行内；
# - `dw = Σ_行 dy * xhat`，`db = Σ_行 dy`（形状 `(N,)`，要把**所有行**加起来）。
#
# 这里不给前向存下的 `mean`、`rstd`：在反向 kernel 里按行重新算（和第 10 章的 dropout 一样，是"重算而不存"）。
#
# **要做的事**：`layernorm_backward(x, weight, dy, eps=1e-5, dx=None, dw=None, db=None, G=None)`，三个结果写进 `dx`、`dw`、`db`
# 并 `return dx, dw, db`。推荐做法：G 个 program，每个处理行 `g, g+G, g+2G, ...`，在 fp32 寄存器里累加这些行的
# `dy * xhat` 和 `dy`，写一行部分和到 `(G, N)` 的 fp32 缓冲；第二个 kernel 把 G 行加起来写进 `dw`、`db`。
# （也可以用 `tl.atomic_add`，但要加到 fp32 缓冲里再转换，fp16 的原子加误差太大。）
# `G` 是 program 数：`G=None` 时自己选（像第 10 章那样每个 SM 几个 program：`min(M, 4 * 132)`，H200 有 132 个 SM；
# G 比 SM 数少时有的 SM 闲着；不要按设备选不同的 G，评分在 CPU 上只看得到 CPU 那一支）；测试也会传入 `G`，可能比
# `sum_partials_kernel` 一次读的 `BLOCK_G` 行多（比如 20，也有 300），也可能比行数 `M` 还多（有的 program 一行也分不到）。
#
# **规则**：结果由 Triton kernel 算（`torch.autograd`、`layer_norm`、`torch.sum`、`torch.mean` 等记 0 分）。
# 测试包括 1 列、7 列、非 2 的幂的列数、5000 列、几百行、float16（dw、db 的部分和可能超过 2048）、每行均值很大的输入（float32 和 float16）、每行第一列是 3e4 的输入、不同的 `eps`；
# `x`、`dy` 的行之间可能有空隙，`dx` 也可能是行间有空隙的视图（行的起点都用各自的 `stride(0)`）。
# %% id=ex10-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex10-spec-md
# ## 规格（torch autograd）
# %% id=ex10-spec role=given
def layernorm_backward_spec(x, weight, dy, eps=1e-5):
    x = x.double().detach().requires_grad_()
    w = weight.double().detach().requires_grad_()
    b = torch.zeros_like(w, requires_grad=True)
    y = torch.nn.functional.layer_norm(x, (x.shape[1],), w, b, eps)
    dx, dw, db = torch.autograd.grad(y, (x, w, b), dy.double())
    return dx, dw, db
# %% [markdown] id=ex10-kernel-md
# ## 你的 kernel
# 提示：`xhat` 在 mask 掉的列上要是 0（`tl.where(mask, (x - mean) * rstd, 0.0)`），否则它们会进入 `mean(g * xhat)`；
# 两个 mean 都除以 `N`，不是 `BLOCK_N`。
# %% id=ex10-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def layernorm_bwd_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, dw_part_ptr, db_part_ptr, M, N, stride_x, stride_dy, stride_dx,
                         eps, BLOCK_N: tl.constexpr):
    ### BEGIN SOLUTION
    g = tl.program_id(0)
    groups = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), tl.float32)
    db = tl.zeros((BLOCK_N,), tl.float32)
    for row in range(g, M, groups):
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / N + eps)
        xhat = d * rstd
        gw = dy * w
        c1 = tl.sum(gw * xhat, axis=0) / N
        c2 = tl.sum(gw, axis=0) / N
        tl.store(dx_ptr + row * stride_dx + cols, (gw - c2 - xhat * c1) * rstd, mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_part_ptr + g * N + cols, dw, mask=mask)
    tl.store(db_part_ptr + g * N + cols, db, mask=mask)
    ### STUB
    # TODO: 这个 program 负责行 g, g+G, ...；每行：重算 mean、rstd、xhat；写 dx；累加 dy*xhat 和 dy；最后写部分和
    pass
    ### END SOLUTION


@triton.jit
def sum_partials_kernel(part_ptr, out_ptr, G, N, BLOCK_G: tl.constexpr, BLOCK_C: tl.constexpr):
    ### BEGIN SOLUTION
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_G, BLOCK_C), tl.float32)
    for g0 in range(0, G, BLOCK_G):
        rows = g0 + tl.arange(0, BLOCK_G)
        m = (rows[:, None] < G) & (cols[None, :] < N)
        acc += tl.load(part_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < N)
    ### STUB
    # TODO: out[c] = sum over g of part[g, c]（每个 program 负责 BLOCK_C 列）
    pass
    ### END SOLUTION


def layernorm_backward(x, weight, dy, eps=1e-5, dx=None, dw=None, db=None, G=None):
    M, N = x.shape
    dx = torch.empty_like(x) if dx is None else dx
    dw = torch.empty_like(weight) if dw is None else dw
    db = torch.empty_like(weight) if db is None else db
    ### BEGIN SOLUTION
    if G is None:
        G = min(M, 4 * 132)  # H200: 132 SMs, four programs each; the same on every device
    dw_part = torch.empty((G, N), dtype=torch.float32, device=x.device)
    db_part = torch.empty((G, N), dtype=torch.float32, device=x.device)
    layernorm_bwd_kernel[(G,)](x, weight, dy, dx, dw_part, db_part, M, N, x.stride(0), dy.stride(0), dx.stride(0), eps,
                               BLOCK_N=triton.next_power_of_2(N))
    for part, out in ((dw_part, dw), (db_part, db)):
        sum_partials_kernel[(triton.cdiv(N, 64),)](part, out, G, N, BLOCK_G=16, BLOCK_C=64)
    ### STUB
    # TODO: G 为 None 时自己选；部分和缓冲 (G, N) float32；启动 layernorm_bwd_kernel（G 个 program），再用 sum_partials_kernel 归约到 dw、db
    raise NotImplementedError("TODO: launch the kernels")
    ### END SOLUTION
    return dx, dw, db
# %% [markdown] id=ex10-selfcheck-md
# ## 自检
#
# **最常见的错误**：(1) 用 `BLOCK_N` 代替 `N` 求均值，或 mask 掉的列的 `xhat` 不是 0；(2) `dw/db` 只加了本 program
# 的第一行，或者多个 program 直接 `tl.store` 到同一个 `dw`（后写的覆盖先写的）；(3) 行的起点用 `row * N`，输入行间有空隙时就错了。
# %% id=ex10-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex10_layernorm_backward", globals())
# %% id=ex10-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = ("列数不是 2 的幂：mask 掉的列上 xhat 要是 0，均值除以 N；dx 的两个行内均值是 mean(dy*w) 和 mean(dy*w*xhat)。")
ROWS = ("行数比 program 数多：dw、db 要把所有行加起来（每个 program 累加自己负责的多行，再把部分和归约），"
        "不能让几个 program 直接 store 到同一个 dw。")
STRIDE = "这个测试的行之间有空隙（x.stride(0) > N）：行的起点用 row * stride，不要用 row * N。"
BIG = "每行均值约 1000：均值和方差按前向的稳定算法重算（先减均值再平方），不要用 E[x^2] - E[x]^2。"
F16BIG = ("float16 输入、每行均值约 1000：一行的和远超 float16 的最大值 65504。load 之后先 .to(tl.float32)，"
          "均值、方差和 dx、dw、db 的部分和都在 float32 里算。")
EPS = "这个测试的 eps 不是 1e-5（x 也很小，eps 起主要作用）：rstd = 1 / sqrt(var + eps) 要用传进来的 eps。"
STRIDES = ("这个测试里 x、dy、dx 的行距不全相同（有的行之间有空隙）：x、dy、dx 各用自己的 stride(0)，"
           "不要用 row * N，也不要拿一个张量的 stride 去算另一个。")
GROUPS = ("这个测试传入 G=20：部分和缓冲有 20 行，可能比归约 kernel 一次读的 BLOCK_G 行多，要沿 G 循环把所有块都加上"
          "（for g0 in range(0, G, BLOCK_G)），不能只加第一块。")

GROUPS_40 = ("这个测试传入 G=40：部分和缓冲有 40 行，比 32 行还多：归约 kernel 要沿 G 循环把所有块都加上，"
             "一次读进固定的 32 行（或任何固定的行数）不够。")
EPS_DEFAULT = ("这个测试不传 eps，x 很小（方差约 1e-6），eps 起主要作用：签名里 eps 的默认值要和题目给的一样是 1e-5"
               "（不是 1e-6，也不是 0）。")


FP16_ROWS = ("float16 输入，dy 的第一行约 2100、其余行在 0.5 到 1 之间：float16 的和过了 2048 以后，再加一个小于 1 的数"
             "就被舍入掉了。dw、db 的部分和要在 float32 里累加（tl.zeros(..., dtype=tl.float32)），最后再转回 float16。")
FP16_PARTIALS = ("float16 输入，G=2，dy 约为 +100（后一半的奇数行约为 -300）：不论两个 program 按前后两半还是按奇偶行分，"
                 "每个 program 的 db 部分和都约为 ±1e5，超过 float16 的最大值 65504，总和却接近 0。部分和缓冲（G × N）"
                 "要用 float32，最后归约出的结果再转成输出的 dtype。")
WIDE = ("一行 5000 列，比 4096 宽：按列分块处理的那条路径也要用传进来的 eps（或默认的 1e-5），x、dy、dx 各用自己的 "
        "stride(0)。")
G_LARGE = ("这个测试传入 G=300（GPU 上默认取 4 × 132 = 528 这么多）：部分和缓冲有 300 行。归约 kernel 要沿 G 循环"
           "（for g0 in range(0, G, BLOCK_G)），一次读进固定的 64 行、128 行或 256 行都不够。")
WIDE_ROW = ("一行 5000 列，比 4096 宽，每行均值约 1000：按列分块处理时，每一块都用这一块自己的列下标"
            "（cols = c0 + tl.arange(0, BLOCK)）读 x、w、dy 和写 dx，不要在某一块里误用第一块的下标；方差先减均值再平方，"
            "不要用 E[x^2] - E[x]^2。")
G_ABOVE_M = ("这个测试传入的 G 比行数 M 还多：有的 program 一行也分不到，它那一行部分和也要写（写 0）："
             "部分和在行循环之外、循环结束后 store，不要只在循环里写。")


def _quarters(g, shape):
    """dy: +100 on the rows of the first half and on the even rows of the second, -300 on its odd rows (+ randn). Two
    programs split the rows into halves or by parity: either way each sums to about +-M * 50, the total to about 0."""
    dy = 100 + torch.randn(shape, generator=g, dtype=torch.float64)
    dy[shape[0] // 2 + 1::2] -= 400
    return dy


def _big_first_row(g, shape):
    """dy: 2100 in the first row, the other rows in [0.5, 1). A float16 sum that starts at 2100 (spacing 2) keeps
    none of them: that program's db loses 0.5 to 1 per row, far past the tolerance after a few hundred rows."""
    dy = 0.5 + 0.5 * torch.rand(shape, generator=g, dtype=torch.float64)
    dy[0] = 2100.0
    return dy


def _small(g, shape):  # var ~ 1e-6: eps decides rstd
    return 1e-3 * torch.randn(shape, generator=g, dtype=torch.float64)


ROW_MEANS = ("这个测试每行的均值各不相同（-400 到 400 之间），G=2：方差要按行先减这一行自己的均值再平方；减去一个对所有行"
             "（或一个 program 的所有行）都一样的数之后用 E[x^2] - E[x]^2，均值离那个数远的行仍然会严重抵消。")
FIRST_FAR = ("每行第一列是 3e4，其余是标准正态的随机数（约 ±1）：rstd 的方差要先减均值再平方。用某个元素（比如第一列）平移的"
             "一遍公式 E[(x - x0)^2] - E[x - x0]^2 在这个元素离群时同样相消，丢掉精度。")



def cases(device, rng):
    def one(m, n, dt, hint=None, fill="randn", layout="contig", eps=1e-5, dy_layout="contig", dx_layout="contig", G=None,
            dy_fill="randn", **kw):
        hint = (TAIL if n & (n - 1) else "") if hint is None else hint  # TAIL is about a width that is no power of 2
        tag = (" 行间有空隙" if layout == "padded" else "") + (" 均值很大" if fill == "offset" else "")
        tag += (" dy 行间有空隙" if dy_layout == "padded" else "") + (" dx 行间有空隙" if dx_layout == "padded" else "")
        tag += (f" eps={eps}" if eps not in (1e-5, None) else "") + (" 不传 eps" if eps is None else "")
        tag += f" G={G}" if G is not None else ""
        tag += " dy 第一行很大" if dy_fill is _big_first_row else ""
        tag += " dy 约为 ±100" if dy_fill is _quarters else ""
        tag += " 首列 3e4" if fill == "first_far" else ""
        tag += " 各行均值不同" if fill == "row_offsets" else ""
        tol = (2e-3, 2e-3) if fill == "offset" and dt == "float32" else None
        return Case(f"({m}, {n}) {dt}{tag}", dt,
                    (Tensor("x", (m, n), fill, layout), Tensor("weight", (n,), "weight"), Tensor("dy", (m, n), dy_fill, dy_layout)),
                    {**({} if eps is None else {"eps": eps}), **({"G": G} if G is not None else {})},
                    ("x", "weight", "dy") + (() if eps is None else ("eps",)),
                    ("G",) if G is not None else (),
                    outputs=(Tensor("dx", (m, n), layout=dx_layout), Tensor("dw", (n,)), Tensor("db", (n,))), hint=hint,
                    tol=tol, **kw)

    cs = [one(1, 1, "float32", public=True), one(3, 7, "float32", public=True), one(37, 193, "float32", ROWS, public=True),
          one(9, 128, "float32"), one(6, 100, "float32", STRIDE, layout="padded", public=True),
          one(8, 300, "float32", BIG, "offset"), one(8, 300, "float16", F16BIG, "offset"), one(5, 77, "float16", public=True),
          one(10, 70, "float32", EPS, _small, eps=1e-3), one(12, 50, "float32", STRIDES, dy_layout="padded"),
          one(9, 60, "float32", STRIDES, layout="padded", dx_layout="padded"), one(40, 40, "float32", GROUPS, G=20),
          one(10, 24, "float32", G_ABOVE_M, G=16), one(100, 64, "float32", GROUPS_40, G=40),
          one(10, 70, "float32", EPS_DEFAULT, _small, eps=None), one(310, 8, "float32", G_LARGE, G=300),
          one(3, 5000, "float32", WIDE_ROW, "offset"), one(2048, 8, "float16", FP16_PARTIALS, G=2, dy_fill=_quarters),
          one(3, 5000, "float32", EPS + " " + WIDE, _small, eps=1e-3),
          one(2, 5000, "float32", EPS_DEFAULT + " " + WIDE, _small, eps=None),
          one(3, 5000, "float32", STRIDES + " " + WIDE, layout="padded", dy_layout="padded", dx_layout="padded"),
          one(3, 5000, "float32", FIRST_FAR + " " + WIDE, "first_far"), one(4, 300, "float32", FIRST_FAR, "first_far"),
          one(8, 64, "float32", ROW_MEANS, "row_offsets", G=2)]
    cs += [one(m, n, "float32", ROWS, hidden=True) for m, n in zip(sizes(rng, 70, 200, 2), sizes(rng, 50, 500, 2))]
    cs += [one(rng.randint(20, 60), n, "float32", TAIL, hidden=True) for n in near_multiples(rng, (128, 256, 512), 2, offsets=(-1, 1))]
    cs += [one(rng.randint(10, 40), sizes(rng, 100, 600)[0], "float32", STRIDE, layout="padded", hidden=True),
           one(rng.randint(30, 90), sizes(rng, 50, 400)[0], "float16", ROWS, hidden=True),
           one(rng.randint(400, 500), sizes(rng, 8, 24)[0], "float16", FP16_ROWS, G=2, dy_fill=_big_first_row, hidden=True),
           one(rng.randint(20, 40), sizes(rng, 30, 150)[0], "float32",
               "这个测试的 eps 不是 1e-5：rstd = 1 / sqrt(var + eps) 要用传进来的 eps。" + STRIDES
               + " 这个测试传入的 G 大于 16：归约 kernel 要沿 G 循环，把所有块都加上。",
               eps=rng.choice((1e-2, 0.1, 1.0)), dx_layout=rng.choice(("contig", "padded")),
               dy_layout=rng.choice(("contig", "padded")), G=rng.randint(17, 24), hidden=True)]
    if device == "cuda":
        cs += [one(300, 1000, "bfloat16", ROWS),
               Case("性能 (8192, 4096) float16", "float16", mode="perf", points=2.0,
                    perf={"shapes": {"x": [8192, 4096], "weight": [4096], "dy": [8192, 4096]},
                          "outputs": {"dx": [8192, 4096], "dw": [4096], "db": [4096]}, "scalars": {"eps": 1e-5},
                          "call": ["x", "weight", "dy", "eps"], "nbytes": 3 * 2 * 8192 * 4096})]
    return cs


EXERCISE = Exercise(
    title="LayerNorm 反向：dx、dw、db", func="layernorm_backward", reference=layernorm_backward_spec, cases=cases,
    tolerances={"float32": (1e-4, 1e-4), "float16": (2e-2, 2e-2), "bfloat16": (1e-1, 5e-2)},
    forbid=("torch.autograd.grad", "torch.Tensor.backward", "torch.nn.functional.layer_norm", "torch.layer_norm",
            "torch.sum", "torch.Tensor.sum", "torch.mean", "torch.Tensor.mean", "torch.var", "torch.rsqrt"))
