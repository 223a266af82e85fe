# %% [markdown] id=dr04-intro
# # 基本功 4：按下标取行（gather）
#
# 到现在为止，地址都是 `pid`、`tl.arange` 和 stride 算出来的。地址也可以来自**读进来的数据**：
# 先 load 一个下标向量，再用它算第二次 load 的地址。embedding 查表、MoE 的 token 重排、
# 分页 KV cache 的块表都是这样。第 6 章之前先练熟“两次 load”。
#
# 给定表 `table`（形状 `(V, D)`，行之间可能有空隙，也可能是转置视图）和 int32 下标 `idx`（长度 `n`，每个值在 `[0, V)` 里，可能重复），
# 算 `out[i, :] = table[idx[i], :]`（形状 `(n, D)`）。`table` 可能是 float32、float16，也可能是 int32（值用满 int32 的范围，远超 2^24）。
#
# **要做的事**
#
# 1. 写 `gather_rows_kernel`：program `(pid_n, pid_d)` 负责 `out` 的 `BLOCK_N` 行、`BLOCK_D` 列。
# 2. 写包装函数 `gather_rows(table, idx, out=None, BLOCK_N=16, BLOCK_D=64)`。
#
# **规则**（评分器会检查）
#
# - 结果由你的 Triton kernel 读出来并写进 `out`，`return out`；只搬数据，结果必须逐位相等（表里有 -0.0）；`table[idx]`、`torch.index_select` 记 0 分。
# - 评分器会检查越界读：`idx` 最后一块里超出 `n` 的位置也不能读。
# - `table` 和 `out` 都不一定连续（`out` 可能行间有空隙、是转置视图，两者也可能是别的 stride，例如隔列取的 `base[:, ::2]`）：
#   地址用它们各自的两个 stride。
# - 测试会传入不同的 `BLOCK_N`、`BLOCK_D`。
# %% id=dr04-setup role=setup
import tcourse
rt = tcourse.setup()   # 无 GPU 时在 import triton 之前打开解释器，并打印环境表
import torch, triton, triton.language as tl
# %% [markdown] id=dr04-spec-md
# ## 规格（纯 torch）
# 评分器在 float64 里调用它，所以 `idx` 到这里时是浮点数，先转成整数。
# %% id=dr04-spec role=given
def gather_rows_spec(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return table[idx.long()]
# %% [markdown] id=dr04-kernel-md
# ## 你的 kernel
#
# 提示：
#
# - `rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)`；`src = tl.load(idx_ptr + rows, mask=rows < n, other=0)`：
#   这是 `BLOCK_N` 个表的行号。
# - 第二次 load 的地址：`table_ptr + src[:, None] * stride_tv + cols[None, :] * stride_td`，mask 是
#   `(rows[:, None] < n) & (cols[None, :] < D)`。
# - 写 `out` 用 `rows`（不是 `src`）和 `out` 的 stride。
# %% id=dr04-kernel role=solution
# 【答案单元】评分时只读取这类单元的代码（按单元 id 匹配：不要删除这个单元，辅助代码也写在这里）
@triton.jit
def gather_rows_kernel(table_ptr, idx_ptr, out_ptr, n, D, stride_tv, stride_td, stride_on, stride_od,
                       BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    ### BEGIN SOLUTION
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    src = tl.load(idx_ptr + rows, mask=rows < n, other=0)
    mask = (rows[:, None] < n) & (cols[None, :] < D)
    vals = tl.load(table_ptr + src[:, None] * stride_tv + cols[None, :] * stride_td, mask=mask)
    tl.store(out_ptr + rows[:, None] * stride_on + cols[None, :] * stride_od, vals, mask=mask)
    ### STUB
    # TODO: rows、cols；先读这些行要取的下标 src（mask）；再按 src 读表（二维 mask）；按 rows 写 out
    pass
    ### END SOLUTION


def gather_rows(table, idx, out=None, BLOCK_N=16, BLOCK_D=64):
    n, D = idx.numel(), table.shape[1]
    out = torch.empty((n, D), device=table.device, dtype=table.dtype) if out is None else out
    ### BEGIN SOLUTION
    grid = (triton.cdiv(n, BLOCK_N), triton.cdiv(D, BLOCK_D))
    gather_rows_kernel[grid](table, idx, out, n, D, table.stride(0), table.stride(1), out.stride(0), out.stride(1),
                             BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    ### STUB
    # TODO: 二维 grid；table 和 out 的 stride 都传进去
    raise NotImplementedError("TODO: launch gather_rows_kernel")
    ### END SOLUTION
    return out
# %% [markdown] id=dr04-selfcheck-md
# ## 自检
#
# **最常见的错误**：读 `idx` 时不带 mask。最后一块里多出来的位置读到的是 `idx` 后面的内存，
# 拿它当行号去读表就是一个任意地址：在 GPU 上可能直接非法访问，在 CPU 解释器上可能什么都不报。
# 第二常见：用 `src` 而不是 `rows` 算 `out` 的地址（写到了错误的行）。
# %% id=dr04-selfcheck role=selfcheck
from grader import selfcheck
selfcheck.check("dr04_gather", globals())
# %% id=dr04-grading role=grading
from grader.spec import Case, Exercise, Tensor, near_multiples, sizes

TAIL = "n 或 D 不是块大小的整数倍：读 idx 要 mask=rows < n；读表和写 out 的 mask 是 (rows[:, None] < n) & (cols[None, :] < D)。"
EXACT = "n、D 正好是块大小的整数倍或差 1：grid 用 triton.cdiv，块之间不重叠也不留空。"
WIDE = "D 比 BLOCK_D 大：grid 的第二维是 triton.cdiv(D, BLOCK_D)，每个 program 只负责 BLOCK_D 列。"
WIDEINT = "表是 int32，值用满整个范围（远超 2^24）：读进来的值原样写回，不要 .to(tl.float32)（float32 只有 24 位有效数字）。"
ROWS16 = ("表有 7 万行：下标和行偏移用读进来的 int32 算，不要转成 16 位整数（int16 在 32768 以上变成负数，"
          "uint16 在 65536 以上从 0 重来，都读到别的行去）。")
STRIDE = "表的行之间有空隙：第 src 行的起点是 src * table.stride(0)，不是 src * D。"
TSTRIDE = "表是转置视图（table.stride() == (1, V)）：地址是 src * table.stride(0) + cols * table.stride(1)，列方向也要乘 stride。"
OUT = "out 行间有空隙：写 out 的地址用 rows * out.stride(0) + cols * out.stride(1)，不要用 D 和 1。"
ODD = ("这个测试的 table、out 的 stride 既不是 (列数, 1) 也不是 (1, 行数)（例如 base[:, ::2]，或行间有空隙的矩阵的转置），"
       "或者 out 是转置视图：四个 stride 都用 .stride() 传进 kernel，不要按布局去猜。")
BLOCKS = ("BLOCK_N 和 BLOCK_D 换了大小：grid 是 (triton.cdiv(n, BLOCK_N), triton.cdiv(D, BLOCK_D))，"
          "行块用 BLOCK_N、列块用 BLOCK_D，不要混用。")


def row_ids(v):
    """Row numbers in [0, v): random, with repeats, the first row and the last row both present."""
    def fill(g, shape):
        i = torch.randint(0, v, shape, generator=g)
        i[0] = v - 1
        i[-1] = 0
        return i.double()
    return fill


def cases(device, rng):
    def one(v, d, n, dt, layout="contig", hint=None, blocks=None, out="contig", fill="randn", **kw):
        bn, bd = blocks or (16, 64)
        hint = (TAIL if n % bn or d % bd else EXACT) if hint is None else hint
        odd = {"transposed_padded": "是行间有空隙的矩阵的转置", "step2": "隔列取"}
        tag = {"padded": " 表的行间有空隙", "transposed": " 表是转置视图"}.get(layout, "") + (" 含 -0.0" if fill == "signed_zeros" else "")
        tag += " 值用满 int32" if fill == "full_int32" else ""
        tag += {"padded": " out 行间有空隙", "transposed": " out 是转置视图"}.get(out, "")
        tag += "".join(f" {name}{odd[lay]}" for name, lay in (("表", layout), ("out ", out)) if lay in odd)
        if blocks:
            tag += f" BLOCK_N={blocks[0]} BLOCK_D={blocks[1]}"
            kw.update(scalars={"BLOCK_N": blocks[0], "BLOCK_D": blocks[1]}, kwargs=("BLOCK_N", "BLOCK_D"))
        return Case(f"V={v} D={d} n={n} {dt}{tag}", dt, (Tensor("table", (v, d), fill, layout=layout),
                                                       Tensor("idx", (n,), row_ids(v), dtype="int32")),
                    call=("table", "idx"), outputs=(Tensor("out", (n, d), layout=out),), hint=hint, **kw)

    cs = [one(1, 1, 1, "float32", public=True), one(10, 7, 5, "float32", public=True),
          one(50, 33, 40, "float32", public=True, fill="signed_zeros"), one(30, 100, 17, "float32", hint=WIDE, public=True),
          one(20, 40, 33, "float32", "padded", STRIDE), one(25, 20, 50, "float16", public=True),
          one(30, 40, 25, "float32", "transposed", TSTRIDE, public=True), one(30, 40, 25, "float32", hint=OUT, out="padded"),
          one(40, 50, 70, "float32", hint=BLOCKS, blocks=(64, 16)), one(70_000, 4, 300, "float32", hint=ROWS16),
          one(10, 7, 5, "int32", hint=WIDEINT, fill="full_int32")]
    n, d = near_multiples(rng, (64, 128), 2, (1, 2))
    cs += [one(*sizes(rng, 100, 1000, 1), d, n, "float32", hidden=True),
           one(*sizes(rng, 20, 200, 1), *sizes(rng, 65, 200, 2), "float32", "padded", STRIDE, hidden=True),
           one(*sizes(rng, 5, 50, 1), *sizes(rng, 33, 100, 1), *sizes(rng, 257, 600, 1), "float16", hidden=True),
           one(40, 37, 29, "float32", "transposed_padded", ODD, out="step2"),
           one(*sizes(rng, 20, 100, 1), *sizes(rng, 20, 100, 2), "float32", "step2", ODD, out="transposed", hidden=True)]
    return cs


EXERCISE = Exercise(title="基本功 4：按下标取行（gather）", func="gather_rows", reference=gather_rows_spec, cases=cases,
                    tolerances={"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)},
                    forbid=("torch.index_select", "torch.Tensor.index_select",
                            "torch.gather", "torch.take", "torch.embedding", "torch.nn.functional.embedding"))
