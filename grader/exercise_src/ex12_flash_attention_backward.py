# %% [markdown] id=ex12-intro
# # 练习 12：FlashAttention-2 反向（dQ、dK、dV）
#
# `o = softmax(q @ k^T * sm_scale) @ v`，`q, k, v, do` 形状 `(B, H, S, D)`，连续存放；`causal=True` 时 query `i` 只看 key `j <= i`。
# 给定 `do`，求 `dq, dk, dv`，**不能**存 `S x S` 的矩阵。模板已经给出前向 kernel（它额外存下每行的
# `lse = m + log(l)`）和 `delta = rowsum(do * o)` 的 kernel。对一对 (query 块 i, key 块 j)：
#
# ```
# P  = exp(q_i k_j^T * sm_scale - lse_i)      (越界和 causal 遮住的位置是 0)
# dv_j += P^T do_i        dP = do_i v_j^T        dS = P * (dP - delta_i)
# dq_i += dS k_j * sm_scale                       dk_j += dS^T q_i * sm_scale
# ```
#
# **要做的事**：`dkdv_kernel`（每个 program 一个 key 块，沿 query 块循环）、`dq_kernel`（每个 program 一个 query 块，沿 key 块循环），
# 以及 `attention_backward(q, k, v, do, causal=False, sm_scale=None, dq=None, dk=None, dv=None, BLOCK_M=16, BLOCK_N=16)` 里的启动。
#
# **规则**：结果由 Triton kernel 算（`torch.autograd`、`torch.matmul`、`torch.softmax`、`torch.exp` 等记 0 分）。
# 正确性测试的 `D` 是 16 或 32（GPU 上的性能测试是 D=64）；测试包括 S=1、17、45、每次重新抽取的 65–140（GPU 上还有 S=100 的 bfloat16），causal 与否，float16，很大的 q（约 ±150），每个分数都低于 -1e4 的输入，以及每个分数都约为 -1.3e38 的输入，float16 且 dv 的部分和超过 65504 的输入；`sm_scale` 不小于 0；测试也会传入 `sm_scale`（用传进来的值，包括 0.0），
# 以及不同的 `BLOCK_M`/`BLOCK_N`（两者可以不相等，比如 `BLOCK_M=32, BLOCK_N=16`）。
# %% id=ex12-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex12-spec-md
# ## 规格（torch autograd，存下整个 S x S 矩阵）
# %% id=ex12-spec role=given
def attention_backward_spec(q, k, v, do, causal=False, sm_scale=None, BLOCK_M=None, BLOCK_N=None):
    q, k, v = (t.double().detach().requires_grad_() for t in (q, k, v))
    sm_scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    if sm_scale < 0:
        raise ValueError("sm_scale must be >= 0")
    s = q @ k.transpose(-1, -2) * sm_scale
    if causal:
        S = q.shape[-2]
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    return torch.autograd.grad(o, (q, k, v), do.double())
# %% [markdown] id=ex12-kernel-md
# ## 你的 kernel
# 提示：两个 kernel 里都要重算 `P` 和 `dS`（写一个 `@triton.jit` 辅助函数）；`dkdv_kernel` 在 causal 时可以从对角线所在的
# query 块开始循环，`dq_kernel` 循环到对角线为止；`lse` 和 `delta` 的形状是 `(B*H, S)`。
# %% id=ex12-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def forward_lse_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, sm_scale, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, D: tl.constexpr):
    """Given: the forward pass, storing o and lse = m + log(l) for each query row."""
    pid_m = tl.program_id(0)
    base = tl.program_id(1) * S * D
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for n0 in range(0, S, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        valid = rn[None, :] < S
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], acc / l_i[:, None], mask=rm[:, None] < S)
    tl.store(lse_ptr + tl.program_id(1) * S + rm, m_i + tl.log(l_i), mask=rm < S)


@triton.jit
def delta_kernel(o_ptr, do_ptr, delta_ptr, rows, D: tl.constexpr, BLOCK: tl.constexpr):
    """Given: delta = rowsum(do * o), one number per query row."""
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rd = tl.arange(0, D)
    m = r[:, None] < rows
    o = tl.load(o_ptr + r[:, None] * D + rd[None, :], mask=m, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + r[:, None] * D + rd[None, :], mask=m, other=0.0).to(tl.float32)
    tl.store(delta_ptr + r, tl.sum(o * do, axis=1), mask=r < rows)


### BEGIN SOLUTION
@triton.jit
def _p_and_ds(q, k, v, do, lse, delta, rm, rn, S, sm_scale, CAUSAL: tl.constexpr):
    s = tl.dot(q, tl.trans(k)) * sm_scale
    valid = (rm[:, None] < S) & (rn[None, :] < S)
    if CAUSAL:
        valid = valid & (rn[None, :] <= rm[:, None])
    p = tl.where(valid, tl.exp(s - lse[:, None]), 0.0)
    dp = tl.dot(do, tl.trans(v))
    return p, p * (dp - delta[:, None])
### END SOLUTION


@triton.jit
def dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, S, sm_scale, CAUSAL: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    ### BEGIN SOLUTION
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * S * D
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rd = tl.arange(0, D)
    k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
    v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
    dk = tl.zeros((BLOCK_N, D), tl.float32)
    dv = tl.zeros((BLOCK_N, D), tl.float32)
    lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M if CAUSAL else 0
    for m0 in range(lo, S, BLOCK_M):
        rm = m0 + tl.arange(0, BLOCK_M)
        q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
        do = tl.load(do_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
        lse = tl.load(lse_ptr + bh * S + rm, mask=rm < S, other=0.0)
        delta = tl.load(delta_ptr + bh * S + rm, mask=rm < S, other=0.0)
        p, ds = _p_and_ds(q, k, v, do, lse, delta, rm, rn, S, sm_scale, CAUSAL)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    tl.store(dk_ptr + base + rn[:, None] * D + rd[None, :], dk * sm_scale, mask=rn[:, None] < S)
    tl.store(dv_ptr + base + rn[:, None] * D + rd[None, :], dv, mask=rn[:, None] < S)
    ### STUB
    # TODO: 读 k_j、v_j；dk、dv 清零；沿 query 块循环：读 q_i、do_i、lse_i、delta_i，重算 P 和 dS，累加 dv、dk；写回（dk 乘 sm_scale）
    pass
    ### END SOLUTION


@triton.jit
def dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, S, sm_scale, CAUSAL: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    ### BEGIN SOLUTION
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * S * D
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    do = tl.load(do_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    lse = tl.load(lse_ptr + bh * S + rm, mask=rm < S, other=0.0)
    delta = tl.load(delta_ptr + bh * S + rm, mask=rm < S, other=0.0)
    dq = tl.zeros((BLOCK_M, D), tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S) if CAUSAL else S
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        p, ds = _p_and_ds(q, k, v, do, lse, delta, rm, rn, S, sm_scale, CAUSAL)
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(dq_ptr + base + rm[:, None] * D + rd[None, :], dq * sm_scale, mask=rm[:, None] < S)
    ### STUB
    # TODO: 读 q_i、do_i、lse_i、delta_i；dq 清零；沿 key 块循环（causal：到对角线为止）：重算 dS，累加 dq；写回（乘 sm_scale）
    pass
    ### END SOLUTION


def attention_backward(q, k, v, do, causal=False, sm_scale=None, dq=None, dk=None, dv=None, BLOCK_M=16, BLOCK_N=16):
    B, H, S, D = q.shape
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    dq = torch.empty_like(q) if dq is None else dq
    dk = torch.empty_like(k) if dk is None else dk
    dv = torch.empty_like(v) if dv is None else dv
    o = torch.empty_like(q)
    lse = torch.empty((B * H, S), dtype=torch.float32, device=q.device)
    delta = torch.empty((B * H, S), dtype=torch.float32, device=q.device)
    forward_lse_kernel[(triton.cdiv(S, BLOCK_M), B * H)](q, k, v, o, lse, S, sm_scale, CAUSAL=causal,
                                                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    delta_kernel[(triton.cdiv(B * H * S, 32),)](o, do, delta, B * H * S, D=D, BLOCK=32)
    ### BEGIN SOLUTION
    dkdv_kernel[(triton.cdiv(S, BLOCK_N), B * H)](q, k, v, do, lse, delta, dk, dv, S, sm_scale, CAUSAL=causal,
                                                 BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    dq_kernel[(triton.cdiv(S, BLOCK_M), B * H)](q, k, v, do, lse, delta, dq, S, sm_scale, CAUSAL=causal,
                                               BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, D=D)
    ### STUB
    # TODO: 启动 dkdv_kernel（grid = (key 块数, B*H)）和 dq_kernel（grid = (query 块数, B*H)）
    raise NotImplementedError("TODO: launch dkdv_kernel and dq_kernel")
    ### END SOLUTION
    return dq, dk, dv
# %% [markdown] id=ex12-selfcheck-md
# ## 自检
#
# **最常见的错误**：(1) 越界或被 causal 遮住的位置 `P` 没有置 0（`exp(s - lse)` 在那里不是 0）；(2) 忘了 `dk`、`dq`
# 乘 `sm_scale`（`dv` 不乘）；(3) causal 时 `dkdv_kernel` 的循环起点算错，漏掉了对角线所在的那个 query 块。
# %% id=ex12-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex12_flash_attention_backward", globals())
# %% id=ex12-grading role=grading
from grader.spec import PAST_FLOAT16_TOL, Case, Exercise, Tensor, near_multiples, sizes

TAIL = "S 不是块大小的整数倍：超出 S 的 query/key 处 P 要是 0，load 要 mask，store 要 mask。"
CAUSAL = TAIL + " causal=True：j > i 的位置 P = 0；dkdv_kernel 从对角线所在的 query 块开始，dq_kernel 循环到对角线为止。"
LOOP = "S 比一个块长：dk、dv 要对所有 query 块累加，dq 要对所有 key 块累加；dk、dq 最后乘 sm_scale，dv 不乘。"
BIG = ("q 很大（约 ±150），分数可以到几百：P 要写成 exp(s - lse)，不要写 exp(s) / exp(lse)"
       "（float32 的 exp 在 88 以上溢出成 inf，inf / inf 是 NaN）。")
FAR = ("这个测试每个分数都在 -1e4 以下：被遮住的位置（causal 的 j > i）要设成 -inf（或直接让 P 为 0），"
       "-1e4 这样的“很小的数”比真实的分数都大，exp(s - lse) 会给遮住的位置很大的 P。")


def _far_q(g, shape):  # integers in [-96, -64]; with k in [40, 60], D=32 and sm_scale=0.125 every score is below -1e4
    return -torch.randint(64, 97, shape, generator=g).double()


def _far_k(g, shape):
    return torch.randint(40, 61, shape, generator=g).double()


FP16_SCORES = ("这个测试是 float16，q 和 k 都约为 ±25，分数可以到上千：重算的 s = q·kᵀ 和 dp = do·vᵀ 都要在 float32 里"
               "（tl.dot 的 out_dtype 保持默认的 float32），float16 的分数只有 3 位有效数字，P 和 dS 会错几个百分点。")


FARTHER = ("这个测试每个分数都约为 -1.5 × 2^126（-1.3e38 左右，在 float32 范围的底部）：被遮住的位置（causal 的 j > i、超出 S "
           "的 key）要设成 -inf（或直接让 P 为 0），-1e9、-1e38 这样的“很小的数”比真实的分数还大，exp(s - lse) 是 inf。分数这么大时 "
           "float32 的 lse 分不出 log(行长) 这么小的差别，所以这个测试只检查结果里没有 NaN 和 inf。")
FP16_DV = ("这个测试是 float16，S=160，每个 query 几乎只看第 0 个 key（P 约为 1），do 前一半约 +1000、后一半约 -1000："
           "dv[0] = Σ P·do 的部分和到 8 万，超过 float16 的最大值 65504，最后的和却很小。dk、dv（和 dq）的累加器要用 float32"
           "（tl.zeros(..., dtype=tl.float32)），最后再转成输出的 dtype。")


def _farther_q(g, shape):  # integers in [-2, 2], the first column -1.5 * 2^63; with _farther_k (sm_scale 1) every
    # score is -1.5 * 2^126 + O(124), which float32 holds as -1.5 * 2^126 (about -1.3e38)
    q = torch.randint(-2, 3, shape, generator=g).double()
    q[..., 0] = -1.5 * 2.0**63
    return q


def _farther_k(g, shape):
    k = torch.randint(-2, 3, shape, generator=g).double()
    k[..., 0] = 2.0**63
    return k


def _first_key_q(g, shape):  # with _first_key_k every query scores 100 on key 0 and 0 elsewhere: P ~ 1 there
    q = torch.zeros(shape, dtype=torch.float64)
    q[..., 0] = 10
    return q


def _first_key_k(g, shape):
    k = torch.zeros(shape, dtype=torch.float64)
    k[..., 0, 0] = 10
    return k


def _do_halves(g, shape):  # about +1000 for the first half of the queries, -1000 for the second
    half = torch.where(torch.arange(shape[-2]) < shape[-2] // 2, 1000.0, -1000.0).double()[:, None]
    return torch.randn(shape, generator=g, dtype=torch.float64) + half


def _q8(g, shape):
    return 8 * torch.randn(shape, generator=g, dtype=torch.float64)


RANGE = ("float32 输入，do 约为 ±1e6（大多超过 float16 的最大值 65504），dq、dk、dv 也一样大：float32 的 do、v 直接交给 "
         "tl.dot，p、ds 转成输入的 dtype，不要把 do、dp、ds 或 dq、dk、dv 转成 float16（会变成 inf）。")
HEADS = ("B 和 H 都大于 1：q、k、v、do 和 lse、delta 按同一个 (batch, head) 编号定位（b * H + h），"
         "两个 kernel 的 grid 和下标都要一致。")
SCALE = "这个测试传入了 sm_scale：两个 kernel 都用传进来的 sm_scale（包括重算 P 时），只有 sm_scale=None 时才用 D ** -0.5。"
ZERO = ("这个测试传入 sm_scale=0.0（所有分数都是 0，P 在可见的位置上均匀，dq、dk 都是 0）：判断有没有传 sm_scale 要写 "
        "sm_scale is None，不要写 sm_scale or D ** -0.5（0.0 也是假值）。")
PLAIN_BLOCKS = ("这个测试不是 causal，BLOCK_M 和 BLOCK_N 不相等：dkdv_kernel 沿 query 走遍整个 S，步长是 BLOCK_M；"
                "dq_kernel 沿 key 走遍整个 S，步长是 BLOCK_N。两个步长不要弄反。")
BLOCKS = ("这个测试的 BLOCK_M 和 BLOCK_N 不相等：dkdv_kernel 的 grid 是 triton.cdiv(S, BLOCK_N)，沿 query 的步长是 BLOCK_M，"
          "causal 时起点是 key 块起点所在的 query 块 (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M；dq_kernel 的 grid 是 "
          "triton.cdiv(S, BLOCK_M)，沿 key 的步长是 BLOCK_N，causal 时上界是 min((pid_m + 1) * BLOCK_M, S)。")


def cases(device, rng):
    def one(b, h, s, d, dt, causal, hint=TAIL, extra=None, q_fill="randn", k_fill="randn", do_fill="randn", **kw):
        shape = (b, h, s, d)
        extra = extra or {}
        tag = (" 大数值" if q_fill == "large" else "") + (" 分数低于 -1e4" if q_fill is _far_q else "")
        tag += (" q、k 约为 ±25" if q_fill is _q8 else "") + (" 分数约为 -1.3e38" if q_fill is _farther_q else "")
        tag += " 每个 query 只看第 0 个 key、do 约为 ±1000" if do_fill is _do_halves else ""
        tag += " do 约为 ±1e6" if do_fill == "past_float16" else ""
        return Case(f"B={b} H={h} S={s} D={d} {dt}" + (" causal" if causal else "") + tag
                    + "".join(f" {n}={v}" for n, v in extra.items()), dt,
                    (Tensor("q", shape, q_fill), Tensor("k", shape, k_fill), Tensor("v", shape), Tensor("do", shape, do_fill)),
                    {"causal": causal, **extra}, ("q", "k", "v", "do"), ("causal", *extra),
                    outputs=(Tensor("dq", shape), Tensor("dk", shape), Tensor("dv", shape)), hint=hint, **kw)

    cs = [one(1, 1, 1, 16, "float32", False, public=True), one(1, 2, 17, 16, "float32", False, public=True),
          one(1, 2, 17, 16, "float32", True, CAUSAL, public=True), one(2, 1, 45, 32, "float32", False, LOOP),
          one(2, 1, 45, 32, "float32", True, CAUSAL, public=True), one(1, 2, 33, 16, "float16", True, CAUSAL, public=True),
          one(1, 2, 40, 16, "float32", True, BLOCKS, {"BLOCK_M": 32, "BLOCK_N": 16}, public=True),
          one(1, 2, 40, 16, "float32", True, BLOCKS, {"BLOCK_M": 16, "BLOCK_N": 32}),
          one(1, 2, 40, 16, "float32", False, PLAIN_BLOCKS, {"BLOCK_M": 32, "BLOCK_N": 16}),
          one(1, 2, 24, 16, "float32", False, SCALE, {"sm_scale": 1.0}), one(2, 3, 33, 16, "float32", True, HEADS),
          one(1, 1, 20, 16, "float32", True, ZERO, {"sm_scale": 0.0}),
          # loose tolerances for these two, on every device: the wrong kernels they are for give NaN or errors of orders
          # of magnitude, while a right one is off by up to 0.09 (large q) and 0.05 (far scores) on an H100's TF32
          # dots; on CPU the far scores' dk was off by up to 0.24 in 3 of 7 gradings (lse near -1.5e4 keeps about 3
          # decimals in float32, and dk multiplies that by |q| of about 80); sm_scale exact
          one(1, 1, 17, 16, "float32", False, BIG, q_fill="large", tol=(0.5, 0.1)),
          one(1, 1, 20, 32, "float32", True, FAR, {"sm_scale": 0.125}, q_fill=_far_q, k_fill=_far_k, tol=(2.0, 0.1)),
          one(1, 1, 40, 32, "float16", False, FP16_SCORES, q_fill=_q8, k_fill=_q8),
          # finite against NaN only: lse of -1.5 * 2^126 holds nothing of log(S) in float32, a right kernel's P is far off
          one(1, 1, 20, 32, "float32", True, FARTHER, {"sm_scale": 1.0}, q_fill=_farther_q, k_fill=_farther_k,
              tol=(1e30, 0.0)),
          one(1, 1, 20, 32, "float32", False, FARTHER, {"sm_scale": 1.0}, q_fill=_farther_q, k_fill=_farther_k,
              tol=(1e30, 0.0)),
          one(1, 2, 33, 16, "float32", True, RANGE, do_fill="past_float16", tol=PAST_FLOAT16_TOL),
          one(1, 1, 160, 16, "float16", False, FP16_DV, q_fill=_first_key_q, k_fill=_first_key_k, do_fill=_do_halves)]
    long_s = sizes(rng, 65, 140, 2)
    cs += [one(1, 1, long_s[0], 16, "float32", False, LOOP, hidden=True),
           one(1, 1, long_s[1], 32, "float32", True, CAUSAL + " " + LOOP, hidden=True),
           one(1, 2, near_multiples(rng, (32, 64), 1, (2, 2))[0], 16, "float32", True, CAUSAL, hidden=True),
           one(1, 1, sizes(rng, 20, 80)[0], 16, "float16", False, LOOP, hidden=True),
           one(1, 2, sizes(rng, 40, 100)[0], 16, "float32", rng.random() < 0.5, SCALE + " " + BLOCKS,
               {"sm_scale": round(rng.uniform(0.05, 1.0), 3), "BLOCK_M": rng.choice((16, 32)),
                "BLOCK_N": rng.choice((16, 32))}, hidden=True)]
    if device == "cuda":
        cs += [one(1, 2, 100, 32, "bfloat16", True, CAUSAL),
               Case("性能 B=4 H=16 S=1024 D=64 float16 causal", "float16", mode="perf", points=2.0,
                    perf={"shapes": {k: [4, 16, 1024, 64] for k in ("q", "k", "v", "do")},
                          "outputs": {k: [4, 16, 1024, 64] for k in ("dq", "dk", "dv")}, "scalars": {"causal": True},
                          "call": ["q", "k", "v", "do"], "kwargs": ["causal"],
                          "flops": 10 * 4 * 16 * 1024 * 1024 * 64 // 2, "tuning": {"BLOCK_M": 64, "BLOCK_N": 64}})]
    return cs


EXERCISE = Exercise(
    title="FlashAttention-2 反向：dQ、dK、dV", func="attention_backward", reference=attention_backward_spec, cases=cases,
    tolerances={"float32": (5e-2, 5e-2), "float16": (3e-2, 3e-2), "bfloat16": (1e-1, 5e-2)},
    forbid=("torch.autograd.grad", "torch.Tensor.backward", "torch.softmax", "torch.Tensor.softmax",
            "torch.nn.functional.softmax", "torch.exp", "torch.Tensor.exp", "torch.matmul", "torch.bmm", "torch.einsum",
            "torch.Tensor.__matmul__", "torch.Tensor.matmul", "torch.nn.functional.scaled_dot_product_attention"))
