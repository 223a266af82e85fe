# %% [markdown] id=ex03-intro
# # 练习 3：最小 matmul
#
# 计算 `out = a @ b`，`a` 形状 `(M, K)`，`b` 形状 `(K, N)`。每个 program 负责 `out` 的一个
# `BLOCK_M x BLOCK_N` tile，沿 K 方向每次取 `BLOCK_K`，用 `tl.dot` 累加到 float32 的 `acc` 里。
#
# **要做的事**
#
# 1. 写 `matmul_kernel`（stride 都作为参数传进来）。
# 2. 写包装函数 `matmul(a, b, out=None, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=2)`。
#    `num_warps`/`num_stages` 是启动参数（`kernel[grid](..., num_warps=..., num_stages=...)`），不是 kernel 的参数。
#
# **规则**（评分器会检查）
#
# - 结果必须由你的 Triton kernel 算出来；`torch.matmul`、`@` 等记 0 分。
# - 写进 `out` 并返回；不要修改 `a`、`b`。
# - 输入不一定是连续的：有的测试里 `a` 或 `b` 是转置视图、`a` 的行之间有空隙，也有别的 stride（例如隔列取的
#   `base[:, ::2]`）；`out` 也可能是行间有空隙的视图或转置视图。`a`、`b`、`out` 都用 `.stride()`，不要按布局猜。
# - float16 的乘积和沿 K 的部分和可能超过 float16 的最大值 65504（最后的结果却不大）：`acc` 用 float32。
# - 测试会传入不同的 `BLOCK_M`、`BLOCK_N`、`BLOCK_K`（例如 `BLOCK_M=64, BLOCK_N=16, BLOCK_K=32`），三者不一定相等。
# - 形状包括 1x1x1、质数、33x31x65（块大小 ±1）、100x60x130、M=1100 和每次重新抽取的隐藏形状；float32 和 float16（GPU 上还有 bfloat16）。
# %% id=ex03-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex03-spec-md
# ## 规格（纯 torch）
# %% id=ex03-spec role=given
def matmul_spec(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.double() @ b.double()).to(a.dtype)
# %% [markdown] id=ex03-kernel-md
# ## 你的 kernel
# 提示：`rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)`，`rk = k0 + tl.arange(0, BLOCK_K)`，
# A 块的指针是 `a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak`。
# %% id=ex03-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def matmul_kernel(a_ptr, b_ptr, out_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_om, stride_on,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    ### BEGIN SOLUTION
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
    ### STUB
    # TODO: 这个 program 的 (pid_m, pid_n)；沿 K 循环 load A/B 块（带 mask, other=0.0），tl.dot 累加；store（带 mask）
    pass
    ### END SOLUTION


def matmul(a, b, out=None, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=2):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2, "inner dimensions differ"
    out = torch.empty((M, N), device=a.device, dtype=a.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_kernel[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                        num_warps=num_warps, num_stages=num_stages)
    ### STUB
    # TODO: 二维 grid；matmul_kernel[grid](..., num_warps=num_warps, num_stages=num_stages)
    raise NotImplementedError("TODO: launch matmul_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex03-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex03_matmul.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex03_matmul.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex03-selfcheck-md
# ## 自检
#
# **最常见的错误**：K 方向不 mask。K 不是 `BLOCK_K` 的整数倍时，最后一个 K 块会读到这一行后面的
# 元素（下一行的开头，或者张量外面），`tl.dot` 把它们也乘进去了。A 和 B 的 load 都要按 K mask，`other=0.0`。
# 第二常见：假设输入是连续的，把 `stride_bk` 写成 `N`——`b` 是转置视图时就错了。
# %% id=ex03-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex03_matmul", globals())
# %% [markdown] id=ex03-sweep-md
# ## 配置扫描（只在 GPU 上计时）
# 在 GPU 上对 2048^3 的 float16 matmul 试几组 `BLOCK_M/N/K, num_warps, num_stages`，和 torch 在同一次运行里交替计时。
# 记下哪一组最快、快多少：tile 形状通常比 stages/warps 影响大。
# %% id=ex03-sweep role=demo
CONFIGS = [(32, 32, 32, 4, 2), (64, 64, 32, 4, 3), (128, 64, 32, 4, 3), (128, 128, 32, 8, 3), (128, 128, 64, 8, 4)]


def config_sweep():
    import tcourse.bench
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    rows = []
    for bm, bn, bk, w, s in CONFIGS:
        c = tcourse.bench.compare(lambda: matmul(a, b, None, bm, bn, bk, w, s), lambda: a @ b, flops=2 * 2048 ** 3)
        rows.append({"config": f"BLOCK {bm}x{bn}x{bk} warps={w} stages={s}",
                     "triton_TFLOPs": c.rate(c.ours), "torch_TFLOPs": c.rate(c.torch)})
    return rows


rows = rt.live_or_recorded("ex03_matmul_config_sweep", config_sweep, what="matmul 配置扫描")
for row in rows or []:
    print(f"{row['config']:<36} triton {row['triton_TFLOPs']:6.1f} TFLOP/s   torch {row['torch_TFLOPs']:6.1f} TFLOP/s")
# %% id=ex03-grading role=grading
from grader.spec import HALVES_TOL, PAST_FLOAT16_TOL, Case, Exercise, Tensor, near_multiples, sizes

WRAP = ("b 里有一个 +inf，K 比 BLOCK_K 小：a、b 沿 K 的读都要 mask（other=0.0）。用 % K 把越界的行绕回来、指望 a 补的 0 "
        "把它们抵消，碰上 inf 就是 0 * inf = NaN。")
TAIL = "M/N/K 不是块大小的整数倍：A、B 的 tl.load 要按 M/N 和 K 两个方向 mask（other=0.0），C 的 tl.store 按 M/N mask。"
STRIDE = "这个测试的输入不是连续存放的：指针偏移必须用 a.stride(0)/a.stride(1)/b.stride(0)/b.stride(1)，不要假设 stride。"
KLOOP = "K 远大于 BLOCK_K（也大于 256）：沿 K 要循环 for k0 in range(0, K, BLOCK_K)，每一块都累加进 acc。"
ACC = ("float16 输入、K 很大、元素全为正：累加器必须是 float32（tl.zeros(..., dtype=tl.float32)，最后 store 时再转回），"
       "float16 累加器每加一块就舍入一次，误差会超过容差。")
BLOCKS = ("这个测试传入了互不相等的 BLOCK_M/BLOCK_N/BLOCK_K：grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))，"
          "rm 用 BLOCK_M、rn 用 BLOCK_N、沿 K 的步长和 rk 用 BLOCK_K，不要混用。")
ASTRIDE = "这个测试的 a 是转置视图（a.stride(1) != 1）：A 块的指针要乘 stride_ak（rk[None, :] * stride_ak），不要假设 a 的列是连续的。"
OSTRIDE = ("这个测试的 out 不是连续的（行间有空隙或转置视图）：store 的指针用 out.stride(0)/out.stride(1)"
           "（rm[:, None] * stride_om + rn[None, :] * stride_on），不要用 N 或 1。")
ODD = ("这个测试的 a、b、out 的 stride 既不是 (列数, 1) 也不是 (1, 行数)（例如 base[:, ::2]，或行间有空隙的矩阵的转置）："
       "六个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
CANCEL = ("float16 输入，a 的前一半列约 +100、后一半约 -100，b 约 100：每个乘积约 ±1e4，沿 K 的部分和超过 float16 的最大值 "
          "65504，最后的结果却不大。tl.dot 用默认的 float32 输出，累加在 float32 的 acc 里，只在 store 时转回 float16"
          "（不要写 out_dtype=tl.float16，acc 也不要是 float16）。")


GROUPS = ("M=1100、N=140：行方向的 tile 数（BLOCK_M=32 时 35 个，64 时 18 个）比常用的 GROUP_M（4、8）多，又不是它的整数倍，"
          "列方向也不止一个 tile。"
          "按组排 tile 时最后一组不满：group_size_m = min(num_pid_m - first_pid_m, GROUP_M)，不能是 min(num_pid_m, GROUP_M)。")


RANGE = ("float32 输入，a 约为 ±1e6（大多超过 float16 的最大值 65504），结果也一样大：float32 的 a、b 直接交给 tl.dot，"
         "不要先转成 float16（会变成 inf）；结果按 out 的 dtype 写回，也不要经过 float16。")


def cases(device, rng):
    def one(m, n, k, dt, a_layout="contig", b_layout="contig", hint=TAIL, fill="randn", out_layout="contig", blocks=None,
            **kw):
        lay = {"padded": " {} 行间有空隙", "transposed": " {} 是转置视图", "contig": "",
               "transposed_padded": " {} 是行间有空隙的矩阵的转置", "step2": " {} 隔列取"}
        a_fill, b_fill = fill if isinstance(fill, tuple) else (fill, fill)
        tag = lay[a_layout].format("a") + lay[b_layout].format("b") + (" 全正" if fill == "positive" else "")
        tag += " a 前半 +100 后半 -100、b 约 100" if a_fill == "halves" else ""
        tag += " a 约为 ±1e6" if a_fill == "past_float16" else ""
        tag += " b 里有一个 +inf" if b_fill == "one_inf" else ""
        tag += lay[out_layout].format("out")
        scalars, kwargs = {}, ()
        if blocks:
            scalars = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), blocks))
            kwargs = tuple(scalars)
            tag += " " + " ".join(f"{k}={v}" for k, v in scalars.items())
        return Case(f"M={m} N={n} K={k} {dt}{tag}", dt,
                    (Tensor("a", (m, k), a_fill, a_layout), Tensor("b", (k, n), b_fill, b_layout)), scalars,
                    call=("a", "b"), kwargs=kwargs, outputs=(Tensor("out", (m, n), layout=out_layout),), hint=hint, **kw)

    cs = [one(1, 1, 1, "float32", public=True), one(7, 13, 5, "float32", public=True),
          one(7, 13, 5, "float32", hint=WRAP, fill=("randn", "one_inf")),
          one(33, 31, 65, "float32", public=True), one(100, 60, 130, "float32"),
          one(45, 37, 70, "float32", b_layout="transposed", hint=STRIDE, public=True),
          one(30, 50, 40, "float32", a_layout="padded", hint=STRIDE), one(33, 31, 65, "float16", public=True),
          one(70, 50, 40, "float32", hint=BLOCKS, blocks=(64, 16, 32), public=True),
          one(40, 70, 100, "float16", hint=BLOCKS, blocks=(16, 32, 64)),
          one(50, 30, 45, "float32", a_layout="transposed", hint=ASTRIDE),
          one(40, 30, 50, "float32", out_layout="padded", hint=OSTRIDE),
          one(30, 40, 35, "float16", out_layout="transposed", hint=OSTRIDE),
          one(20, 24, 96, "float16", fill=("halves", "near_100"), hint=CANCEL, tol=HALVES_TOL),
          one(32, 32, 1024, "float16", fill=("halves", "near_100"), hint=CANCEL, tol=HALVES_TOL),  # few tiles, long K
          one(1100, 140, 40, "float32", hint=GROUPS),
          one(48, 40, 64, "float32", fill=("past_float16", "randn"), hint=RANGE, tol=PAST_FLOAT16_TOL)]
    m, n = near_multiples(rng, (64, 128), 2, (1, 2))
    cs += [one(m, n, k, "float32", hint=KLOOP, hidden=True) for k in sizes(rng, 300, 700)]
    cs += [one(*sizes(rng, 65, 200, 2), sizes(rng, 257, 600)[0], "float32", b_layout="transposed", hint=STRIDE,
               hidden=True)]
    cs += [one(*sizes(rng, 20, 40, 2), 4096, "float16", fill="positive", hint=ACC, tol=(1.0, 1e-3), hidden=True)]
    cs += [one(29, 37, 45, "float32", "transposed_padded", "step2", ODD, out_layout="step2"),  # every odd layout on
           one(*sizes(rng, 20, 70, 3), "float32", "step2", "transposed_padded", ODD, out_layout="transposed_padded",
               hidden=True)]  # every tensor, once fixed and once hidden
    cs += [one(*sizes(rng, 30, 100, 3), "float32", hint=BLOCKS, blocks=tuple(rng.sample((16, 32, 64), 3)), hidden=True)]
    if device == "cuda":
        cs += [one(100, 60, 130, "bfloat16"),
               Case("性能 4096^3 float16", "float16", mode="perf", points=2.0,
                    perf={"shapes": {"a": [4096, 4096], "b": [4096, 4096]}, "outputs": {"out": [4096, 4096]}, "call": ["a", "b"], "flops": 2 * 4096 ** 3,
                          "tuning": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 3}})]
    return cs


EXERCISE = Exercise(
    title="最小 matmul：BLOCK_M/N/K、num_warps、num_stages", func="matmul", reference=matmul_spec, cases=cases,
    perf_ref="matmul",
    tolerances={"float32": (5e-2, 1e-2), "float16": (2e-2, 1e-2), "bfloat16": (1e-1, 2e-2)},
    forbid=("torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.Tensor.__matmul__", "torch.Tensor.matmul",
            "torch.Tensor.mm"))
