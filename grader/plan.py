"""The grader chooses every input: one secret seed per run, two data sets per case.

``make_plan`` runs in the grader's process. For each case it draws the inputs the learner's code is
called with (written to ``work/``, which the learner's process sees) and a second, fresh set of the
same shapes that only the replay sees (written to ``replay/``). The grader keeps the exact values
(after rounding to each tensor's dtype) of both for the reference and for the "inputs unchanged" check.
"""
from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .spec import FILLS, FLOAT_DTYPES, Case, Exercise

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32,
                "int64": torch.int64, "int8": torch.int8, "uint8": torch.uint8}
NUMPY_SAVE = {"float32": np.float32, "float16": np.float16, "bfloat16": np.float32, "int32": np.int32,
              "int64": np.int64, "int8": np.int8, "uint8": np.uint8}
REPEATS = 2  # tensor cases per run called a second time with new data in the same tensors (a cache is stale)


@dataclass
class PlannedCase:
    id: str
    case: Case
    shown: dict                                 # name -> float64 (int64 for integer dtypes) tensor: what the learner's call gets
    fresh: dict                                 # name -> the same, what only the replay gets
    again: dict = field(default_factory=dict)   # second data set of a repeat case


def _subseed(seed: int, case_no: int, role: str) -> int:
    """A seed of one use of the run's secret seed, from a hash of it: what one use shows says nothing of the others,
    nor of the secret seed."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{case_no}:{role}".encode()).digest()[:8], "little") >> 1


def _generator(seed: int, case_no: int, role: str) -> torch.Generator:
    """Each data set of each case from a generator of its own (the values the learner's call is shown, from which a
    Mersenne Twister's state can be worked out, say nothing of the fresh ones the replay runs on)."""
    return torch.Generator().manual_seed(_subseed(seed, case_no, role))


def draw(t, case: Case, g: torch.Generator) -> torch.Tensor:
    """The values of one input, rounded to the dtype the kernel sees; carried as float64, integers as int64 (float64
    holds an integer exactly only up to 2^53)."""
    fill = FILLS[t.fill] if isinstance(t.fill, str) else t.fill
    values = fill(g, tuple(t.shape))
    dtype = t.dtype_in(case)
    if dtype in FLOAT_DTYPES:
        return values.to(torch.float64).to(TORCH_DTYPES[dtype]).double()
    return values.to(TORCH_DTYPES[dtype]).long()


def _data_set(case: Case, seed: int, case_no: int, role: str) -> dict:
    g = _generator(seed, case_no, role)
    return {t.name: draw(t, case, g) for t in case.inputs}


def _save(path: Path, values: torch.Tensor, dtype: str) -> None:
    np.save(path, values.numpy().astype(NUMPY_SAVE[dtype]), allow_pickle=False)


def tensor_specs(case: Case) -> tuple[list, list]:
    ins = [{"name": t.name, "shape": list(t.shape), "layout": t.layout, "dtype": t.dtype_in(case)} for t in case.inputs]
    outs = [{"name": t.name, "shape": list(t.shape), "layout": t.layout, "dtype": t.dtype_in(case)} for t in case.outputs]
    return ins, outs


def _entry(ex: Exercise, pc: PlannedCase) -> dict:
    case = pc.case
    ins, outs = tensor_specs(case)
    for spec in ins:
        spec["file"] = f"{pc.id}_{spec['name']}.npy"
    return {"id": pc.id, "name": case.name, "mode": case.mode, "func": case.func, "inputs": ins, "outputs": outs,
            "scalars": case.scalars, "call": list(case.call), "kwargs": list(case.kwargs),
            "calls": [list(c) for c in case.calls], "repeat": bool(pc.again), "bare": case.bare,
            "perf": {**case.perf, "dtype": case.dtype} if case.perf else {},
            "forbid": list(ex.forbid) if case.mode == "tensor" else []}


def make_plan(ex: Exercise, cases: list[Case], seed: int, workdir: Path, device: str) -> list[PlannedCase]:
    """Draw every case's inputs; write ``work/plan.json`` and the shown inputs (the fresh ones stay here)."""
    planned = []
    tensor_ids = [i for i, c in enumerate(cases) if c.mode == "tensor" and c.inputs and not c.bare]
    repeat = set(random.Random(seed).sample(tensor_ids, min(REPEATS, len(tensor_ids))))
    for i, case in enumerate(cases):
        shown, fresh = _data_set(case, seed, i, "shown"), _data_set(case, seed, i, "fresh")
        again = _data_set(case, seed, i, "again") if i in repeat else {}
        pc = PlannedCase(f"c{i:02d}", case, shown, fresh, again)
        for t in case.inputs:
            _save(workdir / f"{pc.id}_{t.name}.npy", shown[t.name], t.dtype_in(case))
            if again:
                _save(workdir / f"{pc.id}_{t.name}_2.npy", again[t.name], t.dtype_in(case))
        planned.append(pc)
    (workdir / "plan.json").write_text(json.dumps({"exercise": ex.id, "device": device,
                                                   "cases": [_entry(ex, pc) for pc in planned]}), encoding="utf-8")
    return planned


def _max_programs(case: Case) -> int | None:
    """The most programs one launch of this case may have (``Case.max_programs`` names the scalar), or None."""
    if not case.max_programs:
        return None
    return int({**case.scalars, **case.perf.get("scalars", {})}[case.max_programs])


def write_replay(ex: Exercise, planned: list[PlannedCase], replaydir: Path, device: str, seed: int) -> None:
    """``replay/plan.json`` and the fresh inputs, which the learner's process never had."""
    entries = []
    for i, pc in enumerate(planned):
        for t in pc.case.inputs:
            _save(replaydir / f"{pc.id}_{t.name}.npy", pc.fresh[t.name], t.dtype_in(pc.case))
        entries.append({**_entry(ex, pc), "order_seed": _subseed(seed, i, "order"), "order_check": pc.case.order_check,
                        "perf_ref": ex.perf_ref, "host_scratch": ex.host_scratch, "max_programs": _max_programs(pc.case)})
    (replaydir / "plan.json").write_text(json.dumps({"exercise": ex.id, "device": device, "cases": entries,
                                                     "float_seed": _subseed(seed, 0, "float") & 0xFFFFFFFF}),
                                         encoding="utf-8")
