"""The grader on a CUDA GPU: an illegal memory access must not poison later cases or the next submission.

Run on the H200:  PYTHONPATH=. python -m pytest -q tests/test_grader_gpu.py   (skipped without CUDA)

The faulty submission does an illegal memory access only when n == 7 (two cases: float32 and
float16). Each one breaks its kernel's CUDA context; the worker restarts the kernel for the next
case, so every other correctness case still passes. Then a correct submission, graded right after,
passes every correctness case.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grader import grade

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

IMA = [("def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK_SIZE: tl.constexpr):",
        "def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BAD, BLOCK_SIZE: tl.constexpr):"),
       ("tl.store(out_ptr + offs, a * x + y, mask=mask)", "tl.store(out_ptr + offs + BAD, a * x + y, mask=mask)"),
       ("axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)",
        "axpy_kernel[grid](x, y, out, a, n, (1 << 40) if n == 7 else 0, BLOCK_SIZE=BLOCK_SIZE)")]


def _variant(tmp_path: Path) -> Path:
    nb = json.loads((REPO / "solutions" / "ex01_axpy.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["id"] == "ex01-kernel")
    src = "".join(cell["source"])
    for old, new in IMA:
        assert old in src, old
        src = src.replace(old, new)
    cell["source"] = src
    path = tmp_path / "ima.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_illegal_memory_access_does_not_poison_the_next_case_or_submission(tmp_path):
    bad = grade.grade(_variant(tmp_path), "cuda", cell_timeout=60, seed=11)
    correctness = [t for t in bad.tests if not t.name.startswith("性能")]
    ima = [t for t in correctness if t.name.startswith("n=7 ")]
    rest = [t for t in correctness if not t.name.startswith("n=7 ")]
    assert len(ima) == 2 and all(t.status in ("error", "crashed") and t.points == 0 for t in ima), \
        [(t.name, t.status, t.message[:200]) for t in ima]
    assert any("CUDA" in t.message or "illegal" in t.message for t in ima), [t.message[:300] for t in ima]
    assert all(t.status == "passed" for t in rest), [(t.name, t.status, t.message[:200]) for t in rest if t.status != "passed"]

    good = grade.grade(REPO / "solutions" / "ex01_axpy.ipynb", "cuda", cell_timeout=60, seed=12)
    bad_good = [(t.name, t.status, t.message[:200]) for t in good.tests
                if not t.name.startswith("性能") and t.status != "passed"]
    assert not bad_good
    assert bad.duration_s + good.duration_s < 90
