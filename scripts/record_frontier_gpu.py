"""Record the GPU measurements of chapters 8-10 on an H200: results/h200/ch08_*.json, ch09_*.json, ch10_*.json.

    python scripts/record_frontier_gpu.py              # every recording of tcourse.frontier_bench
    python scripts/record_frontier_gpu.py ch09_gluon_matmul ch10_dropout   # some of them

Each recording runs in its own child process with a time limit (a kernel that hangs, say a barrier
mistake in a Gluon kernel, costs that recording only) and is saved as soon as it is measured, with the
device/date/versions label the chapters print on CPU. A recording that raises or times out is saved as
{"error": ...} (the chapter then says what failed); entries inside a recording fail one by one.
Refuses under the interpreter or without CUDA.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LIMIT_S = {"ch09_gluon_attention": 90, "ch09_gluon_matmul": 120}  # hand-written barriers: a bug hangs
DEFAULT_LIMIT_S = 150


def record_one(name: str) -> int:
    """Child process: measure one recording and save it."""
    from tcourse import frontier_bench, recorded, runtime

    rt = runtime.setup(quiet=True)
    data = frontier_bench.guarded(frontier_bench.RECORDINGS[name])
    recorded.save(name, data, rt)
    if isinstance(data, dict) and "error" in data:
        print(f"  error: {data['error']}")
        return 1
    inner = json.dumps(data).count('"error"')  # entries that failed inside the recording
    if inner:
        print(f"  {inner} failed entries")
    return 0


def main(args: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("refusing: TRITON_INTERPRET=1 is set; recordings must come from compiled GPU runs")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("refusing: no CUDA GPU here")
        return 2
    if args[:1] == ["--one"]:
        return record_one(args[1])
    from tcourse import frontier_bench, recorded, runtime

    unknown = [n for n in args if n not in frontier_bench.RECORDINGS]
    if unknown:
        print(f"unknown recordings {unknown}; known: {list(frontier_bench.RECORDINGS)}")
        return 2
    rt = runtime.setup(quiet=True)
    failed = []
    t_all = time.time()
    for name in args or list(frontier_bench.RECORDINGS):
        t0 = time.time()
        limit = LIMIT_S.get(name, DEFAULT_LIMIT_S)
        try:
            rc = subprocess.run([sys.executable, __file__, "--one", name], timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
            recorded.save(name, {"error": f"timed out after {limit} s (killed: a hang, or slower than planned)"}, rt)
        if rc not in (0, 1, "timeout"):  # the child died before it could save (a crash outside Python)
            recorded.save(name, {"error": f"the measuring process exited with status {rc}"}, rt)
        if rc != 0:
            failed.append(name)
        print(f"{name}: {time.time() - t0:.0f} s, {'ok' if rc == 0 else f'FAILED ({rc})'}"
              f" -> results/{recorded.DEFAULT_DEVICE_DIR}/{name}.json", flush=True)
    print(f"total {time.time() - t_all:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
