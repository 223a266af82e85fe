"""The grader chooses the inputs: one fresh seed per run, inputs written as .npy, a JSON plan.

``make_plan`` runs in the grader's process. It keeps the exact input values (after rounding to the
case's dtype) for the reference and for the "inputs unchanged" check, and writes what the kernel-side
harness needs into the working directory: ``plan.json`` and ``<case>_<input>.npy``.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .harness import TORCH_DTYPES
from .registry import Case, Exercise

FILLS = {
    "randn": lambda g, shape: torch.randn(shape, generator=g, dtype=torch.float64),
    "large": lambda g, shape: 50 * torch.randn(shape, generator=g, dtype=torch.float64),
    "offset": lambda g, shape: 1000 + torch.randn(shape, generator=g, dtype=torch.float64),
    "weight": lambda g, shape: 1 + 0.1 * torch.randn(shape, generator=g, dtype=torch.float64),
}
NUMPY_SAVE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32, "int32": np.int32}


@dataclass
class PlannedCase:
    id: str
    case: Case
    inputs: dict  # name -> float64 tensor holding exactly the values the kernel sees
    inputs2: dict = field(default_factory=dict)  # second data set (repeat cases): same buffers, new values

REPEATS = 2  # tensor cases per run called twice (chosen by the seed): a result cached by pointer/id is stale


def make_plan(ex: Exercise, device: str, seed: int, workdir: Path, only_cpu: bool) -> tuple[dict, list[PlannedCase]]:
    """Write plan.json and the input files; return the plan and the grader-side copies of the inputs.

    ``only_cpu``: leave GPU-only cases out of the plan (they are reported as skipped).
    """
    planned, entries = [], []
    cases = ex.cases_for(device)
    tensor_ids = [i for i, c in enumerate(cases) if c.mode == "tensor" and c.inputs and not (c.gpu_only and only_cpu)]
    repeat = set(random.Random(seed).sample(tensor_ids, min(REPEATS, len(tensor_ids))))
    for i, case in enumerate(cases):
        if case.gpu_only and only_cpu:
            continue
        cid = f"c{i:02d}"
        g = torch.Generator().manual_seed(seed * 1000 + i)
        inputs, inputs2, specs = {}, {}, []
        for t in case.inputs:
            values = FILLS[t.fill](g, t.shape).to(TORCH_DTYPES[case.dtype]).double()  # rounded to the dtype
            inputs[t.name] = values
            fname = f"{cid}_{t.name}.npy"
            np.save(workdir / fname, values.numpy().astype(NUMPY_SAVE[case.dtype]), allow_pickle=False)
            if i in repeat:
                inputs2[t.name] = FILLS[t.fill](g, t.shape).to(TORCH_DTYPES[case.dtype]).double()
                np.save(workdir / fname.replace(".npy", "_2.npy"),
                        inputs2[t.name].numpy().astype(NUMPY_SAVE[case.dtype]), allow_pickle=False)
            specs.append({"name": t.name, "file": fname, "shape": list(t.shape), "layout": t.layout,
                          "dtype": case.dtype})
        entries.append({
            "id": cid, "name": case.name, "mode": case.mode, "func": case.func, "dtype": case.dtype,
            "inputs": specs, "scalars": case.scalars, "call": list(case.call), "kwargs": list(case.kwargs),
            "out_shape": list(case.out_shape), "combos": [list(c) for c in case.combos],
            "poison": list(ex.poison) if case.needs_launch else [], "perf": case.perf, "repeat": i in repeat,
        })
        planned.append(PlannedCase(cid, case, inputs, inputs2))
    plan = {"exercise": ex.id, "device": device, "seed": seed, "cases": entries}
    (workdir / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    return plan, planned
