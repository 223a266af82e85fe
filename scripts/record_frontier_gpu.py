"""Record the GPU measurements of chapters 8-10 on an H200: results/h200/ch08_*.json, ch09_*.json, ch10_*.json.

    python scripts/record_frontier_gpu.py              # every recording of tcourse.frontier_bench
    python scripts/record_frontier_gpu.py ch09_gluon_matmul ch10_dropout   # some of them

Each recording is saved as soon as it is measured, with the device/date/versions label the chapters
print on CPU. A recording that raises is saved as {"error": ...} (the chapter then says what failed);
entries inside a recording fail one by one. Refuses under the interpreter or without CUDA.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(names: list[str]) -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("refusing: TRITON_INTERPRET=1 is set; recordings must come from compiled GPU runs")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("refusing: no CUDA GPU here")
        return 2
    from tcourse import frontier_bench, recorded, runtime

    rt = runtime.setup(quiet=True)
    unknown = [n for n in names if n not in frontier_bench.RECORDINGS]
    if unknown:
        print(f"unknown recordings {unknown}; known: {list(frontier_bench.RECORDINGS)}")
        return 2
    failed = []
    t_all = time.time()
    for name in names or list(frontier_bench.RECORDINGS):
        t0 = time.time()
        data = frontier_bench.guarded(frontier_bench.RECORDINGS[name])
        path = recorded.save(name, data, rt)
        took = time.time() - t0
        if isinstance(data, dict) and "error" in data:
            failed.append(name)
            print(f"FAILED {name} ({took:.0f} s): {data['error']}")
        else:
            inner = json.dumps(data).count('"error"')  # entries that failed inside a recording
            print(f"{name}: {took:.0f} s -> {path.relative_to(recorded.RESULTS.parent)}"
                  + (f" ({inner} failed entries)" if inner else ""))
        sys.stdout.flush()
    print(f"total {time.time() - t_all:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
