"""Learner tasks inside the chapters: numbers and tables checked against a reference, model answers on request.

    answers.check_number("最快 / 最慢", my_ratio, reference, rel=0.02)   # ✓ / ✗ / 还没填
    answers.check_table("带宽表 (GB/s)", my_table, reference, rel=0.01)  # one line per key
    answers.show("ch02-block-size")                                      # the model answer, only when called

The reference values come from the chapter's own cells (a recording or a CPU computation); a wrong
answer is told how far off it is, never the reference itself, so the task stays a task.
"""
from __future__ import annotations

MODEL_ANSWERS = {
    "ch02-block-size": (
        "```python\n"
        "my_table = {r[\"BLOCK_SIZE\"]: r[\"triton_gbs\"] for r in data[\"sweep\"] if r[\"num_warps\"] == 4}\n"
        "my_ratio = max(my_table.values()) / min(my_table.values())\n"
        "```\n"
        "读法：把最快和最慢的差距和离散度（p20–p80）比较。差距在离散度以内时，不能说哪个 BLOCK_SIZE 更快；"
        "N = 2^24 的 AXPY 每个配置都贴着 HBM 上限，BLOCK_SIZE 只改变 program 的个数和每线程的元素数，"
        "改变不了每个字节都要从显存搬一次这件事。差距只在 N 小（program 少、启动开销占比大）或 num_warps 极端时才明显。"
    ),
    "ch03-mask": (
        "```python\n"
        "@triton.jit\n"
        "def softmax_other0_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):\n"
        "    row = tl.program_id(0)\n"
        "    cols = tl.arange(0, BLOCK_SIZE)\n"
        "    mask = cols < n_cols\n"
        "    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=0.0)   # the only change\n"
        "    x = x - tl.max(x, axis=0)\n"
        "    num = tl.exp(x)\n"
        "    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)\n"
        "\n"
        "y0 = torch.empty_like(x_task)\n"
        "softmax_other0_kernel[(x_task.shape[0],)](y0, x_task, x_task.stride(0), y0.stride(0), 1000, BLOCK_SIZE=1024)\n"
        "ref = torch.softmax(x_task, dim=1)\n"
        "my_rel_error = ((y0 - ref).abs() / ref).max().item()\n"
        "```\n"
        "为什么需要 mask 和 `other=-inf`：`BLOCK_SIZE = 1024` 比一行的 1000 列多 24 条 lane。不加 mask，这 24 条 lane "
        "读的是下一行（或数组之外）的数据，写回时还会覆盖下一行的结果；只加 mask 而让 `other=0`，每条补齐的 lane 都给分母加上 "
        "`exp(0 - max)`，每一行的概率都偏小（约 1%），全负的行里 0 还会顶替真正的最大值。`-inf` 是 max 的单位元，"
        "`exp(-inf) = 0` 是求和的单位元，所以补齐的 lane 对结果完全没有影响。"
    ),
    "ch04-latency": (
        "```python\n"
        "my_latency_us = {tuple(r[\"config\"]): 2 * 4096**3 / (r[\"float16\"][\"ours\"] * 1e12) * 1e6\n"
        "                 for r in sweep if r[\"fits\"] and \"ours\" in r.get(\"float16\", {})}\n"
        "```\n"
        "一次 4096³ matmul 是 2·4096³ ≈ 1.37e11 次浮点运算：600 TFLOP/s 对应约 229 µs。延迟和 TFLOP/s 是同一个测量的两种写法，"
        "比较配置时用哪个都行，但报告时要写明形状（FLOP 数随形状变化，延迟才能换算回吞吐）。"
    ),
}


def _close(got, want, rel: float) -> bool:
    return abs(got - want) <= rel * abs(want)


def check_number(what: str, got, reference, *, rel: float = 0.02) -> bool:
    """Print whether ``got`` is within ``rel`` of ``reference``; True when it is."""
    if reference is None:
        print(f"{what}: 没有参考值（还没有 GPU 记录）")
        return False
    if got is None:
        print(f"{what}: 还没填")
        return False
    if _close(float(got), float(reference), rel):
        print(f"✓ {what}: {float(got):.4g}")
        return True
    off = float(got) / float(reference) - 1
    print(f"✗ {what}: {float(got):.4g} 偏{'大' if off > 0 else '小'}了 {abs(off):.0%}（允许 ±{rel:.0%}）")
    return False


def check_table(what: str, got: dict, reference: dict, *, rel: float = 0.02) -> bool:
    """One ✓/✗/还没填 line per key of ``reference``; True when every entry is right."""
    print(f"{what}:")
    ok = [check_number(f"  {key}", got.get(key), value, rel=rel) for key, value in reference.items()]
    extra = [k for k in got if k not in reference]
    if extra:
        print(f"  这些键不在参考表里：{extra}")
    return all(ok) and not extra


def show(task: str) -> None:
    """Print the model answer of ``task`` (call it only after trying)."""
    print(MODEL_ANSWERS[task])
