"""Exercise and solution notebooks: identity in metadata, normalized, run top to bottom on CPU.

The solution's self-check cell must report success and the untouched exercise's must report failure
without raising (a learner runs the whole notebook before writing anything).
"""
from __future__ import annotations

import inspect
import json
import os
import random
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from grader import registry, replay, source
from tcourse import nbtools

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = [(folder, ex) for ex in registry.exercises() for folder in ("exercises", "solutions")]


def test_every_exercise_has_a_source_and_both_notebooks():
    assert source.exercise_ids() == sorted(registry.exercises())
    for folder, ex in NOTEBOOKS:
        assert (REPO / folder / f"{ex}.ipynb").exists()


def test_perf_cases_call_their_tuned_kernel_with_its_signature():
    """The "tuned tcourse.kernels" line of a perf result needs the call to bind (a TypeError there is swallowed
    as information only, so it would silently never show)."""
    import tcourse.kernels as tk

    checked = []
    for ex in registry.exercises().values():
        for case in (ex.cases("cuda", random.Random(1)) if ex.cases else []):
            if case.mode != "perf" or not ex.perf_ref:
                continue
            names, kw_names = replay.perf_ref_call(case.perf)
            inspect.signature(getattr(tk, ex.perf_ref)).bind(*names, **dict.fromkeys(kw_names))
            checked.append(ex.id)
    assert len(checked) >= 7, checked


@pytest.mark.parametrize("folder, ex", NOTEBOOKS)
def test_identity_roles_and_normalized(folder, ex):
    path = REPO / folder / f"{ex}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert nb["metadata"]["tcourse"]["exercise"] == ex
    assert path.read_text(encoding="utf-8") == nbtools.normalized_text(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code[0]["metadata"]["tcourse"]["role"] == "setup" and "tcourse.setup()" in "".join(code[0]["source"])
    text = "".join("".join(c["source"]) for c in nb["cells"])
    assert "### BEGIN SOLUTION" not in text and "### STUB" not in text
    if not registry.get(ex).written:
        roles = [c["metadata"]["tcourse"]["role"] for c in code]
        assert "solution" in roles and "selfcheck" in roles
        assert ("NotImplementedError" in text) == (folder == "exercises")


@pytest.mark.parametrize("folder, ex", NOTEBOOKS)
def test_runs_top_to_bottom_on_cpu(folder, ex, monkeypatch):
    monkeypatch.setenv("TCOURSE_DEVICE", "cpu")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(REPO / folder / f"{ex}.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO / folder)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    results = [o for c in nb.cells if c.metadata.get("tcourse", {}).get("role") == "selfcheck" for o in c.outputs
               if o.get("output_type") == "execute_result"]
    assert not results, "the self-check cell must print its verdict, not return a value (a stray False/True)"
    if not registry.get(ex).written:
        assert ("自检通过" in printed) == (folder == "solutions"), printed[-2000:]
        assert "✘" in printed if folder == "exercises" else "✘" not in printed


def test_the_dropout_tie_case_uses_a_number_tl_rand_gives():
    """ex09's tie case takes p = tl.rand(seed, i) computed on the host (``rand_at``): the course's keep_mask, a Triton
    kernel (the interpreter here, a GPU where there is one), must drop element i at that p and keep it at the float32
    just below, for seeds of 32 and 64 bits."""
    import numpy as np
    import torch

    from tcourse.kernels.dropout_kernels import keep_mask

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    rand_at = registry.get("ex09_dropout").cases.__globals__["rand_at"]
    rng = random.Random(5)
    for seed in (0, 2**31 - 1, rng.randint(2**32, 2**63 - 1)):
        i = rng.randrange(3000)
        p = rand_at(seed, i)
        below = float(np.nextafter(np.float32(p), np.float32(0)))
        assert not keep_mask(3000, p, seed, dev)[i] and keep_mask(3000, below, seed, dev)[i], (seed, i, p)
