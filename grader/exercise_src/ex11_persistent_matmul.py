# %% [markdown] id=ex11-intro
# # 练习 11：persistent matmul + tensor descriptor
#
# `out = a @ b`（`a` 是 `(M, K)`，`b` 是 `(K, N)`，都连续存放）。和练习 3 不同的两点：
#
# 1. **persistent**：只启动 `NUM_PROGRAMS` 个 program（GPU 上取 SM 数），program `p` 依次处理 tile `p, p + NUM_PROGRAMS, ...`，
#    tile 编号按 `GROUP_M` 分组换算成 `(pid_m, pid_n)`（第 4 章、第 8 章的顺序）；
# 2. **tensor descriptor**：A、B、C 都用 `tl.make_tensor_descriptor(ptr, shape=[...], strides=[..., 1], block_shape=[...])`
#    读写：`a_desc.load([off_m, k])`，`c_desc.store([off_m, off_n], tile)`。没有指针算术和 mask：越界部分读成 0、不写。
#
# **要做的事**：`matmul_persistent_kernel` 和 `matmul_persistent(a, b, out=None, NUM_PROGRAMS=4, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=3)`。
#
# **规则**：结果由 Triton kernel 算（`torch.matmul`、`@` 等记 0 分），写进 `out` 并返回。TMA 要求行 stride 是 16 字节的倍数，
# 所以测试里 `K` 和 `N` 都是 8 的倍数（float32 和 float16 都满足），但**不一定**是 block 的倍数；`M` 任意。
# 每次调用只启动一次 kernel，grid 最多 `NUM_PROGRAMS` 个 program（一个 tile 一个 program 的 grid、在 host 上循环多次启动都不算 persistent，记 0 分）。
# 测试会传入不同的 `NUM_PROGRAMS`、`BLOCK_M`/`BLOCK_N`/`BLOCK_K`（16、32、64，互相可以不相等）和 `GROUP_M`（1、2、4、8）。
# float16 的乘积和沿 K 的部分和可能超过 float16 的最大值 65504（最后的结果却不大）：`acc` 用 float32。
# 设备端 descriptor 在 GPU 上需要一块 scratch 内存：包装函数里先 `triton.set_allocator(...)`（模板已写好）。
# 这个练习在 Triton 3.6 和 3.9 的 CPU 解释器里都能运行（两者都支持 descriptor）。
# %% id=ex11-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex11-spec-md
# ## 规格（纯 torch）
# %% id=ex11-spec role=given
def matmul_spec(a, b, NUM_PROGRAMS=None, BLOCK_M=None, BLOCK_N=None, BLOCK_K=None, GROUP_M=None):
    return a.double() @ b.double()  # the tiling parameters change nothing in the result
# %% [markdown] id=ex11-kernel-md
# ## 你的 kernel
# 提示：`for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS)`；每个 tile 里 `acc` 重新清零；
# K 循环 `for k in range(0, K, BLOCK_K)`；写回前 `acc.to(c_ptr.dtype.element_ty)`。
# %% id=ex11-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def matmul_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    ### BEGIN SOLUTION
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS):
        first_m = (tile // per_group) * GROUP_M
        rows_here = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % per_group) % rows_here
        pid_n = (tile % per_group) // rows_here
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]), acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))
    ### STUB
    # TODO: 1) 为 A、B、C 建 descriptor  2) persistent 的 tile 循环，tile -> (pid_m, pid_n)（GROUP_M 顺序）
    #       3) 每个 tile：acc 清零，沿 K 累加 tl.dot(a_desc.load(...), b_desc.load(...), acc)，c_desc.store(...)
    pass
    ### END SOLUTION


def _scratch(size, alignment, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


def matmul_persistent(a, b, out=None, NUM_PROGRAMS=4, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=3):
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), dtype=a.dtype, device=a.device) if out is None else out
    triton.set_allocator(_scratch)  # device-side descriptors live in this scratch memory while the kernel runs
    ### BEGIN SOLUTION
    programs = min(NUM_PROGRAMS, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N))
    matmul_persistent_kernel[(programs,)](a, b, out, M, N, K, NUM_PROGRAMS=programs, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                          BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=num_warps, num_stages=num_stages)
    ### STUB
    # TODO: grid = (NUM_PROGRAMS,)（tile 比 program 少时取 tile 数）；启动 matmul_persistent_kernel（num_warps、num_stages 也传进去）
    raise NotImplementedError("TODO: launch matmul_persistent_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex11-selfcheck-md
# ## 自检
#
# **最常见的错误**：(1) tile 循环里忘了把 `acc` 清零，第二个 tile 带着第一个 tile 的结果；(2) tile 的步长写成 1
# 而不是 `NUM_PROGRAMS`，几个 program 重复算同一批 tile、另一些 tile 没人算；(3) descriptor 的 `strides` 写反
# （行主序是 `[K, 1]`）。
# %% id=ex11-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex11_persistent_matmul", globals())
# %% id=ex11-grading role=grading
from grader.spec import HALVES_TOL, PAST_FLOAT16_TOL, Case, Exercise, Tensor, sizes

ONE_INF = ("a 里有一个 +inf，每个 program 要算不止一个 tile：out 里那一行是 ±inf。换下一个 tile 时累加器用 tl.zeros 重新开始，"
           "不要写 acc * 0（inf * 0 是 NaN，NaN 会带进这个 program 后面的每个 tile）。")
TAIL = "M/N/K 不是 block 的整数倍：descriptor 的 shape 用真实的 M/N/K，越界部分 load 读成 0、store 不写，不需要 mask。"
LOOP = ("tile 数比 NUM_PROGRAMS 多：每个 program 要处理 tile p, p + NUM_PROGRAMS, ...，每个 tile 开始时 acc 清零。")
KLOOP = "K 比 BLOCK_K 大很多：沿 K 循环，每一块都累加进同一个 acc。"
BLOCKS = ("这个测试的 BLOCK_M、BLOCK_N、BLOCK_K 互不相等，GROUP_M 也不是默认的 4：tile 数是 "
          "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)，沿 K 的步长是 BLOCK_K，每组 GROUP_M 行 tile（最后一组可能不满）；"
          "descriptor 的 block_shape 和 load/store 的偏移都用对应的块大小。")


CANCEL = ("float16 输入，a 的前一半列约 +100、后一半约 -100，b 约 100：每个乘积约 ±1e4，沿 K 的部分和超过 float16 的最大值 "
          "65504，最后的结果却不大。acc 是 float32（tl.zeros(..., dtype=tl.float32)），tl.dot 用默认的 float32 输出，"
          "只在 store 时转回 out 的类型。")


RANGE = ("float32 输入，a 约为 ±1e6（大多超过 float16 的最大值 65504），结果也一样大：float32 的 a、b 直接交给 tl.dot，"
         "不要先转成 float16（会变成 inf）；acc 在 store 时转成 out 的 dtype，不要经过 float16。")


def cases(device, rng):
    def one(m, n, k, dt, hint=None, programs=4, extra=None, fills=("randn", "randn"), **kw):
        extra = extra or {}
        blocks = [extra.get(f"BLOCK_{d}", 32) for d in "MNK"]
        hint = (TAIL if any(s % b for s, b in zip((m, n, k), blocks)) else "") if hint is None else hint
        tag = " a 前半 +100 后半 -100、b 约 100" if fills[0] == "halves" else ""
        tag += " a 约为 ±1e6" if fills[0] == "past_float16" else ""
        tag += " a 里有一个 +inf" if fills[0] == "one_inf" else ""
        return Case(f"M={m} N={n} K={k} {dt} NUM_PROGRAMS={programs}" + "".join(f" {a}={v}" for a, v in extra.items()) + tag,
                    dt, (Tensor("a", (m, k), fills[0]), Tensor("b", (k, n), fills[1])), {"NUM_PROGRAMS": programs, **extra}, ("a", "b"),
                    ("NUM_PROGRAMS", *extra), out_shape=(m, n), hint=hint, max_programs="NUM_PROGRAMS", **kw)

    eight = lambda lo, hi: 8 * sizes(rng, lo // 8, hi // 8)[0]  # noqa: E731  (TMA: 16-byte row strides)
    cs = [one(1, 8, 8, "float32", public=True), one(37, 40, 24, "float32", public=True),
          one(67, 48, 96, "float32", LOOP, public=True), one(100, 72, 40, "float32", LOOP, programs=3),
          one(64, 64, 64, "float32", LOOP, programs=1), one(45, 56, 72, "float16", public=True),
          one(70, 48, 40, "float32", BLOCKS, 3, {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 2}),
          one(50, 80, 56, "float32", BLOCKS, 5, {"BLOCK_M": 32, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 8}),
          one(40, 24, 32, "float16", BLOCKS, 2, {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 1}),
          one(24, 16, 128, "float16", CANCEL, fills=("halves", "near_100"), tol=HALVES_TOL),
          one(24, 16, 512, "float16", CANCEL, fills=("halves", "near_100"), tol=HALVES_TOL),  # fewer tiles than programs
          one(40, 48, 64, "float32", RANGE, fills=("past_float16", "randn"), tol=PAST_FLOAT16_TOL),
          one(64, 64, 16, "float32", ONE_INF, programs=2, fills=("one_inf", "randn"))]
    cs += [one(sizes(rng, 65, 160)[0], eight(65, 160), eight(40, 120), "float32", LOOP, programs=rng.randint(2, 6),
               hidden=True) for _ in range(2)]
    cs += [one(rng.choice((64, 96, 128)), rng.choice((64, 96, 128)), 32 * rng.randint(2, 4), "float32", LOOP, hidden=True),
           one(sizes(rng, 20, 60)[0], eight(16, 64), eight(300, 520), "float32", KLOOP, hidden=True),
           one(sizes(rng, 33, 99)[0], eight(33, 99), eight(33, 99), "float16", hidden=True),
           one(sizes(rng, 40, 120)[0], eight(24, 96), eight(24, 96), "float32", BLOCKS, rng.randint(2, 6),
               {"BLOCK_M": rng.choice((16, 32, 64)), "BLOCK_N": rng.choice((16, 32, 64)), "BLOCK_K": rng.choice((16, 32, 64)),
                "GROUP_M": rng.choice((1, 2, 8))}, hidden=True)]
    if device == "cuda":
        cs += [one(200, 136, 264, "bfloat16", LOOP),
               Case("性能 4096^3 float16", "float16", mode="perf", points=2.0, max_programs="NUM_PROGRAMS",
                    perf={"shapes": {"a": [4096, 4096], "b": [4096, 4096]}, "outputs": {"out": [4096, 4096]}, "scalars": {"NUM_PROGRAMS": 132},
                          "call": ["a", "b"], "kwargs": ["NUM_PROGRAMS"], "ref_call": ["a", "b"], "flops": 2 * 4096 ** 3,
                          "tuning": {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}})]
    return cs


EXERCISE = Exercise(
    title="persistent matmul + tensor descriptor", func="matmul_persistent", reference=matmul_spec, cases=cases,
    perf_ref="matmul",
    tolerances={"float32": (5e-2, 1e-2), "float16": (2e-2, 1e-2), "bfloat16": (1e-1, 2e-2)},
    forbid=("torch.matmul", "torch.mm", "torch.bmm", "torch.einsum", "torch.Tensor.__matmul__", "torch.Tensor.matmul",
            "torch.Tensor.mm"))
