"""Profiler recordings chapter 5 shows: Proton and Nsight Compute on the course's own kernels (GPU only).

    python scripts/record_extras_gpu.py          # both; writes results/h200/ch05_proton.json, ch05_ncu_matmul.json
    python scripts/record_extras_gpu.py proton   # only Proton
    python scripts/record_extras_gpu.py ncu      # only Nsight Compute (needs `ncu` on PATH or in /usr/local/cuda/bin)

The kernels are the chapters' own cells (chapter 4's matmul, chapter 5's column sum), written into a
temporary module so that @triton.jit finds their source in a file. Takes about a minute on an H200.
"""
from __future__ import annotations

import csv
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL_CELLS = {"matmul": ("04_matmul_tiles.ipynb", "b1e7475c"), "col_sum": ("05_autotune_debug_profile.ipynb", "cae890db")}
MATMUL_CFG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4)
NCU_METRICS = ("Duration", "Memory Throughput", "DRAM Throughput", "Compute (SM) Throughput", "Registers Per Thread",
               "Achieved Occupancy", "Theoretical Occupancy", "Block Limit Registers", "Block Limit Shared Mem",
               "Dynamic Shared Memory Per Block", "Waves Per SM", "SM Frequency")


def chapter_kernels(tmp: Path):
    """Import the chapters' kernel cells as one module (jit needs a source file)."""
    src = ["import torch, triton, triton.language as tl", ""]
    for nb_name, cell_id in KERNEL_CELLS.values():
        nb = json.loads((ROOT / "notebooks" / nb_name).read_text(encoding="utf-8"))
        src.append("".join(next(c["source"] for c in nb["cells"] if c.get("id") == cell_id)))
    path = tmp / "chapter_kernels.py"
    path.write_text("\n\n".join(src) + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("chapter_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def matmul_inputs(size=4096):
    import torch

    torch.manual_seed(0)
    return [torch.randn(size, size, device="cuda", dtype=torch.float16) for _ in range(2)]


def hatchet_rows(node, path=()) -> list[dict]:
    """Flatten Proton's hatchet tree: one row per frame with its numeric metrics."""
    name = node.get("frame", {}).get("name", "?")
    here = path + (name,)
    metrics = {k: v for k, v in node.get("metrics", {}).items() if isinstance(v, (int, float))}
    rows = [{"path": " / ".join(here), "name": name, "metrics": metrics}] if metrics else []
    for child in node.get("children", []):
        rows += hatchet_rows(child, here)
    return rows


def record_proton(rt, tmp: Path) -> dict:
    import torch
    import triton.profiler as proton

    k = chapter_kernels(tmp)
    a, b = matmul_inputs()
    x = torch.randn(4096, 1000, device="cuda")
    k.matmul(a, b, **MATMUL_CFG); k.col_sum(x, 64, 128); torch.matmul(a, b); torch.cuda.synchronize()  # compile first
    base = tmp / "ch05_proton"
    proton.start(str(base), hook="triton")
    with proton.scope("matmul 4096^3 fp16 (chapter 4 kernel, 128x128x64)"):
        for _ in range(10):
            k.matmul(a, b, **MATMUL_CFG)
    with proton.scope("torch.matmul 4096^3 fp16 (cuBLAS)"):
        for _ in range(10):
            torch.matmul(a, b)
    with proton.scope("col_sum 4096x1000 (chapter 5 kernel)"):
        for _ in range(10):
            k.col_sum(x, 64, 128)
    torch.cuda.synchronize()
    proton.finalize()
    tree = json.loads(Path(str(base) + ".hatchet").read_text())
    roots = tree if isinstance(tree, list) else [tree]
    return {"calls_per_scope": 10, "rows": [r for root in roots for r in hatchet_rows(root)],
            "how": "proton.start(path, hook='triton'); proton.scope(...) around 10 calls each; proton.finalize()"}


def ncu_target() -> None:
    """What ncu runs: chapter 4's matmul at 4096^3 fp16, three launches (the third is profiled)."""
    import torch

    with tempfile.TemporaryDirectory() as d:
        k = chapter_kernels(Path(d))
        a, b = matmul_inputs()
        for _ in range(3):
            k.matmul(a, b, **MATMUL_CFG)
        torch.cuda.synchronize()


def find_ncu() -> str | None:
    return shutil.which("ncu") or next((str(p) for p in Path("/usr/local").glob("cuda*/bin/ncu")), None)


def record_ncu(rt, tmp: Path) -> dict:
    ncu = find_ncu()
    if ncu is None:
        raise RuntimeError("ncu not found (PATH, /usr/local/cuda*/bin)")
    cmd = [ncu, "--clock-control", "none", "-k", "regex:matmul_kernel", "--launch-skip", "2", "--launch-count", "1",
           "--section", "SpeedOfLight", "--section", "Occupancy", "--section", "LaunchStats", "--csv", "--page", "details",
           sys.executable, str(Path(__file__).resolve()), "--ncu-target"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "TCOURSE_DEVICE": "cuda"})
    lines = [l for l in run.stdout.splitlines() if l.startswith('"')]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"ncu failed ({run.returncode}): {run.stderr[-1500:]} {run.stdout[-1500:]}")
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    metrics = [{"section": r.get("Section Name"), "name": r.get("Metric Name"), "unit": r.get("Metric Unit"),
                "value": r.get("Metric Value")} for r in rows]
    rep = compile_time_report(chapter_kernels(tmp))
    return {"kernel": rows[0].get("Kernel Name"), "config": MATMUL_CFG, "shape": "4096^3 fp16",
            "command": " ".join(cmd[:-3]) + " python3 <chapter-4 matmul, 3 launches>",
            "selected": [m for m in metrics if m["name"] in NCU_METRICS], "all": metrics,
            "compile_for_sm90": {"registers": rep.registers, "spills": rep.spills, "shared_bytes": rep.shared_bytes}}


def compile_time_report(k):
    """What chapter 4 reads offline for the same config: a real sm_90 compile, unit strides as constants."""
    from tcourse.compile_info import compile_many

    cfg = dict(MATMUL_CFG)
    kw = dict(num_warps=cfg.pop("num_warps"), num_stages=cfg.pop("num_stages"), stride_ak=1, stride_bn=1, stride_cn=1, **cfg)
    return compile_many(k.matmul_kernel, [(("*fp16", "*fp16", "*fp16", 4096, 4096, 4096, 4096, 4096, 4096), kw)])[0]


def main(argv: list[str]) -> int:
    if argv == ["--ncu-target"]:
        ncu_target()
        return 0
    import tcourse
    from tcourse import recorded

    rt = tcourse.setup(quiet=True)
    if not rt.gpu:
        print("refusing: profiler recordings need a GPU (the interpreter has no kernels to profile)")
        return 2
    os.environ["TCOURSE_RECORD"] = "1"
    jobs = {"proton": ("ch05_proton", record_proton), "ncu": ("ch05_ncu_matmul", record_ncu)}
    status = 0
    for key in argv or list(jobs):
        name, fn = jobs[key]
        with tempfile.TemporaryDirectory() as d:
            try:
                print("wrote", recorded.save(name, fn(rt, Path(d)), rt))
            except Exception as e:  # one profiler failing must not lose the other's recording
                print(f"FAILED {key}: {type(e).__name__}: {e}")
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
