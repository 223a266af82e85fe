"""Quick feedback inside the learner's notebook: the public cases, judged like the grader judges.

    from grader import selfcheck
    selfcheck.check("ex01_axpy", globals())

This runs in the learner's own kernel, so it is a hint, not a grade: the same inputs machinery,
guard regions and messages as ``python -m grader check``, and on the CPU the same replay of the
launches on fresh inputs with the memory check and (with atomics) the programs interleaved — but only the public
cases, with a fixed seed. The grader adds hidden sizes drawn from a secret seed.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from . import compare, harness, plan, registry

PUBLIC_SEED = 12345


def public_cases(exercise_id: str, device: str):
    return [c for c in registry.get(exercise_id).cases_for(device, PUBLIC_SEED) if c.public and not c.gpu_only]


def _kernels(namespace: dict) -> dict:
    from triton.runtime.jit import JITFunction

    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover
        InterpretedFunction = JITFunction
    kinds = (JITFunction, InterpretedFunction)
    found = {}
    for k, v in namespace.items():
        for _ in range(4):  # @triton.autotune / @triton.heuristics wrap the kernel (and may wrap each other)
            if isinstance(v, kinds) or not hasattr(v, "fn"):
                break
            v = v.fn
        if isinstance(v, kinds):
            found[k] = v
    return found


def check(exercise_id: str, namespace: dict) -> None:
    from tcourse.runtime import current

    from .replay import Guard, Replayer

    device = current().device
    ex = registry.get(exercise_id)
    with tempfile.TemporaryDirectory(prefix="tcourse-selfcheck-") as tmp:
        root = Path(tmp)
        for sub in ("work", "replay", "replay/out"):
            (root / sub).mkdir()
        planned = plan.make_plan(ex, public_cases(exercise_id, device), PUBLIC_SEED, root / "work", device)
        plan.write_replay(ex, planned, root / "replay", device, PUBLIC_SEED)
        guard = Guard() if device != "cuda" else None
        uninstall = guard.install() if guard else None
        try:
            rp = Replayer(root, device, _kernels(namespace), guard)
            results = []
            for i, (pc, entry) in enumerate(zip(planned, _entries(root))):
                harness.run_case(namespace, pc.id, str(root / "work"))
                if pc.case.mode == "tensor" and not pc.case.bare:
                    _replay_one(rp, entry, root)
                results.append(compare.judge(ex, pc, root / "work", root / "replay" / "out", device, planned[:i]))
        finally:
            if uninstall:
                uninstall()
    ok = all(r.status == "passed" for r in results)
    for r in results:
        print(f"{'✔' if r.status == 'passed' else '✘'} {r.name}: {r.message}")
    print("自检通过（提交后评分器还会用没见过的形状和新的随机输入再测一遍）。" if ok else
          "自检没有通过：先看上面第一条 ✘ 的提示。")


def _entries(root: Path) -> list[dict]:
    import json

    return json.loads((root / "replay" / "plan.json").read_text(encoding="utf-8"))["cases"]


def _replay_one(rp, entry: dict, root: Path) -> None:
    import json

    from .replay import BadLog, _error_text
    from .safeio import Untrusted

    try:
        rec = rp.tensor_case(entry)
    except (BadLog, Untrusted) as e:
        rec = {"bad_log": str(e)}
    except Exception as e:  # reported like the grader reports it
        rec = {"error": _error_text(e)}
    (root / "replay" / "out" / f"{entry['id']}.json").write_text(json.dumps(rec), encoding="utf-8")
