"""A generated class of ex01_axpy submissions: small edits of solutions/ex01_axpy.ipynb, so that each
costs one short grading. Used by tests/test_slurm.py and scripts/grading_bench.py."""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STORE = "    tl.store(out_ptr + offs, a * x + y, mask=mask)\n"
LAUNCH = "    axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)\n"
KINDS = {  # kind -> (old, new) edits of the solution's answer cells
    "correct": [],
    "wrong-formula": [(STORE, STORE.replace("a * x + y", "a * x - y"))],
    "no-store": [(STORE, "")],                                        # out keeps its NaN prefill
    # these two fail only the shapes that are not a multiple of BLOCK_SIZE: their score depends on the
    # hidden shapes each run draws, so a comparison of two gradebooks leaves them out
    "no-mask": [(STORE, STORE.replace(", mask=mask", ""))],
    "small-grid": [("    grid = (triton.cdiv(n, BLOCK_SIZE),)\n", "    grid = (n // BLOCK_SIZE,)\n")],
    "torch-instead": [(LAUNCH, "    out.copy_(a * x + y)\n")],
    "crash": [(LAUNCH, "    import os\n    os._exit(1)\n")],          # kills the kernel process it runs in
    "hang": [("@triton.jit\ndef axpy_kernel", "while True:\n    pass\n\n\n@triton.jit\ndef axpy_kernel")],
    "unusable": None,                                                 # not a notebook at all
}


def submission(kind: str, student: str) -> str:
    """The file content of one ``kind`` of submission; every student's differs (a comment with the name)."""
    if KINDS[kind] is None:
        return f"{student}: this upload is not a notebook"
    nb = json.loads((REPO / "solutions" / "ex01_axpy.ipynb").read_text(encoding="utf-8"))
    edits = [("@triton.jit\ndef axpy_kernel", f"# {student}\n@triton.jit\ndef axpy_kernel")] + KINDS[kind]
    for old, new in edits:
        hits = 0
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if old in src:
                cell["source"] = src.replace(old, new, 1)
                hits += 1
        assert hits == 1, f"edit for {kind!r} does not apply once to solutions/ex01_axpy.ipynb: {old!r}"
    return json.dumps(nb, ensure_ascii=False)


def make_class(folder: Path, mix: dict[str, int]) -> dict[str, str]:
    """Write ``mix[kind]`` submissions of each kind into ``folder``; returns {file name: kind}."""
    folder.mkdir(parents=True, exist_ok=True)
    kinds, k = {}, 0
    for kind, count in mix.items():
        for _ in range(count):
            name = f"student{k:03d}_{kind}.ipynb"
            (folder / name).write_text(submission(kind, f"student{k:03d}"), encoding="utf-8")
            kinds[name] = kind
            k += 1
    return kinds
