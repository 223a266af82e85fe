"""Record the course on a GPU: execute chapters, store their outputs, write results/<device>/*.json.

    python scripts/record_gpu.py                        # every notebooks/*.ipynb, in place
    python scripts/record_gpu.py notebooks/02_*.ipynb   # some chapters
    python scripts/record_gpu.py --out DIR              # write executed notebooks to DIR instead

Refuses under the interpreter or without CUDA: recorded outputs must be real GPU runs. A chapter
that fails is not written back (its error is printed and the exit status is 1); the others are.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, help="folder for executed notebooks (default: overwrite in place)")
    ap.add_argument("--timeout", type=int, default=600, help="per-cell timeout in seconds")
    args = ap.parse_args()

    if os.environ.get("TRITON_INTERPRET") == "1":
        print("refusing: TRITON_INTERPRET=1 is set; recordings must come from compiled GPU runs")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("refusing: no CUDA GPU here; recordings must come from a GPU")
        return 2
    import nbclient
    import nbformat

    from tcourse import nbtools, runtime

    rt = runtime.setup(quiet=True)
    label = {"device": rt.gpu_info.name, "date": dt.date.today().isoformat(),
             "torch": rt.versions["torch"], "triton": rt.versions["triton"], "driver": rt.gpu_info.driver}
    os.environ.update(TCOURSE_RECORD="1", TCOURSE_DEVICE="cuda")  # inherited by each notebook's kernel
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    failed = []
    for p in paths:
        nb = nbformat.read(p, as_version=4)
        t0 = time.time()
        try:
            nbclient.NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(p.parent)}}).execute()
        except Exception as e:  # a failing chapter is reported, never written back with error outputs
            failed.append(p)
            print(f"FAILED {p.name} after {time.time() - t0:.0f} s: {type(e).__name__}: {str(e)[-2000:]}")
            continue
        nb.metadata.setdefault("tcourse", {})["recorded"] = label
        dest = (args.out / p.name) if args.out else p
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(nbtools.dumps(nbtools.normalize(nb, p.stem)), encoding="utf-8")
        print(f"recorded {p.name} in {time.time() - t0:.0f} s -> {dest}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
