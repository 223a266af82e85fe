"""Generated result JSON and gradebook folders, shaped like what ``grade`` writes, for tests of the
exporters and the class report (grading real submissions costs seconds each; these cost nothing)."""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from grader import batch, registry

MESSAGES = {  # what compare/grade say for the usual mistakes (the report groups them)
    "oob": ("failed", "shape (1025,), float32：越界写 —— out 末尾的保护区被写了 {n} 个元素。通常是 tl.store 少了 mask。"),
    "nan": ("failed", "shape (4099,), float32：输出有 {n} 个 NaN（第一个在 4096，参考值 0.5）。可能是这些元素没有被写。"),
    "tol": ("failed", "shape (7,), float16：{n}/7 个元素超出容差（atol=0.002, rtol=0.002）；最大误差 0.1 在 3。"),
    "timeout": ("timeout", "这个测试超时了：kernel 或包装函数里有死循环，或者太慢（grid 太大？）。"),
    "crashed": ("crashed", "运行这个测试时内核崩溃了（进程退出或段错误）。"),
}


def result(exercise: str, verdicts: dict[int, str] | None = None, hidden: set[int] = frozenset(),
           hidden_until: str | None = None, duration_s: float = 8.0, n: int = 3) -> dict:
    """A CPU result of ``exercise``: case i gets MESSAGES[verdicts[i]] (passed otherwise); GPU-only
    cases are skipped, as on a CPU run; cases in ``hidden`` are marked hidden."""
    verdicts = verdicts or {}
    tests = []
    for i, c in enumerate(registry.get(exercise).cases_for("cuda", 0)):
        if c.gpu_only:
            t = {"name": c.name, "status": "skipped", "points": 0.0, "max_points": c.points, "message": "需要 GPU。"}
        elif i in verdicts:
            status, msg = MESSAGES[verdicts[i]]
            t = {"name": c.name, "status": status, "points": 0.0, "max_points": c.points, "message": msg.format(n=n)}
        else:
            t = {"name": c.name, "status": "passed", "points": c.points, "max_points": c.points, "message": "最大误差 0"}
        if i in hidden:
            t["visibility"] = "hidden"
        tests.append(t)
    graded = [t for t in tests if t["status"] != "skipped"]
    r = {"exercise": exercise, "score": sum(t["points"] for t in graded),
         "max_score": sum(t["max_points"] for t in graded), "device": "cpu", "versions": {"python": "3.12"},
         "duration_s": duration_s, "seed": 7, "skipped_points": sum(t["max_points"] for t in tests if t not in graded),
         "notes": [], "sandbox": "", "tests": tests}
    if hidden_until:
        r["hidden_until"] = hidden_until
    return r


def gradebook(out: Path, n: int = 40, seed: int = 0) -> Path:
    """A folder like ``grade --out`` leaves: gradebook.csv and one JSON per submission, for ex01/ex02,
    with passes, the usual failures, crashes, timeouts and one unusable file."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(n):
        ex = "ex01_axpy" if k % 3 else "ex02_softmax"
        cases = len([c for c in registry.get(ex).cases_for("cuda", 0) if not c.gpu_only])
        kind = rng.choice(["pass", "pass", "oob", "nan", "tol", "timeout", "crashed"])
        if kind == "pass":
            verdicts = {}
        elif kind in ("timeout", "crashed"):
            verdicts = dict.fromkeys(range(cases), kind)
        else:
            verdicts = {i: kind for i in rng.sample(range(cases), rng.randint(1, 3))}
        r = result(ex, verdicts, duration_s=round(rng.uniform(4, 30 if kind == "timeout" else 12), 1))
        path = Path(f"/class/{ex}/student{k:03d}.ipynb")
        stem = batch.stem_for(path)
        (out / f"{stem}.json").write_text(json.dumps(r, ensure_ascii=False), encoding="utf-8")
        rows.append({"file": str(path), "exercise": ex, "score": r["score"], "max_score": r["max_score"],
                     "passed": sum(t["status"] == "passed" for t in r["tests"]), "tests": len(r["tests"]),
                     "status": "ok" if not verdicts else "incomplete", "duration_s": r["duration_s"]})
    rows.append({"file": "/class/ex01_axpy/broken.ipynb", "exercise": "", "score": 0, "max_score": 0, "passed": 0,
                 "tests": 0, "status": "unusable: 不是合法的 JSON", "duration_s": 0})
    with open(out / "gradebook.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=batch.FIELDS)
        w.writeheader()
        w.writerows(rows)
    return out
