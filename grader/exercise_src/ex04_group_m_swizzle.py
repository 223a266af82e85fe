# %% [markdown] id=ex04-intro
# # 练习 4：GROUP_M 程序编号重排（swizzle）
#
# matmul 的 `out` 被切成 `num_pid_m x num_pid_n` 个 tile，一维 grid 里第 `pid` 个 program 算哪个 tile？
# 按行走（`pid_m = pid // num_pid_n`）时，同时在跑的 program 读同一行 A，却要读几乎所有的 B 列块，L2 复用差。
# **GROUP_M 重排**：把 `GROUP_M` 行 tile 分成一组，组内**按列**走：先把一组的 `GROUP_M` 个 tile 竖着走完一列，再到下一列；
# 一组走完再到下一组。最后一组可能不满 `GROUP_M` 行。
#
# **要做的事**
#
# 1. `pid_to_tile(pid, num_pid_m, num_pid_n, GROUP_M) -> (pid_m, pid_n)`：纯整数运算（`//`、`%`、`min`），不许用循环或列表。
# 2. `swizzle_kernel` + `swizzle_map(num_pid_m, num_pid_n, GROUP_M, out=None)`：在 Triton kernel 里用同样的公式，
#    每个 program 把自己的 `(pid_m, pid_n)` 写进 `out[pid, 0]`、`out[pid, 1]`（`out` 是 `(num_pid_m*num_pid_n, 2)` 的 int32）。
#    kernel 里用 `tl.minimum` 代替 `min`。顺序要由 kernel 自己算：在包装函数里算好一张表再让 kernel 照抄，评分器重放时
#    不保留那张表（当作未初始化的内存），这样的答案拿不到第 2 部分的分。
#
# 评分器会对很多组 `(num_pid_m, num_pid_n, GROUP_M)` 检查第 1 部分（不需要 GPU，也不启动 kernel；其中有上万亿个 tile 的，
# 先列出顺序再查表的写法算不完；pid 可以大到 10^18，超过 2^53 以后 float64 表示不了每个整数，`/` 之后再取整会错，
# 只用整数的 `//` 和 `%`），再用几组检查第 2 部分。
# %% id=ex04-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex04-spec-md
# ## 规格
# 用循环把顺序列出来：`order[pid] == (pid_m, pid_n)`。你的公式要给出同样的顺序，但不能用循环。
# %% id=ex04-spec role=given
def swizzle_order_spec(num_pid_m, num_pid_n, GROUP_M):
    order = []
    for first_m in range(0, num_pid_m, GROUP_M):            # 一组接一组
        rows = range(first_m, min(first_m + GROUP_M, num_pid_m))
        for pid_n in range(num_pid_n):                      # 组内按列
            for pid_m in rows:
                order.append((pid_m, pid_n))
    return order


# %% [markdown] id=ex04-func-md
# ## 第 1 部分：公式
# 提示：一组有 `GROUP_M * num_pid_n` 个 program；先算 `group_id` 和这一组的第一行 `first_pid_m`，
# 再算这一组实际有几行 `group_size_m`。
# %% id=ex04-func role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
def pid_to_tile(pid, num_pid_m, num_pid_n, GROUP_M):
    ### BEGIN SOLUTION
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n
    ### STUB
    # TODO: num_pid_in_group, group_id, first_pid_m, group_size_m -> (pid_m, pid_n)
    raise NotImplementedError("TODO: pid_to_tile")
    ### END SOLUTION
# %% [markdown] id=ex04-kernel-md
# ## 第 2 部分：在 kernel 里
# %% id=ex04-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def swizzle_kernel(out_ptr, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    ### BEGIN SOLUTION
    pid = tl.program_id(0)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m
    tl.store(out_ptr + pid * 2, pid_m)
    tl.store(out_ptr + pid * 2 + 1, pid_n)
    ### STUB
    # TODO: 和 pid_to_tile 一样的公式（min -> tl.minimum），写 out[pid, 0] 和 out[pid, 1]
    pass
    ### END SOLUTION


def swizzle_map(num_pid_m, num_pid_n, GROUP_M, out=None):
    out = torch.empty((num_pid_m * num_pid_n, 2), dtype=torch.int32, device=rt.device) if out is None else out
    ### BEGIN SOLUTION
    swizzle_kernel[(num_pid_m * num_pid_n,)](out, num_pid_m, num_pid_n, GROUP_M=GROUP_M)
    ### STUB
    # TODO: 一维 grid，每个 tile 一个 program
    raise NotImplementedError("TODO: launch swizzle_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=ex04-feedback-md
# ## 怎样得到反馈
#
# - **在 JupyterLab 里**：改完答案单元后，运行下面的自检单元（选中它按 Shift+Enter，或 Run → Run All Cells）。它在几个公开的小形状上和规格对比，几秒内告诉你哪里错了；没有 GPU 时同样能用（CPU 解释器）。
# - **在终端里**（评分：没见过的形状、和 float64 的参考结果对比、给出得分）：先保存 Notebook（Ctrl+S），在 JupyterLab 里打开 File → New → Terminal（`./course.sh lab` 启动的终端已经用上课程的 `.venv`），在仓库根目录运行
#
#   ```bash
#   python -m grader check exercises/ex04_group_m_swizzle.ipynb
#   ```
#
#   在别的 shell 里用 `.venv/bin/python -m grader check exercises/ex04_group_m_swizzle.ipynb`。全部通过时退出码为 0；`python -m grader list` 列出各项分值和哪些测试需要 GPU。
# %% [markdown] id=ex04-selfcheck-md
# ## 自检
#
# **最常见的错误**：把组的大小一律当成 `GROUP_M`。当 `num_pid_m` 不是 `GROUP_M` 的整数倍时，最后一组不满，
# `% GROUP_M` 会算出超出范围的 `pid_m`，`// GROUP_M` 会让一些 tile 没人算、另一些被算两次。
# 取模和除法都要用 `group_size_m = min(num_pid_m - first_pid_m, GROUP_M)`。
# %% id=ex04-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("ex04_group_m_swizzle", globals())
# %% id=ex04-grading role=grading
from grader.spec import Case, Exercise


def tile_of(pid, num_pid_m, num_pid_n, GROUP_M):
    return swizzle_order_spec(num_pid_m, num_pid_n, GROUP_M)[pid]


def tile_by_formula(pid, num_pid_m, num_pid_n, GROUP_M):  # the reference where the spec's list would not fit in memory
    first_pid_m = pid // (GROUP_M * num_pid_n) * GROUP_M
    rows = min(num_pid_m - first_pid_m, GROUP_M)
    return first_pid_m + pid % (GROUP_M * num_pid_n) % rows, pid % (GROUP_M * num_pid_n) // rows


def order_map(num_pid_m, num_pid_n, GROUP_M):
    return torch.tensor(swizzle_order_spec(num_pid_m, num_pid_n, GROUP_M), dtype=torch.float64)


KERNEL = "kernel 里每个 program 用 tl.program_id(0) 算出 (pid_m, pid_n)，写到 out[pid, 0] 和 out[pid, 1]。"
PARTIAL = ("最后一组不满、但有 2 行以上（num_pid_m 不是 GROUP_M 的整数倍）：组内的位置是 pid % num_pid_in_group，"
           "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m，pid_n = (pid % num_pid_in_group) // group_size_m；"
           "只有组满时 pid // GROUP_M 这类写法才碰巧对。")


GM1 = "GROUP_M=1：每组只有一行，顺序就是按行（pid_m = pid // num_pid_n），通用公式本身就给出这个顺序，不用另写一条路径。"
ONE_GROUP = ("num_pid_m 比 GROUP_M 小：只有一组，group_size_m = min(num_pid_m - first_pid_m, GROUP_M) = num_pid_m，"
             "pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m（不是 pid % GROUP_M）。")
HUGE = ("上万亿个 tile（num_pid_m、num_pid_n 都超过一百万，pid 到 10^18）：题目要的是整数公式（//、%、min），不能先用循环或"
        "列表把顺序列出来再查表——那样既不满足“不许用循环或列表”，也算不完、放不下；也不能用 / 再取整：2^53 以上的整数"
        "float64 表示不了，组的边界上会差一。")
MANY = "tile 超过 1024 个：grid 是 num_pid_m * num_pid_n 个 program，每个 program 只算自己那一个 pid。"


def cases(device, rng):
    def combos(pred, extra=()):
        grid = [(m, n, g) for m in (1, 2, 3, 5, 8, 13) for n in (1, 4, 7) for g in (1, 2, 3, 4, 8) if pred(m, g)]
        return tuple((pid, m, n, g) for m, n, g in grid + list(extra) for pid in range(m * n))

    def py(name, pred, hint, pts, **kw):
        return Case(name, "int32", mode="python", func="pid_to_tile", calls=combos(pred, kw.pop("extra", ())),
                    reference=tile_of, points=pts, hint=hint, **kw)

    def kernel(m, n, g, hint=KERNEL, **kw):
        return Case(f"kernel num_pid_m={m} num_pid_n={n} GROUP_M={g}", "int32", out_shape=(m * n, 2),
                    scalars={"num_pid_m": m, "num_pid_n": n, "GROUP_M": g}, call=("num_pid_m", "num_pid_n", "GROUP_M"),
                    func="swizzle_map", reference=order_map,
                    hint=hint, **kw)

    hidden = [(rng.randint(9, 40), rng.randint(2, 20), rng.choice((3, 5, 6, 8))) for _ in range(2)]
    many = (rng.randint(50, 80), rng.randint(21, 30), rng.choice((2, 4, 8)))
    huge = [(1_000_003, 1_000_001, 8), (rng.randint(10**6, 10**7), rng.randint(10**6, 10**7), rng.choice((3, 5, 6))),
            (10**9, 10**9, rng.choice((3, 4, 5)))]  # pids past 2^53: the last pid of a group (below) is one off by float
    return [
        py("pid_to_tile GROUP_M=1", lambda m, g: g == 1,
           "GROUP_M=1 时每组只有一行，顺序就是按行：pid_m = pid // num_pid_n，pid_n = pid % num_pid_n。", 1.0, public=True),
        py("pid_to_tile num_pid_m 是 GROUP_M 的倍数", lambda m, g: g > 1 and m % g == 0,
           "组内按列走：先走完一组里的 GROUP_M 行，再换下一列。", 2.0, public=True),
        py("pid_to_tile 最后一组不满", lambda m, g: g > 1 and m % g != 0,
           "最后一组可能不足 GROUP_M 行：group_size_m = min(num_pid_m - first_pid_m, GROUP_M)，取模和除法都要用它。", 2.0,
           extra=hidden, hidden=True),
        Case("pid_to_tile 上万亿个 tile", "int32", mode="python", func="pid_to_tile", reference=tile_by_formula,
             calls=tuple((pid, m, n, g) for m, n, g in huge for pid in (0, m * n - 1, rng.randrange(m * n),
                                                                           m * n - 1 - rng.randrange(g * n),
                                                                           rng.randrange(m // g // 2, m // g) * g * n - 1)),
             points=1.0, hint=HUGE),
        kernel(1, 1, 1, public=True), kernel(5, 7, 2), kernel(8, 3, 4, public=True),
        kernel(11, 13, 3, hint=PARTIAL), kernel(7, 5, 4, hint=PARTIAL), kernel(13, 7, 1, hint=GM1),
        kernel(3, 4, 8, hint=ONE_GROUP), *[kernel(m, n, g, hidden=True) for m, n, g in hidden],
        kernel(*many, hint=MANY, hidden=True),
    ]


EXERCISE = Exercise(title="GROUP_M 程序编号重排（pid -> (pid_m, pid_n)）", reference=order_map, cases=cases,
                    host_scratch=False)  # a table of tiles filled on the host and copied by the kernel is not the kernel's work
