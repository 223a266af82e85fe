"""A case's hint says what the case is about ("the row is wider than 1024 columns", "n is not a multiple of
BLOCK"), and it is shown when the case fails. Over many secret seeds, each hint with such a claim holds for every
case it is attached to: a case drawn near a multiple must not land on the side its hint rules out, and a default
hint must fit the sizes it is given."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader import registry

SOURCES = Path(__file__).resolve().parent.parent / "grader" / "exercise_src"
SEEDS = range(1000)


def _constant(ex_id: str, name: str) -> str:
    """The hint's text, read from the exercise's source without running it."""
    for node in ast.parse((SOURCES / f"{ex_id}.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"{ex_id}.{name}")


def _dim(case, tensor: str, axis: int) -> int:
    return next(t.shape for t in case.inputs if t.name == tensor)[axis]


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _off(case, *dims_blocks) -> bool:
    """Some size is not a multiple of its block: (tensor, axis, block name, the wrapper's default block)."""
    return any(_dim(case, t, ax) % case.scalars.get(b, default) for t, ax, b, default in dims_blocks)


# (exercise, hint constant) -> what must hold for a case carrying that hint; the defaults are the wrappers' own
CLAIMS = {
    ("ex01_axpy", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_SIZE", 1024)),
    ("ex02_softmax", "TAIL"): lambda c: not _pow2(_dim(c, "x", 1)),
    ("ex02_softmax", "WIDE"): lambda c: _dim(c, "x", 1) > 1024,
    ("ex03_matmul", "TAIL"): lambda c: _off(c, ("a", 0, "BLOCK_M", 32), ("b", 1, "BLOCK_N", 32), ("a", 1, "BLOCK_K", 32)),
    ("ex03_matmul", "KLOOP"): lambda c: _dim(c, "a", 1) > 256,
    ("ex05_layernorm", "TAIL"): lambda c: not _pow2(_dim(c, "x", 1)),
    ("ex05_layernorm", "WIDE"): lambda c: _dim(c, "x", 1) > 1024,
    ("ex06_transpose", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_M", 32), ("x", 1, "BLOCK_N", 32)),
    ("ex07_flash_attention", "TAIL"): lambda c: _off(c, ("q", 2, "BLOCK_N", 16)),
    ("ex09_dropout", "TAIL"): lambda c: _off(c, (c.inputs[0].name, 0, "BLOCK_SIZE", 1024)),
    ("ex10_layernorm_backward", "TAIL"): lambda c: not _pow2(_dim(c, "x", 1)),
    ("ex11_persistent_matmul", "TAIL"): lambda c: _off(c, ("a", 0, "BLOCK_M", 32), ("b", 1, "BLOCK_N", 32),
                                                       ("a", 1, "BLOCK_K", 32)),
    ("ex12_flash_attention_backward", "TAIL"): lambda c: _off(c, ("q", 2, "BLOCK_M", 16), ("q", 2, "BLOCK_N", 16)),
    ("dr01_outer_add", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_M", 32), ("y", 0, "BLOCK_N", 32)),
    ("dr01_outer_add", "WIDE"): lambda c: _dim(c, "y", 0) > c.scalars.get("BLOCK_N", 32),
    ("dr02_col_sum", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_M", 32), ("x", 1, "BLOCK_N", 32)),
    ("dr02_col_sum", "LOOP"): lambda c: _dim(c, "x", 0) > c.scalars.get("BLOCK_M", 32),
    ("dr03_strided_copy_2d", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_M", 32), ("x", 1, "BLOCK_N", 32)),
    ("dr04_gather", "TAIL"): lambda c: _off(c, ("idx", 0, "BLOCK_N", 16), ("table", 1, "BLOCK_D", 64)),
    ("dr04_gather", "WIDE"): lambda c: _dim(c, "table", 1) > c.scalars.get("BLOCK_D", 64),
    ("dr05_matvec", "TAIL"): lambda c: _off(c, ("a", 0, "BLOCK_M", 32), ("a", 1, "BLOCK_K", 128)),
    ("dr05_matvec", "KLOOP"): lambda c: _dim(c, "a", 1) > 256,
    ("dr06_tile_transpose", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK_M", 32), ("x", 1, "BLOCK_N", 16)),
    ("dr07_batched_dot", "TAIL"): lambda c: any(n < max(16, 1 << (n - 1).bit_length())
                                                for n in (_dim(c, "a", 1), _dim(c, "a", 2), _dim(c, "b", 2))),
    ("dr08_cumsum", "TAIL"): lambda c: _off(c, ("x", 1, "BLOCK", 128)),
    ("dr08_cumsum", "CARRY"): lambda c: _dim(c, "x", 1) > c.scalars.get("BLOCK", 128),
    ("dr09_histogram", "TAIL"): lambda c: _off(c, ("x", 0, "BLOCK", 256)),
}


@pytest.mark.parametrize("ex_id, const", sorted(CLAIMS), ids=lambda v: str(v))
def test_a_hint_holds_for_every_case_it_is_attached_to(ex_id, const):
    hint, holds = _constant(ex_id, const), CLAIMS[(ex_id, const)]
    seen, wrong = 0, []
    for device in ("cpu", "cuda"):
        for seed in SEEDS:
            for case in registry.get(ex_id).cases_for(device, seed):
                if case.hint == hint:
                    seen += 1
                    if not holds(case):
                        wrong.append((device, seed, case.name))
    assert seen, f"no case of {ex_id} carries {const}"
    assert not wrong, f"{len(wrong)} of {seen} cases contradict {const}, e.g. {sorted(set(w[2] for w in wrong))[:6]}"
