"""The grader on a CUDA GPU: faults and cheats that only a GPU can show.

An illegal memory access must not poison later cases or the next submission; a result finished on
another CUDA stream after the function returned must fail; the same side stream joined to the
current one before returning is fine.

Run on the H200:  PYTHONPATH=. python -m pytest -q tests/test_grader_gpu.py   (skipped without CUDA)

The faulty submission does an illegal memory access only when n == 7 (two cases: float32 and
float16). Each one breaks its kernel's CUDA context; the worker restarts the kernel for the next
case, so every other correctness case still passes. Then a correct submission, graded right after,
passes every correctness case.

The side-stream submission launches a kernel that spins for milliseconds on a new stream, then its
AXPY kernel on the same stream, and returns without waiting: the harness's copy of ``out`` taken at
the return (on the current stream) misses what lands later.

A submission that launches only part of the work on the timing shape (n = 2^24: the first 2^22
elements) passes every correctness case and gets no performance points: the replay compares the
timed launches' outputs with the solution's before timing them.

A kernel whose result depends on memory nothing wrote before it (its own output, read first; a scratch
tensor straight from ``torch.empty``) fails on the GPU as on the CPU; one that reads its output and drops
the value passes.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from grader import grade
from grader.spec import BARE_TAG

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "adversarial"))
from table import FIXTURES  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

IMA = [("def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK_SIZE: tl.constexpr):",
        "def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BAD, BLOCK_SIZE: tl.constexpr):"),
       ("tl.store(out_ptr + offs, a * x + y, mask=mask)", "tl.store(out_ptr + offs + BAD, a * x + y, mask=mask)"),
       ("axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)",
        "axpy_kernel[grid](x, y, out, a, n, (1 << 40) if n == 7 else 0, BLOCK_SIZE=BLOCK_SIZE)")]


LAUNCH = "    axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)\n"
SPIN = ("@triton.jit\ndef spin_kernel(p, iters):\n    acc = tl.load(p)\n    for _ in range(iters):\n"
        "        acc = acc * 1.0000001 + 1e-7\n    tl.store(p, acc)\n\n\n@triton.jit\ndef axpy_kernel")
SIDE = ("    side = torch.cuda.Stream()\n    side.wait_stream(torch.cuda.current_stream())\n"
        "    with torch.cuda.stream(side):\n"
        "        spin_kernel[(1,)](torch.ones(1, device=x.device), 4_000_000)\n"
        + LAUNCH.replace("    axpy", "        axpy"))
SIDE_STREAM = [("@triton.jit\ndef axpy_kernel", SPIN), (LAUNCH, SIDE)]
PART_OF_THE_WORK = [("grid = (triton.cdiv(n, BLOCK_SIZE),)", "grid = (triton.cdiv(min(n, 1 << 22), BLOCK_SIZE),)")]
SIDE_STREAM_JOINED = SIDE_STREAM + [("    return out", "    torch.cuda.current_stream().wait_stream(side)\n    return out")]


def _variant(tmp_path: Path, edits, name: str) -> Path:
    nb = json.loads((REPO / "solutions" / "ex01_axpy.ipynb").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["id"] == "ex01-kernel")
    src = "".join(cell["source"])
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new, 1)
    cell["source"] = src
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_illegal_memory_access_does_not_poison_the_next_case_or_submission(tmp_path):
    bad = grade.grade(_variant(tmp_path, IMA, "ima"), "cuda", cell_timeout=60, seed=11)
    correctness = [t for t in bad.tests if not t.name.startswith("性能")]
    at_7 = lambda t: t.name.startswith("n=7 ") or "x(7,)" in t.name  # noqa: E731  (the float16 bare call is n=7 too)
    ima = [t for t in correctness if at_7(t)]
    bare = [t for t in correctness if BARE_TAG in t.name and not at_7(t)]  # counts only when every other case passed
    rest = [t for t in correctness if not at_7(t) and t not in bare]
    assert bare and all(t.status == "failed" and "不计分" in t.message for t in bare), [(t.name, t.status) for t in bare]
    assert len(ima) == 3 and all(t.status in ("error", "crashed") and t.points == 0 for t in ima), \
        [(t.name, t.status, t.message[:200]) for t in ima]
    assert any("CUDA" in t.message or "illegal" in t.message for t in ima), [t.message[:300] for t in ima]
    assert all(t.status == "passed" for t in rest), [(t.name, t.status, t.message[:200]) for t in rest if t.status != "passed"]

    good = grade.grade(REPO / "solutions" / "ex01_axpy.ipynb", "cuda", cell_timeout=60, seed=12)
    bad_good = [(t.name, t.status, t.message[:200]) for t in good.tests
                if not t.name.startswith("性能") and t.status != "passed"]
    assert not bad_good
    assert bad.duration_s + good.duration_s < 90


def test_work_left_running_on_another_stream_fails_and_joined_passes(tmp_path, monkeypatch):
    # the answer-cell policy refuses streams outright; this checks the run-time defence on its own
    from grader import policy

    monkeypatch.setattr(grade.policy, "audit", lambda cells, *names: policy.Audit(sources=dict(cells)))
    late = grade.grade(_variant(tmp_path, SIDE_STREAM, "side"), "cuda", cell_timeout=60, seed=13)
    correctness = [t for t in late.tests if not t.name.startswith("性能")]
    assert correctness and all(t.status == "failed" and t.points == 0 for t in correctness), \
        [(t.name, t.status, t.message[:200]) for t in correctness]
    assert any("另一个" in t.message and "stream" in t.message for t in correctness), [t.message[:200] for t in correctness]

    joined = grade.grade(_variant(tmp_path, SIDE_STREAM_JOINED, "joined"), "cuda", cell_timeout=60, seed=14)
    assert all(t.status == "passed" for t in joined.tests if not t.name.startswith("性能")), \
        [(t.name, t.status, t.message[:200]) for t in joined.tests if t.status != "passed"]



def test_timed_launches_that_skip_work_get_no_performance_points(tmp_path):
    part = grade.grade(_variant(tmp_path, PART_OF_THE_WORK, "part"), "cuda", cell_timeout=60, seed=15)
    perf = [t for t in part.tests if t.name.startswith("性能")]
    rest = [t for t in part.tests if not t.name.startswith("性能")]
    assert all(t.status == "passed" for t in rest), [(t.name, t.status, t.message[:200]) for t in rest if t.status != "passed"]
    assert perf and all(t.status == "failed" and t.points == 0 for t in perf), [(t.name, t.status, t.message[:200]) for t in perf]
    assert all("计时用的调用" in t.message and "out" in t.message for t in perf), [t.message[:200] for t in perf]


def test_reads_of_memory_nothing_wrote_fail_where_the_result_depends_on_them(tmp_path):
    # the CPU replay finds the read itself (tests/fixtures/adversarial/table.py); a GPU replay cannot see reads, so it
    # runs atomic-free launches a second time with random bytes in the memory nothing defined and compares
    for seed, name in enumerate(("reads-its-own-output-first", "reads-scratch-from-empty-first"), 16):
        got = grade.grade(_variant(tmp_path, FIXTURES[name]["edit"], name), "cuda", cell_timeout=60, seed=seed)
        correctness = [t for t in got.tests if not t.name.startswith("性能") and BARE_TAG not in t.name]
        assert correctness and all(t.status == "failed" and "还没有定义" in t.message for t in correctness), \
            (name, [(t.name, t.status, t.message[:200]) for t in correctness])
        assert not any(t.points for t in got.tests if BARE_TAG in t.name)
    kept = grade.grade(_variant(tmp_path, FIXTURES["reads-its-output-and-drops-it"]["edit"], "drops"), "cuda",
                       cell_timeout=60, seed=18)
    assert all(t.status == "passed" for t in kept.tests if not t.name.startswith("性能")), \
        [(t.name, t.status, t.message[:200]) for t in kept.tests if t.status != "passed"]
