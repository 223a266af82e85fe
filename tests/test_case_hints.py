"""A case's hint says what the case is about ("the row is wider than 1024 columns", "n is not a multiple of
BLOCK"), and it is shown when the case fails. Over many secret seeds, each hint with such a claim holds for every
case it is attached to: a case drawn near a multiple must not land on the side its hint rules out, and a default
hint must fit the sizes it is given."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import numpy as np
import pytest
import torch

from grader import registry
from grader.spec import ODD_LAYOUTS

SOURCES = Path(__file__).resolve().parent.parent / "grader" / "exercise_src"
SEEDS = range(1000)


@functools.cache
def _module(ex_id: str) -> list[ast.stmt]:
    return ast.parse((SOURCES / f"{ex_id}.py").read_text(encoding="utf-8")).body


def _constant(ex_id: str, name: str) -> str:
    """The hint's text, read from the exercise's source without running it."""
    for node in _module(ex_id):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"{ex_id}.{name}")


@functools.cache
def _defaults(ex_id: str, func: str) -> dict:
    """The keyword defaults of the learner's function (its wrapper), read from the exercise's source."""
    for node in _module(ex_id):
        if isinstance(node, ast.FunctionDef) and node.name == func:
            args = node.args.args[len(node.args.args) - len(node.args.defaults):]
            return {a.arg: ast.literal_eval(d) for a, d in zip(args, node.args.defaults)}
    raise LookupError(f"{ex_id}.{func}")


def _dim(case, tensor: str, axis: int) -> int:
    return next(t.shape for t in case.inputs if t.name == tensor)[axis]


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _fill(case, tensor: str):
    return next(t.fill for t in case.inputs if t.name == tensor)


def _cancels(case, k_axis: int) -> bool:
    """float16, a about +100 then -100 along K, b about 100: 16 products of about 1e4 already pass 65504."""
    return (case.dtype == "float16" and _fill(case, "a") == "halves" and _fill(case, "b") == "near_100"
            and _dim(case, "a", k_axis) >= 32)


def _off(case, block, *dims_blocks) -> bool:
    """Some size is not a multiple of its block: (tensor, axis, block name)."""
    return any(_dim(case, t, ax) % block(b) for t, ax, b in dims_blocks)


# (exercise, hint constant) -> what must hold for a case carrying that hint; blk(name) is the block the case runs
# with: its own scalar, else the default in the signature of the function it calls
CLAIMS = {
    ("ex01_axpy", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_SIZE")),
    ("ex02_softmax", "TAIL"): lambda c, blk: not _pow2(_dim(c, "x", 1)),
    ("ex02_softmax", "WIDE"): lambda c, blk: _dim(c, "x", 1) > 1024,
    ("ex03_matmul", "TAIL"): lambda c, blk: _off(c, blk, ("a", 0, "BLOCK_M"), ("b", 1, "BLOCK_N"),
                                                 ("a", 1, "BLOCK_K")),
    ("ex03_matmul", "KLOOP"): lambda c, blk: _dim(c, "a", 1) > 256,
    ("ex05_layernorm", "TAIL"): lambda c, blk: not _pow2(_dim(c, "x", 1)),
    ("ex05_layernorm", "WIDE"): lambda c, blk: _dim(c, "x", 1) > 1024,
    ("ex06_transpose", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_M"), ("x", 1, "BLOCK_N")),
    ("ex07_flash_attention", "TAIL"): lambda c, blk: _off(c, blk, ("q", 2, "BLOCK_N")),
    ("ex09_dropout", "TAIL"): lambda c, blk: _off(c, blk, (c.inputs[0].name, 0, "BLOCK_SIZE")),
    ("ex10_layernorm_backward", "TAIL"): lambda c, blk: not _pow2(_dim(c, "x", 1)),
    ("ex11_persistent_matmul", "TAIL"): lambda c, blk: _off(c, blk, ("a", 0, "BLOCK_M"), ("b", 1, "BLOCK_N"),
                                                           ("a", 1, "BLOCK_K")),
    ("ex12_flash_attention_backward", "TAIL"): lambda c, blk: _off(c, blk, ("q", 2, "BLOCK_M"), ("q", 2, "BLOCK_N")),
    ("dr01_outer_add", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_M"), ("y", 0, "BLOCK_N")),
    ("dr01_outer_add", "WIDE"): lambda c, blk: _dim(c, "y", 0) > blk("BLOCK_N"),
    ("dr02_col_sum", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_M"), ("x", 1, "BLOCK_N")),
    ("dr02_col_sum", "LOOP"): lambda c, blk: _dim(c, "x", 0) > blk("BLOCK_M"),
    ("dr03_strided_copy_2d", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_M"), ("x", 1, "BLOCK_N")),
    ("dr04_gather", "TAIL"): lambda c, blk: _off(c, blk, ("idx", 0, "BLOCK_N"), ("table", 1, "BLOCK_D")),
    ("dr04_gather", "WIDE"): lambda c, blk: _dim(c, "table", 1) > blk("BLOCK_D"),
    ("dr05_matvec", "TAIL"): lambda c, blk: _off(c, blk, ("a", 0, "BLOCK_M"), ("a", 1, "BLOCK_K")),
    ("dr05_matvec", "KLOOP"): lambda c, blk: _dim(c, "a", 1) > 256,
    ("dr06_tile_transpose", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK_M"), ("x", 1, "BLOCK_N")),
    ("dr07_batched_dot", "TAIL"): lambda c, blk: any(n < max(16, 1 << (n - 1).bit_length())
                                                     for n in (_dim(c, "a", 1), _dim(c, "a", 2), _dim(c, "b", 2))),
    ("dr08_cumsum", "TAIL"): lambda c, blk: _off(c, blk, ("x", 1, "BLOCK")),
    ("dr08_cumsum", "CARRY"): lambda c, blk: _dim(c, "x", 1) > blk("BLOCK"),
    ("dr09_histogram", "TAIL"): lambda c, blk: _off(c, blk, ("x", 0, "BLOCK")),
    ("dr09_histogram", "MANY"): lambda c, blk: c.scalars["n_bins"] >= 1000,
    ("dr02_col_sum", "ACC"): lambda c, blk: c.dtype == "float16" and _dim(c, "x", 0) >= 8000,
    ("dr07_batched_dot", "SMALL_K"): lambda c, blk: c.dtype == "float16" and _dim(c, "a", 2) == 5,
    ("dr08_cumsum", "LONG"): lambda c, blk: c.dtype == "float16" and _dim(c, "x", 1) == 20_000,
    ("ex09_dropout", "FP16"): lambda c, blk: c.dtype == "float16",
    ("ex09_dropout", "BIG_SEED"): lambda c, blk: c.scalars["seed"] >= 2**32,
    ("ex09_dropout", "NON_FINITE"): lambda c, blk: _fill(c, c.inputs[0].name) == "non_finite" and 0 < c.scalars["p"] < 1,
    ("ex12_flash_attention_backward", "HEADS"): lambda c, blk: _dim(c, "q", 0) > 1 and _dim(c, "q", 1) > 1,
    ("ex02_softmax", "VERY_WIDE"): lambda c, blk: 4096 < _dim(c, "x", 1) <= 8192,
    ("ex05_layernorm", "VERY_WIDE"): lambda c, blk: 4096 < _dim(c, "x", 1) <= 8192,
    ("ex02_softmax", "FAR"): lambda c, blk: _fill(c, "x") == "far_negative" and not _pow2(_dim(c, "x", 1)),
    ("ex02_softmax", "RAMP"): lambda c, blk: _fill(c, "x") == "ramp" and _dim(c, "x", 1) > 1024,
    ("ex02_softmax", "BOTTOM"): lambda c, blk: _fill(c, "x") == "float32_bottom" and not _pow2(_dim(c, "x", 1)),
    ("ex07_flash_attention", "FAR"): lambda c, blk: c.scalars["causal"] and _fill(c, "q").__name__ == "_far_q"
    and 32 * 40 * 2**106 * _dim(c, "q", 3) ** 0.5 > 8e35,
    ("ex12_flash_attention_backward", "FAR"): lambda c, blk: c.scalars["causal"] and 64 * 40 * _dim(c, "q", 3)
    * c.scalars["sm_scale"] > 1e4,
    ("ex12_flash_attention_backward", "BIG"): lambda c, blk: _fill(c, "q") == "large",
    # float16 q and k of 50 * randn at D=64: a score's standard deviation is 2e4, past 65504 at 3.3 of it
    ("ex07_flash_attention", "FP16_SCORES"): lambda c, blk: c.dtype == "float16" and _fill(c, "q") == "large"
    and _fill(c, "k") == "large" and _dim(c, "q", 3) >= 64,
    ("ex07_flash_attention", "FP16_ACC"): lambda c, blk: c.dtype == "float16" and _dim(c, "q", 2) == 1024
    and not c.scalars["causal"] and _fill(c, "v").__name__ == "_v80" and _fill(c, "q").__name__ == "_small"
    and _fill(c, "k").__name__ == "_small",
    # q . k = -2^62 * 2^62 + at most 31 * 4 = -2^124 + O(124); times 0.125: about -2^121 (-2.7e36)
    ("ex12_flash_attention_backward", "FARTHER"): lambda c, blk: c.scalars["sm_scale"] == 1.0
    and _fill(c, "q").__name__ == "_farther_q" and _fill(c, "k").__name__ == "_farther_k"
    and 1.5 * 2**126 - 4 * (_dim(c, "q", 3) - 1) > 1.2e38,
    ("ex12_flash_attention_backward", "FP16_DV"): lambda c, blk: c.dtype == "float16" and 1000 * (_dim(c, "q", 2) // 2) > 65504
    and not c.scalars["causal"] and _fill(c, "q").__name__ == "_first_key_q" and _fill(c, "do").__name__ == "_do_halves",
    ("ex07_flash_attention", "BOTTOM"): lambda c, blk: _fill(c, "q").__name__ == "_bottom_q"
    and _fill(c, "k").__name__ == "_bottom_k" and c.scalars["sm_scale"] == 1.0 and _dim(c, "q", 3) == 16,
    ("ex07_flash_attention", "BIG_SCALE"): lambda c, blk: c.dtype == "float16" and c.scalars["sm_scale"] >= 8
    and _fill(c, "q").__name__ == "_q300",
    ("ex10_layernorm_backward", "FIRST_FAR"): lambda c, blk: _fill(c, "x") == "first_far",
    ("ex01_axpy", "BIG_A"): lambda c, blk: c.dtype == "float16" and abs(c.scalars["a"]) > 65504,
    ("ex12_flash_attention_backward", "FP16_SCORES"): lambda c, blk: c.dtype == "float16"
    and _fill(c, "q").__name__ == "_q8" and _fill(c, "k").__name__ == "_q8",
    # float32 with 1e6 * randn in the operand the hint names: most values past float16's 65504
    **{(ex, "RANGE"): (lambda name: lambda c, blk: c.dtype == "float32" and _fill(c, name) == "past_float16")(name)
       for ex, name in (("ex03_matmul", "a"), ("ex11_persistent_matmul", "a"), ("dr07_batched_dot", "a"),
                        ("ex07_flash_attention", "v"), ("ex12_flash_attention_backward", "do"))},
    ("dr09_histogram", "BINS16"): lambda c, blk: c.scalars["n_bins"] > 65535,
    ("dr04_gather", "ROWS16"): lambda c, blk: _dim(c, "table", 0) > 65535,
    ("ex07_flash_attention", "ZERO"): lambda c, blk: c.scalars["sm_scale"] == 0.0,
    ("ex12_flash_attention_backward", "ZERO"): lambda c, blk: c.scalars["sm_scale"] == 0.0,
    ("ex04_group_m_swizzle", "GM1"): lambda c, blk: c.scalars["GROUP_M"] == 1 and c.scalars["num_pid_m"] > 1,
    ("ex04_group_m_swizzle", "ONE_GROUP"): lambda c, blk: 1 < c.scalars["num_pid_m"] < c.scalars["GROUP_M"],
    ("ex04_group_m_swizzle", "HUGE"): lambda c, blk: all(m > 10**6 and n > 10**6 for _, m, n, _ in c.calls),
    ("ex04_group_m_swizzle", "MANY"): lambda c, blk: c.scalars["num_pid_m"] * c.scalars["num_pid_n"] > 1024,
    ("ex10_layernorm_backward", "G_ABOVE_M"): lambda c, blk: c.scalars["G"] > _dim(c, "x", 0),
    # halves: rows [0, M/2) of +100 sum to 100 * M / 2; parity: the even rows to 100 * M / 2 too; M = 2048: 102400
    ("ex10_layernorm_backward", "FP16_PARTIALS"): lambda c, blk: c.dtype == "float16" and c.scalars["G"] == 2
    and 100 * _dim(c, "x", 0) / 2 - 5 * _dim(c, "x", 0) ** 0.5 > 65504 and _fill(c, "dy").__name__ == "_quarters",
    ("ex10_layernorm_backward", "FP16_ROWS"): lambda c, blk: c.dtype == "float16" and _dim(c, "x", 0) / c.scalars["G"] >= 200
    and _fill(c, "dy").__name__ == "_big_first_row",
    ("ex03_matmul", "CANCEL"): lambda c, blk: _cancels(c, 1),
    ("dr07_batched_dot", "CANCEL"): lambda c, blk: _cancels(c, 2),
    ("ex11_persistent_matmul", "CANCEL"): lambda c, blk: _cancels(c, 1),
    ("ex06_transpose", "WIDEINT"): lambda c, blk: c.dtype == "int32" and _fill(c, "x") == "full_int32",
    ("dr03_strided_copy_2d", "WIDEINT"): lambda c, blk: c.dtype == "int32" and _fill(c, "x") == "full_int32",
    ("dr03_strided_copy_2d", "WIDEINT64"): lambda c, blk: c.dtype == "int64" and _fill(c, "x") == "full_int64",
    ("dr04_gather", "WIDEINT"): lambda c, blk: c.dtype == "int32" and _fill(c, "table") == "full_int32",
    ("dr01_outer_add", "WIDEINT"): lambda c, blk: c.dtype == "int32" and _fill(c, "x") == _fill(c, "y") == "half_int32",
    ("dr06_tile_transpose", "WIDEINT"): lambda c, blk: c.dtype == "int32" and _fill(c, "x") == _fill(c, "y") == "half_int32",
    # one +inf in a row that has later blocks (dr08's default BLOCK) / in a, with more tiles than programs (ex11)
    ("dr08_cumsum", "ONE_INF"): lambda c, blk: _fill(c, "x") == "one_inf" and _dim(c, "x", 1) > blk("BLOCK"),
    ("ex11_persistent_matmul", "ONE_INF"): lambda c, blk: _fill(c, "a") == "one_inf"
    and _dim(c, "a", 0) * _dim(c, "b", 1) > c.scalars["NUM_PROGRAMS"] * blk("BLOCK_M") * blk("BLOCK_N"),
    # one +inf in the operand a learner might read wrapped (% K, % M): every wrapped row is inside one block
    ("ex03_matmul", "WRAP"): lambda c, blk: _fill(c, "b") == "one_inf" and _dim(c, "b", 0) < blk("BLOCK_K"),
    ("dr07_batched_dot", "WRAP"): lambda c, blk: _fill(c, "b") == "one_inf" and _dim(c, "b", 1) < 16,
    ("dr05_matvec", "WRAP"): lambda c, blk: _fill(c, "v") == "one_inf" and _dim(c, "v", 0) < blk("BLOCK_K"),
    ("dr02_col_sum", "WRAP"): lambda c, blk: _fill(c, "x") == "one_inf" and _dim(c, "x", 0) < blk("BLOCK_M"),
    ("ex07_flash_attention", "INF_KEY"): lambda c, blk: _fill(c, "k").__name__ == "_inf_key" and c.scalars["causal"]
    and _dim(c, "k", 2) > 9,
    ("ex07_flash_attention", "INF_VALUE"): lambda c, blk: _fill(c, "v").__name__ == "_inf_value"
    and _dim(c, "v", 2) % blk("BLOCK_N") != 0,
    ("ex10_layernorm_backward", "ROW_MEANS"): lambda c, blk: _fill(c, "x") == "row_offsets" and 1 < c.scalars["G"] < _dim(c, "x", 0),
    **{(ex, "ODD"): lambda c, blk: any(t.layout in ODD_LAYOUTS for t in (*c.inputs, *c.outputs))
       for ex in ("ex03_matmul", "ex06_transpose", "dr02_col_sum", "dr03_strided_copy_2d", "dr04_gather", "dr05_matvec",
                  "dr06_tile_transpose", "dr07_batched_dot")},
    ("ex05_layernorm", "EPS_DEFAULT"): lambda c, blk: "eps" not in c.call and "eps" not in c.kwargs
    and float(c.inputs[0].fill(torch.Generator().manual_seed(0), (4, 1000)).var()) < 1e-4,
    ("ex10_layernorm_backward", "EPS_DEFAULT"): lambda c, blk: "eps" not in c.call and "eps" not in c.kwargs
    and float(c.inputs[0].fill(torch.Generator().manual_seed(0), (4, 1000)).var()) < 1e-4,
    ("ex10_layernorm_backward", "GROUPS_40"): lambda c, blk: c.scalars["G"] == 40 and _dim(c, "x", 0) >= 40,
    ("ex07_flash_attention", "PLAIN_BLOCKS"): lambda c, blk: not c.scalars["causal"] and blk("BLOCK_M") != blk("BLOCK_N"),
    ("ex12_flash_attention_backward", "PLAIN_BLOCKS"): lambda c, blk: not c.scalars["causal"]
    and blk("BLOCK_M") != blk("BLOCK_N"),
    ("ex02_softmax", "NEG_INF"): lambda c, blk: _fill(c, "x") == "neg_inf_head" and _dim(c, "x", 1) * 11 // 20 >= 1024,
    # p one of tl.rand's numbers (a float32 in [0, 1); test_exercises checks that rand_at gives tl.rand's own)
    ("ex09_dropout", "TIE"): lambda c, blk: 0 <= c.scalars["p"] < 1 and float(np.float32(c.scalars["p"])) == c.scalars["p"],
    ("dr02_col_sum", "CANCEL"): lambda c, blk: c.dtype == "float16" and _fill(c, "x") == "row_halves"
    and _dim(c, "x", 0) >= 2 * 22,  # 22 rows of about 3000 pass 65504
    ("dr05_matvec", "CANCEL"): lambda c, blk: c.dtype == "float16" and _fill(c, "a") == "halves"
    and _fill(c, "v") == "near_100" and _dim(c, "a", 1) >= 32,
    ("ex10_layernorm_backward", "F16BIG"): lambda c, blk: c.dtype == "float16" and _fill(c, "x") == "offset"
    and _dim(c, "x", 1) * 1000 > 65504,
    # more rows (batches, partial sums) than the program counts a persistent kernel takes, and no multiple of them
    **{(ex, const): (lambda t: lambda c, blk: _past_program_counts(_dim(c, t, 0)))(t)
       for ex, const, t in (("ex02_softmax", "MANY_ROWS", "x"), ("ex05_layernorm", "MANY_ROWS", "x"),
                            ("dr08_cumsum", "MANY_ROWS", "x"), ("dr07_batched_dot", "MANY_BATCHES", "a"))},
    ("ex10_layernorm_backward", "G_LARGE"): lambda c, blk: c.scalars["G"] == 300 and _dim(c, "x", 0) >= 300,
    ("ex10_layernorm_backward", "WIDE_ROW"): lambda c, blk: _dim(c, "x", 1) == 5000 and _fill(c, "x") == "offset",
    ("ex05_layernorm", "FIRST_FAR"): lambda c, blk: _fill(c, "x") == "first_far",
    # row tiles past GROUP_M 4 and 8 and no multiple of them, for BLOCK_M 32 and 64 (the text's counts); more than
    # one column tile
    ("ex03_matmul", "GROUPS"): lambda c, blk: _dim(c, "a", 0) == 1100 and _dim(c, "b", 1) > 128 and all(
        -(-_dim(c, "a", 0) // bm) > g and -(-_dim(c, "a", 0) // bm) % g for bm in (32, 64) for g in (4, 8)),
}


def _past_program_counts(rows: int) -> bool:
    """More than 4 x 132 (the default grid of a persistent kernel on an H100 or H200) and a multiple of none of the
    counts a learner might take: 108 (A100), 132, 264, 528."""
    return rows > 528 and all(rows % p for p in (108, 132, 264, 528))


@pytest.mark.parametrize("ex_id, const", sorted(CLAIMS), ids=lambda v: str(v))
def test_a_hint_holds_for_every_case_it_is_attached_to(ex_id, const):
    hint, holds, ex = _constant(ex_id, const), CLAIMS[(ex_id, const)], registry.get(ex_id)
    seen, wrong = 0, []
    for device in ("cpu", "cuda"):
        for seed in SEEDS:
            for case in ex.cases_for(device, seed):
                if case.hint == hint:
                    seen += 1
                    defaults = _defaults(ex_id, case.func or ex.func)
                    if not holds(case, lambda name: case.scalars.get(name, defaults[name])):
                        wrong.append((device, seed, case.name))
    assert seen, f"no case of {ex_id} carries {const}"
    assert not wrong, f"{len(wrong)} of {seen} cases contradict {const}, e.g. {sorted(set(w[2] for w in wrong))[:6]}"


def test_ex04s_formula_reference_is_the_specs_order():
    """The case with a trillion tiles has the formula for its reference (the spec's list would not fit): on every
    small grid the formula gives the spec's order."""
    ex = registry.get("ex04_group_m_swizzle")
    case = next(c for c in ex.cases_for("cpu", 1) if c.hint == _constant("ex04_group_m_swizzle", "HUGE"))
    order = case.reference.__globals__["swizzle_order_spec"]
    for m in range(1, 14):
        for n in range(1, 8):
            for g in range(1, 9):
                assert [case.reference(p, m, n, g) for p in range(m * n)] == order(m, n, g), (m, n, g)
