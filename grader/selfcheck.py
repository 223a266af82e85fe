"""Quick feedback inside the learner's notebook: a few public cases, judged like the grader judges.

    from grader import selfcheck
    selfcheck.check("ex01_axpy", globals())

This runs in the learner's own kernel (so it is only a hint, not a grade): same inputs machinery,
same guard regions, same messages as ``python -m grader check``, fewer and fixed cases.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from . import compare, harness, registry
from .plan import make_plan

PUBLIC_SEED = 12345


def public_cases(exercise_id: str, device: str) -> list[int]:
    """Indices of the cases the self-check runs: every other CPU case (the grader runs all, fresh seed)."""
    cases = registry.get(exercise_id).cases_for(device)
    return [i for i, c in enumerate(cases) if not c.gpu_only and i % 2 == 0]


def check(exercise_id: str, namespace: dict) -> bool:
    from tcourse.runtime import current

    device = current().device
    ex = registry.get(exercise_id)
    keep = {f"c{i:02d}" for i in public_cases(exercise_id, device)}
    with tempfile.TemporaryDirectory(prefix="tcourse-selfcheck-") as tmp:
        wd = Path(tmp)
        _, planned = make_plan(ex, device, PUBLIC_SEED, wd, only_cpu=True)
        results = []
        for pc in planned:
            if pc.id not in keep:
                continue
            harness.run_case(namespace, pc.id, str(wd))
            results.append(compare.judge(ex, pc, wd, device))
    ok = all(r.status == "passed" for r in results)
    for r in results:
        print(f"{'✔' if r.status == 'passed' else '✘'} {r.name}: {r.message}")
    print("自检通过（提交后评分器还会用没见过的形状和新的随机输入再测一遍）。" if ok else
          "自检没有通过：先看上面第一条 ✘ 的提示。")
    return ok
