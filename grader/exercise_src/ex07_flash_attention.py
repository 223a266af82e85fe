# %% [markdown] id=ex07-intro
# # 练习 7：FlashAttention 风格的注意力前向
#
# `q, k, v` 形状都是 `(B, H, S, D)`（连续存放），`out = softmax(q @ k^T * sm_scale) @ v`，`sm_scale` 默认 `D ** -0.5`，不小于 0；
# `causal=True` 时 query `i` 只能看 key `j <= i`。
#
# 不能把 `S x S` 的分数矩阵整个存下来：每个 program 负责 `BLOCK_M` 个 query，沿 key 方向一块一块（`BLOCK_N`）地走，
# 用 **online softmax** 维护每行的最大值 `m`、分母 `l` 和累加器 `acc`：新块来时
# `m_new = max(m, rowmax(s))`，`alpha = exp(m - m_new)`，`l = l * alpha + rowsum(p)`，`acc = acc * alpha + p @ v`。
#
# **要做的事**：`attention_kernel` 和 `attention(q, k, v, causal=False, sm_scale=None, out=None, BLOCK_M=16, BLOCK_N=16)`。
#
# **规则**：结果由 Triton kernel 算（`torch.softmax`、`torch.matmul`、`scaled_dot_product_attention` 等记 0 分）；写进 `out` 并返回。
# `D` 是 16、32 或 64（16 位输入的 `tl.dot` 要求 K 维至少 16：`q @ kᵀ` 的 K 是 `D`，`p @ v` 的 K 是 `BLOCK_N`）。测试包括 S=1、17、65、每次重新抽取的 129–320（GPU 上还有 S=100 的 bfloat16），causal 与否，float16，很大的 q，以及每个分数都低于 -8e35、都等于 -1.3e38 的输入，float16 下 sm_scale=300 的输入；
# 测试也会传入 `sm_scale`（用传进来的值，包括 0.0，不要自己算 `D ** -0.5`），以及不同的 `BLOCK_M`/`BLOCK_N`
# （两者可以不相等，比如 `BLOCK_M=32, BLOCK_N=16`）。
# %% id=ex07-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex07-spec-md
# ## 规格（纯 torch，会存下整个分数矩阵——这正是我们要避免的）
# %% id=ex07-spec role=given
def attention_spec(q, k, v, causal=False, sm_scale=None):
    qd, kd, vd = q.double(), k.double(), v.double()
    sm_scale = q.shape[-1] ** -0.5 if sm_scale is None else sm_scale
    if sm_scale < 0:
        raise ValueError("sm_scale must be >= 0")
    s = qd @ kd.transpose(-1, -2) * sm_scale
    if causal:
        S = q.shape[-2]
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ vd).to(q.dtype)
# %% [markdown] id=ex07-kernel-md
# ## 你的 kernel
# 提示：超出 `S` 的 key、以及 causal 时 `j > i` 的 key，分数都设成 `float("-inf")`（`tl.where`），不是 0。
# %% id=ex07-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, out_ptr, S, H, sm_scale, stride_b, stride_h, stride_s,
                     CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr):
    ### BEGIN SOLUTION
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = (bh // H) * stride_b + (bh % H) * stride_h
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD_D)
    q = tl.load(q_ptr + base + rm[:, None] * stride_s + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_D), tl.float32)
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    else:
        hi = S
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kv_off = base + rn[:, None] * stride_s + rd[None, :]
        k = tl.load(k_ptr + kv_off, mask=rn[:, None] < S, other=0.0)
        v = tl.load(v_ptr + kv_off, mask=rn[:, None] < S, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        valid = rn[None, :] < S
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(out_ptr + base + rm[:, None] * stride_s + rd[None, :], acc / l_i[:, None], mask=rm[:, None] < S)
    ### STUB
    # TODO: 读 q 块；初始化 m_i=-inf、l_i=0、acc=0；沿 key 一块一块：分数、mask（-inf）、online softmax 更新；最后 acc / l_i 写回
    pass
    ### END SOLUTION


def attention(q, k, v, causal=False, sm_scale=None, out=None, BLOCK_M=16, BLOCK_N=16):
    B, H, S, D = q.shape
    out = torch.empty_like(q) if out is None else out
    sm_scale = D ** -0.5 if sm_scale is None else sm_scale
    ### BEGIN SOLUTION
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    attention_kernel[grid](q, k, v, out, S, H, sm_scale, q.stride(0), q.stride(1), q.stride(2),
                           CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_D=D)
    ### STUB
    # TODO: grid = (query 块数, B * H)；启动 attention_kernel
    raise NotImplementedError("TODO: launch attention_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex07-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex07_flash_attention.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex07_flash_attention.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex07-selfcheck-md
# ## 自检
#
# **最常见的错误**：换到下一个 key 块时忘了把旧的 `acc` 和 `l_i` 乘 `alpha`。只有一个 key 块（S 很小）时看不出来，
# S 一大就错。第二常见：超出 `S` 或 causal 遮住的位置把分数设成 0 而不是 `-inf`，`exp(0 - m)` 不是 0。
# %% id=ex07-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex07_flash_attention", globals())
# %% id=ex07-grading role=grading
from grader.spec import PAST_FLOAT16_TOL, Case, Exercise, Tensor, near_multiples, sizes

TAIL = "S 不是 BLOCK_N 的整数倍：超出 S 的 key 的分数要设成 -inf（不是 0），最后一块的 load 也要 mask。"
CAUSAL = TAIL + " causal=True：query i 只能看到 key j <= i，其余分数设成 -inf。"
ONLINE = "online softmax：S 比一个 key 块长，每处理一个新的 K/V 块，之前的 acc 和 l 都要乘 alpha = exp(m_old - m_new)。"
BIG = "这个测试的 q 很大（约 ±50）：分数要先减去当前的行最大值再取 exp，否则会溢出（数值不稳定）。"
SCALE = "这个测试传入了 sm_scale：分数乘传进来的 sm_scale，只有 sm_scale=None 时才用 D ** -0.5。"
BLOCKS = ("这个测试的 BLOCK_M 和 BLOCK_N 不相等：grid 按 BLOCK_M 切 query（triton.cdiv(S, BLOCK_M)），key 循环的步长是 BLOCK_N，"
          "causal 时 key 循环的上界是这个 query 块的末尾 min((pid_m + 1) * BLOCK_M, S)。")
PLAIN_BLOCKS = ("这个测试不是 causal，BLOCK_M 和 BLOCK_N 不相等：key 循环走遍整个 S，步长是 BLOCK_N"
                "（for start_n in range(0, S, BLOCK_N)），不是 BLOCK_M。")
NEG = ("这个测试每一行的分数都很负（约 -130 到 -800）：m_i 要初始化成 -inf（不是 0），否则 exp(s - m) 全部下溢成 0，"
       "l 为 0，结果是 NaN。")


FAR = ("这个测试每个分数都在 -8e35 以下：被遮住的位置（causal、超出 S 的 key）要设成 -inf，m_i 的初值也是 -inf；"
       "-1e4、-1e30 这样的“很小的数”比所有真实的分数都大，会被当成最大值（m_i 从 -1e30 开始，exp(s - m) 全是 0，结果是 NaN）。")
ZERO = ("这个测试传入 sm_scale=0.0（所有分数都是 0，结果是可见的 v 的平均）：判断有没有传 sm_scale 要写 "
        "sm_scale is None，不要写 sm_scale or D ** -0.5（0.0 也是假值）。")


def _far_q(g, shape):  # integers in [-48, -32] times 2^53; with k in [40, 60] times 2^53 at D=64 every score is
    # below -8e35 (a masked score or an m_i set to any finite "small number" above that wins), exact in TF32 and
    # float32 (a sum of at most 64 * 48 * 60 < 2^18 times 2^106), 20 times below float32's largest value
    return -torch.randint(32, 49, shape, generator=g).double() * 2**53


def _far_k(g, shape):
    return torch.randint(40, 61, shape, generator=g).double() * 2**53


FP16_SCORES = ("这个测试是 float16，q 和 k 都很大（约 ±150），q·k 超过 float16 的最大值 65504：分数要在 float32 里算"
               "（tl.dot 的 out_dtype 保持默认的 float32，不要写 out_dtype=q.dtype），softmax 也在 float32 里做。")
FP16_ACC = ("这个测试是 float16，S=1024，v 约为 80，分数都接近 0：未归一化的累加器 acc = Σ p·v 会到 8 万左右，超过 "
            "float16 的最大值 65504。acc、m_i、l_i 都要用 float32（tl.zeros(..., dtype=tl.float32)），最后除以 l_i "
            "之后再转成输出的 dtype。")


def _small(g, shape):  # scores near 0: every p = exp(s - m) is close to 1
    return 0.1 * torch.randn(shape, generator=g, dtype=torch.float64)


def _v80(g, shape):  # with S=1024 keys of p ~ 1, the unnormalised sum of p * v is about 8e4 > 65504
    return 80 + torch.randn(shape, generator=g, dtype=torch.float64)


def _neg_q(g, shape):  # integers in [-48, -32]: with k in [1, 4] every score is <= -128 and exact in fp16/TF32
    return -torch.randint(32, 49, shape, generator=g).double()


def _pos_k(g, shape):
    return torch.randint(1, 5, shape, generator=g).double()


BOTTOM = ("这个测试每个分数都是 -1.5 × 2^126（约 -1.3e38，在 float32 范围的底部），结果是可见的 v 的平均：m_i 的初值和被遮住的"
          "位置都要用 -inf，-1e38 这样的“很小的数”也比这些分数大。")
BIG_SCALE = ("这个测试是 float16，sm_scale=300，q 约为 ±300：q * sm_scale 超过 float16 的最大值 65504。不要先把 q 乘 sm_scale "
             "再转回 float16，分数在 float32 里算出来以后再乘 sm_scale。")


def _bottom_q(g, shape):  # with _bottom_k at D=16 and sm_scale=1: every score is -1.5 * 2^126 exactly
    return torch.full(shape, -1.5 * 2.0**61, dtype=torch.float64)


def _bottom_k(g, shape):
    return torch.full(shape, 2.0**61, dtype=torch.float64)


def _inf_key(g, shape):  # key 9 of every head +inf in dimension 0 (with _inf_key_q: q_i . k_9 = +inf for the queries
    x = torch.randn(shape, generator=g, dtype=torch.float64)  # before it, which must not see it, and -inf for the rest:
    x[..., 9, 0] = float("inf")  # the output is finite, and a mask added as -inf makes inf - inf = NaN)
    return x


def _inf_key_q(g, shape):
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    x[..., 0] = (x[..., 0].abs() + 0.25) * torch.where(torch.arange(shape[2]) < 9, 1.0, -1.0).double()
    return x


def _inf_value(g, shape):  # value row 3 +inf in dimension 5: column 5 of the output is +inf, the rest finite
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    x[..., 3, 5] = float("inf")
    return x


def _q300(g, shape):
    return 300 * torch.randn(shape, generator=g, dtype=torch.float64)


INF_KEY = ("k 的第 9 行有一个 +inf，causal：前 9 个 query 看不到它（它们的分数是 +inf），其余的分数是 -inf，输出都是有限的。被遮住的分数用 tl.where(valid, s, -inf) 换掉，不要加上 "
           "tl.where(valid, 0, -inf)（+inf 加 -inf 是 NaN，整行都变成 NaN）。")
INF_VALUE = ("v 的第 3 行有一个 +inf，S=17 不是 BLOCK_N 的整数倍：读 k、v 要 mask=offs_n < S（other=0），不要用 % S 把越界的行"
             "绕回来、指望那里的 p 是 0（0 * inf 是 NaN）。")
RANGE = ("float32 输入，v 约为 ±1e6（大多超过 float16 的最大值 65504），输出也一样大：tl.dot(p, v) 里 p 转成 v 的 dtype"
         "（p.to(v.dtype)），不要把 v、acc 或输出转成 float16（会变成 inf）。")


def cases(device, rng):
    def one(b, h, s, d, dt, causal, fill="randn", hint=TAIL, k_fill="randn", extra=None, v_fill="randn", **kw):
        tag = (" causal" if causal else "") + (" 大数值" if fill == "large" else "") + (" 分数很负" if fill is _neg_q else "")
        tag += (" 分数低于 -8e35" if fill is _far_q else "") + (" q、k 都很大" if k_fill == "large" else "")
        tag += (" 分数都是 -1.3e38" if fill is _bottom_q else "") + (" q 约为 ±300" if fill is _q300 else "")
        tag += " v 约为 80" if v_fill is _v80 else ""
        tag += (" k 的第 9 行有 +inf" if k_fill is _inf_key else "") + (" v 的第 3 行有 +inf" if v_fill is _inf_value else "")
        tag += " v 约为 ±1e6" if v_fill == "past_float16" else ""
        tag += "".join(f" {n}={v}" for n, v in (extra or {}).items())
        shape = (b, h, s, d)
        # q * 50 is there to catch exp() overflow (NaN/inf). On a GPU, tl.dot takes fp32 as TF32 (the low 13
        # mantissa bits are dropped): scores of size ~50 carry errors of a few 0.01, so this case gets a loose
        # value tolerance.
        tol = kw.pop("tol", (0.2, 0.1) if fill == "large" else None)
        extra = extra or {}
        return Case(f"B={b} H={h} S={s} D={d} {dt}{tag}", dt,
                    (Tensor("q", shape, fill), Tensor("k", shape, k_fill), Tensor("v", shape, v_fill)),
                    {"causal": causal, **extra},
                    ("q", "k", "v"), ("causal", *extra), out_shape=shape, hint=hint, tol=tol, **kw)

    cs = [one(1, 1, 1, 16, "float32", False, public=True), one(1, 2, 17, 16, "float32", False),
          one(1, 2, 17, 16, "float32", True, hint=CAUSAL, public=True), one(2, 1, 65, 32, "float32", False, hint=ONLINE),
          one(2, 1, 65, 32, "float32", True, hint=CAUSAL, public=True), one(1, 1, 40, 32, "float32", False, "large", BIG),
          one(1, 2, 33, 32, "float16", True, hint=CAUSAL, public=True),
          one(2, 3, 40, 16, "float32", True, hint=BLOCKS, extra={"BLOCK_M": 32, "BLOCK_N": 16}, public=True),
          one(1, 2, 40, 16, "float32", True, hint=BLOCKS, extra={"BLOCK_M": 16, "BLOCK_N": 32}),
          one(1, 2, 40, 32, "float32", False, hint=PLAIN_BLOCKS, extra={"BLOCK_M": 32, "BLOCK_N": 16}),
          one(1, 2, 40, 32, "float32", False, hint=SCALE, extra={"sm_scale": 0.5}),
          one(1, 1, 20, 16, "float32", False, _neg_q, NEG, k_fill=_pos_k),
          one(1, 1, 20, 64, "float32", True, _far_q, FAR, k_fill=_far_k),
          # the same scores past one block: a kernel may take another path (online softmax) for longer S
          one(1, 1, 100, 16, "float32", False, _neg_q, NEG, k_fill=_pos_k),
          one(1, 1, 100, 64, "float32", True, _far_q, FAR, k_fill=_far_k),
          one(1, 2, 20, 16, "float32", True, hint=ZERO, extra={"sm_scale": 0.0}),
          one(1, 1, 24, 64, "float32", True, hint=CAUSAL),  # the head size the timing case uses
          # float16 past its range where a right kernel works in float32: the scores (over 65504 before sm_scale), and
          # the unnormalised accumulator
          one(1, 1, 64, 64, "float16", False, "large", FP16_SCORES, k_fill="large"),
          one(1, 1, 1024, 16, "float16", False, _small, FP16_ACC, k_fill=_small, v_fill=_v80),
          one(1, 2, 40, 32, "float32", True, hint=RANGE, v_fill="past_float16", tol=PAST_FLOAT16_TOL),
          one(1, 1, 20, 16, "float32", False, _bottom_q, BOTTOM, k_fill=_bottom_k, extra={"sm_scale": 1.0}),
          one(1, 1, 20, 16, "float32", True, _bottom_q, BOTTOM, k_fill=_bottom_k, extra={"sm_scale": 1.0}),
          one(1, 1, 40, 32, "float16", False, _q300, BIG_SCALE, extra={"sm_scale": 300.0}),
          one(1, 1, 17, 16, "float32", True, _inf_key_q, INF_KEY, k_fill=_inf_key),
          one(1, 1, 17, 16, "float32", False, hint=INF_VALUE, v_fill=_inf_value)]
    long_s = sizes(rng, 129, 320, 2)
    cs += [one(1, 2, long_s[0], 16, "float32", False, hint=ONLINE, hidden=True),
           one(1, 1, long_s[1], 32, "float32", True, hint=CAUSAL + " " + ONLINE, hidden=True),
           one(1, 1, near_multiples(rng, (64, 128), 1, (2, 2))[0], 16, "float16", True, hint=ONLINE, hidden=True),
           one(1, 1, sizes(rng, 129, 200)[0], 16, "float32", False, "large", BIG, hidden=True),
           one(1, 2, sizes(rng, 40, 100)[0], 32, "float32", rng.random() < 0.5, hint=SCALE + " " + BLOCKS, hidden=True,
               extra={"sm_scale": round(rng.uniform(0.05, 1.0), 3), "BLOCK_M": rng.choice((16, 32)),
                      "BLOCK_N": rng.choice((16, 32))})]
    if device == "cuda":
        cs += [one(1, 2, 100, 64, "bfloat16", True, hint=CAUSAL),
               Case("性能 B=4 H=16 S=2048 D=64 float16 causal", "float16", mode="perf", points=2.0,
                    perf={"shapes": {"q": [4, 16, 2048, 64], "k": [4, 16, 2048, 64], "v": [4, 16, 2048, 64]},
                          "outputs": {"out": [4, 16, 2048, 64]},
                          "scalars": {"causal": True}, "call": ["q", "k", "v"], "kwargs": ["causal"],
                          "flops": 2 * 2 * 4 * 16 * 2048 * 2048 * 64 // 2, "tuning": {"BLOCK_M": 64, "BLOCK_N": 64}})]
    return cs


EXERCISE = Exercise(
    title="FlashAttention 风格的注意力前向", func="attention", reference=attention_spec, cases=cases, perf_ref="attention",
    tolerances={"float32": (2e-2, 2e-2), "float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)},
    forbid=("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.exp",
            "torch.Tensor.exp", "torch.nn.functional.scaled_dot_product_attention", "torch.matmul", "torch.bmm",
            "torch.einsum", "torch.Tensor.__matmul__", "torch.Tensor.matmul"))
