# %% [markdown] id=ex08-intro
# # 练习 8（书面题）：同一个 GEMM tile，用 Triton 和 TileLang 各画一遍
#
# 取 `C = A @ B`，`A` 形状 `(M, K)`，`B` 形状 `(K, N)`，tile 为 `BLOCK_M x BLOCK_N`，K 方向每步 `BLOCK_K`。
#
# 1. 画出**一个** program 在 Triton 里负责的数据：它读 A 的哪一条、B 的哪一条，写 C 的哪一块；K 循环每一步读什么。
# 2. 用 TileLang 写同一个 tile 的骨架（`T.Kernel`、`T.alloc_shared`、`T.alloc_fragment`、`T.copy`、`T.gemm`），
#    同样画出数据流。
# 3. 说明下面这些东西在两边怎么对应：grid 与 `program_id` ↔ `T.Kernel` 的 `bx, by`；`tl.load` ↔ `T.copy`；
#    `tl.dot` ↔ `T.gemm`；Triton 隐式决定的共享内存和流水线 ↔ TileLang 显式的 `alloc_shared` 和 `T.Pipelined(num_stages=...)`。
#
# 这道题**不自动评分**（`python -m grader check` 会说明这一点）。
# %% id=ex08-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=ex08-answer
# ## 你的答案
#
# ### BEGIN SOLUTION
# **参考答案**
#
# **1. Triton 里的一个 program。** grid 为 `(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))`，program `(pid_m, pid_n)`
# 负责 C 的 `[pid_m*BLOCK_M : +BLOCK_M, pid_n*BLOCK_N : +BLOCK_N]`。K 循环第 `k` 步读 A 的
# `[pid_m 那一条行块, k*BLOCK_K : +BLOCK_K]` 和 B 的 `[k*BLOCK_K : +BLOCK_K, pid_n 那一条列块]`，
# `tl.dot` 累加到寄存器里的 `acc`（float32）；循环结束后 `tl.store` 写回 C。
#
# ```
#            K →                         N →
#      ┌──────────────┐            ┌──┬──┬──┬──┐
#  M   │ A 行块 ▓▓▓▓▓ │ ×   K      │  │▓▓│  │  │   =  C 块 (pid_m, pid_n)
#  ↓   └──────────────┘     ↓      │  │▓▓│  │  │
#        每步 BLOCK_K 一段          └──┴──┴──┴──┘
# ```
#
# **2. TileLang 骨架。**
#
# ```python
# @T.prim_func
# def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
#     with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=128) as (bx, by):
#         A_s = T.alloc_shared((BLOCK_M, BLOCK_K), "float16")
#         B_s = T.alloc_shared((BLOCK_K, BLOCK_N), "float16")
#         C_f = T.alloc_fragment((BLOCK_M, BLOCK_N), "float")
#         T.clear(C_f)
#         for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=3):
#             T.copy(A[by * BLOCK_M, k * BLOCK_K], A_s)
#             T.copy(B[k * BLOCK_K, bx * BLOCK_N], B_s)
#             T.gemm(A_s, B_s, C_f)
#         T.copy(C_f, C[by * BLOCK_M, bx * BLOCK_N])
# ```
#
# 数据流和 Triton 的图一样：同一个 C 块，同样的 A 行块、B 列块，只是每一步先显式搬到共享内存 `A_s`、`B_s`。
#
# **3. 对应关系。**
#
# | Triton | TileLang | 说明 |
# |---|---|---|
# | `grid` + `tl.program_id(0/1)` | `T.Kernel(...) as (bx, by)` | 一个 program ↔ 一个 thread block；注意上面 `bx` 对应 N 方向 |
# | `num_warps=4` | `threads=128` | Triton 按 warp 数，TileLang 按线程数 |
# | `tl.load(指针块, mask)` 到寄存器 | `T.copy(全局切片, A_s)` 到共享内存 | Triton 由编译器决定是否经过共享内存；TileLang 显式写出 |
# | `tl.dot(a, b, acc)` | `T.gemm(A_s, B_s, C_f)` | 都落到 tensor core（Hopper 上 wgmma） |
# | `acc = tl.zeros(..., tl.float32)` | `T.alloc_fragment` + `T.clear` | 累加器在寄存器里 |
# | `num_stages=3`（启动参数） | `T.Pipelined(..., num_stages=3)` | 软件流水线：Triton 隐式，TileLang 显式 |
# | 边界 `mask` | `T.copy` 自动处理越界 | TileLang 的 copy 按张量形状做边界检查 |
# | `tl.store(C 指针块, acc, mask)` | `T.copy(C_f, C[...])` | 写回 |
#
# 核心结论：两边的**分块方式完全一样**（同一个 C tile、同样的 K 循环），差别在于谁来决定共享内存、线程布局和流水线：
# Triton 把它们交给编译器（只暴露 `num_warps`/`num_stages`），TileLang 让你显式写出来。
# ### STUB
# （在这里写你的答案：两张图、TileLang 骨架、对应关系表。）
# ### END SOLUTION
# %% id=ex08-grading role=grading
from grader.spec import Exercise

EXERCISE = Exercise(title="用 Triton 和 TileLang 画同一个 GEMM tile（书面题）", written=True)
