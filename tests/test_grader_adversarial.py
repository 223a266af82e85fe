"""The grader against adversarial submissions, faults and isolation escapes (CPU).

All fixtures of ``tests/fixtures/adversarial/table.py`` are graded in ``grade --workers 2`` batches
(the ``runtime`` ones with the answer-cell policy switched off, so the run-time defences are tested
on their own); one table-driven test checks every verdict and prints the verdict table. Smaller
tests check the static audit and the limits directly.
"""
from __future__ import annotations

import csv
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from grader import batch, cli, execute, grade, policy, registry, sandbox

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "adversarial"))
from table import FIXTURES  # noqa: E402

KERNEL_CELL = "ex01-kernel"
CELL_TIMEOUT = 20  # the setup cell imports torch and triton: seconds on a busy 2-core machine


def _nb(folder: str, ex: str) -> dict:
    return json.loads((REPO / folder / f"{ex}.ipynb").read_text(encoding="utf-8"))


def _src(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def build(name: str, spec: dict, folder: Path) -> Path:
    path = folder / f"{name}.ipynb"
    if "raw" in spec:
        path.write_bytes(spec["raw"])
        return path
    if "other" in spec:
        path.write_bytes((REPO / "solutions" / f"{spec['other']}.ipynb").read_bytes())
        return path
    if "base" in spec:  # another exercise's solution: each edit applies to the code cell that holds its text
        nb = _nb("solutions", spec["base"])
        for old, new in spec["edit"]:
            cell = next((c for c in nb["cells"] if c["cell_type"] == "code" and old in _src(c)), None)
            assert cell, f"{name}: edit does not apply: {old!r}"
            cell["source"] = _src(cell).replace(old, new, 1)
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
        return path
    nb = _nb("solutions", "ex01_axpy")
    cell = next(c for c in nb["cells"] if c["id"] == KERNEL_CELL)
    src = _src(cell)
    for old, new in spec.get("edit", []):
        assert old in src, f"{name}: edit does not apply: {old!r}"
        src = src.replace(old, new.replace("{REPO}", str(REPO)), 1)
    cell["source"] = src
    if spec.get("tags"):
        for c in nb["cells"]:
            c.setdefault("metadata", {})["tags"] = ["skip-execution", "raises-exception"]
            c["metadata"]["execution"] = {"iopub.status.busy": "x"}
            c["metadata"]["tcourse"] = {"role": "demo"}
    if spec.get("duplicate"):
        good = json.loads(json.dumps(cell))
        good["source"] = _src(next(c for c in _nb("solutions", "ex01_axpy")["cells"] if c["id"] == KERNEL_CELL))
        nb["cells"].insert(nb["cells"].index(cell) + 1, good)
    if spec.get("reverse"):
        nb["cells"].reverse()
    if spec.get("retype"):
        cell["cell_type"] = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    if spec.get("delete"):
        nb["cells"].remove(cell)
    if spec.get("kernelspec"):
        nb["metadata"]["kernelspec"] = {"name": "evil", "display_name": "evil", "language": "bash"}
    if spec.get("no_code"):
        nb["cells"] = [c for c in nb["cells"] if c["cell_type"] != "code"]
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return path


def _sleepers() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [])[-2:] == ["sleep", "1234.5"]:
            found.append(p)
    return found


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def verdict_problem(name: str, spec: dict, row: dict, result: dict | None) -> str:
    """'' when the verdict is the expected one, else what is wrong."""
    expect = spec.get("expect")
    if expect == "unusable":
        return "" if row["status"].startswith("unusable") else f"expected unusable, got {row['status']}"
    if result is None:
        return f"no result: {row['status']}"
    tests = [t for t in result["tests"] if t["status"] != "skipped"]
    if expect == "full":
        bad = [(t["name"], t["status"], t["message"][:120]) for t in tests if t["status"] != "passed"]
        return f"expected full marks: {bad}" if bad or result["score"] != result["max_score"] else ""
    statuses = {t["status"] for t in tests}
    if not statuses <= spec["statuses"]:
        odd = [(t["name"], t["status"], t["message"][:200]) for t in tests if t["status"] not in spec["statuses"]]
        return f"statuses {statuses} not within {spec['statuses']}: {odd[:3]}"
    if "passed" in spec and sum(t["status"] == "passed" for t in tests) != spec["passed"]:
        return f"expected {spec['passed']} passed tests: {[(t['name'], t['status']) for t in tests]}"
    if "most_passed" in spec and sum(t["status"] == "passed" for t in tests) > spec["most_passed"]:
        return f"expected at most {spec['most_passed']} passed tests: {[(t['name'], t['status']) for t in tests]}"
    if "passes_only" in spec and any(t["status"] == "passed" and not spec["passes_only"](t["name"]) for t in tests):
        return f"passed where it is wrong: {[(t['name'], t['status']) for t in tests]}"
    if spec.get("zero") and result["score"] != 0:
        return f"score {result['score']} != 0"
    if result["score"] >= result["max_score"]:
        return "a cheating/wrong submission got full marks"
    msgs = [t["message"] for t in tests if t["status"] != "passed"]
    if not any(all(w in m for w in spec["words"]) for m in msgs):
        return f"no message contains {spec['words']}: {[m[:140] for m in msgs][:3]}"
    return ""


FLOODS = {spec["flood"]: name for name, spec in FIXTURES.items() if "flood" in spec}


def test_adversarial_batch(tmp_path, capsys, monkeypatch):
    subs, out = tmp_path / "subs", tmp_path / "out"
    worker_peaks = []  # (is the output flood, worker's peak RSS MiB) per execution

    def run(nb, *args, **kwargs):
        ex = real_run(nb, *args, **kwargs)
        flood = next((name for line, name in FLOODS.items() if any(line in c.source for c in nb.cells)), None)
        worker_peaks.append((flood, ex.worker_peak_rss_mb))
        return ex

    real_run = execute.run
    monkeypatch.setattr(execute, "run", run)
    subs.mkdir()
    (subs / "runtime").mkdir()
    paths = {name: build(name, spec, subs / "runtime" if spec.get("runtime") else subs) for name, spec in FIXTURES.items()}
    flags = [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]
    before = {p.pid for p in _sleepers()}
    peak, stop = [0.0], threading.Event()

    def watch():  # the grader's own resident memory while the batch (output flood included) runs
        while not stop.wait(0.1):
            peak[0] = max(peak[0], _rss_mb())

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t0 = time.monotonic()
    try:
        for folder, policy_on in ((subs, True), (subs / "runtime", False)):
            if not policy_on:  # the run-time defences alone: every answer cell runs as written
                monkeypatch.setattr(grade.policy, "audit", lambda cells, *names: policy.Audit(sources=dict(cells)))
            assert cli.main(["grade", str(folder), "--out", str(out if policy_on else out / "runtime"), "--device", "cpu",
                             "--workers", "2", "--timeout", str(CELL_TIMEOUT), "--force"] + flags) == 0
    finally:
        stop.set()
        t.join()
    wall = time.monotonic() - t0
    leaked = [p for p in _sleepers() if p.pid not in before]
    for p in leaked:
        p.kill()
    rows = {Path(r["file"]).stem: r for book in (out / "gradebook.csv", out / "runtime" / "gradebook.csv")
            for r in csv.DictReader(open(book, encoding="utf-8"))}
    table, problems = [], {}
    for name, spec in FIXTURES.items():
        row = rows[name]
        jf = (out / "runtime" if spec.get("runtime") else out) / f"{batch.stem_for(paths[name])}.json"
        result = json.loads(jf.read_text(encoding="utf-8")) if jf.exists() else None
        if spec.get("needs_bwrap") and not sandbox.bwrap() or spec.get("needs_isolation") and not sandbox.choose().isolated:
            table.append(f"{name:<28} (skipped: needs {'bubblewrap' if spec.get('needs_bwrap') else 'process isolation'})")
            continue
        why = verdict_problem(name, spec, row, result)
        if why:
            problems[name] = why
        counts = {}
        for t in (result or {}).get("tests", []):
            if t["status"] != "skipped":
                counts[t["status"]] = counts.get(t["status"], 0) + 1
        first = next((t["message"] for t in (result or {}).get("tests", []) if t["status"] not in ("passed", "skipped")), "")
        shown = row["status"] if row["status"].startswith("unusable") else f"{row['score']}/{row['max_score']}"
        table.append(f"{name:<28} {shown:<10} {counts}  {first[:70]}")
    with capsys.disabled():
        flood_mb = [f"{flood} {mb:.0f}" for flood, mb in worker_peaks if flood]
        print(f"\nadversarial batch: {len(FIXTURES)} submissions in {wall:.0f} s, grader peak RSS {peak[0]:.0f} MiB, "
              f"worker peak RSS (MiB) during the floods: {', '.join(flood_mb)}; "
              f"sandbox: {sandbox.choose().describe()}")
        print("\n".join(table))
    assert not leaked, f"processes outlived their submission: {[p.pid for p in leaked]}"
    assert not problems, problems
    flood = json.loads((out / f"{batch.stem_for(paths['output-flood'])}.json").read_text(encoding="utf-8"))
    assert flood["score"] == flood["max_score"]
    assert peak[0] < 1500, f"grader held {peak[0]:.0f} MiB during the batch"
    others = [mb for flood, mb in worker_peaks if not flood and mb > 0]
    for flood, mb in worker_peaks:
        assert not flood or (others and mb < min(others) + 64), \
            f"the worker held {mb:.0f} MiB during {flood}, {min(others):.0f} MiB for other submissions"
    assert {flood for flood, _ in worker_peaks if flood} == set(FLOODS.values())


@pytest.mark.parametrize("src, ok", [
    ("def f(x):\n    return x + 1\n", True),
    ("import torch\nt = torch.zeros(3, device=x.device)\nt[0] = 1\n", True),
    ("%time x = 1\n", True),
    ("N = 0\ndef f():\n    global N\n    N += 1\n", True),
    ("if __name__ == '__main__':\n    print(triton.__version__)\n", True),
    # hostile round 13: what tells the CPU from a GPU says where to allocate, or is printed; it does not branch
    ("out = torch.empty(3, device=x.device)\n", True),
    ("s = torch.empty(3, device='cuda' if torch.cuda.is_available() else 'cpu')\n", True),
    ("print(f'{x.device} {x.is_cuda}')\n", True),
    ("def f(x, out):\n    if x.is_cuda:\n        return out\n", False),
    ("G = 528 if x.is_cuda else 4\n", False),
    ("d = x.device\n", False),
    ("ok = str(x.device) == 'cpu'\n", False),
    ("n = 1 if rt.gpu else 2\n", False),
    ("v = triton.__version__ >= '3.7'\n", False),
    ("t = torch.empty(3, device=x.device if launch() else x.device)\n", False),
    ("print(x.is_cuda or out.fill_(1))\n", False),
    ("def print(flag):\n    pass\n", False),
    ("def keep(configs, named_args, **kw):\n    return configs if named_args['x_ptr'].is_cuda else configs[:1]\n", False),
    # hostile round 14: the device told apart without naming it
    ("gpu = x.type().startswith('torch.cuda')\n", False),
    ("aligned = x.data_ptr() % 256 == 0\n", False),
    ("try:\n    torch.cuda.synchronize()\nexcept Exception:\n    pass\n", False),
    ("s = f'{x}'\n", False),
    ("ok = 'cuda' in str(x)\n", False),
    ("assert n > 0, f'n = {n}'\n", True),
    ("def f(size, alignment, stream):\n    return torch.empty(1, dtype=torch.int8, device='cpu')\n\n\ntriton.set_allocator(f)\n", False),
    ("def f(size, alignment, stream):\n    return torch.empty(size, dtype=torch.int8, device=rt.device)\n\n\ntriton.set_allocator(f)\n", True),
    ("def f(size, alignment, stream):\n    return torch.empty(size, dtype=torch.int8, device='cpu')\n\n\ntriton.set_allocator(f)\n", False),
    # hostile round 15: the device reached through identity, a print's file=, where a tensor is put
    ("if x.to('cpu') is not x:\n    pass\n", False),
    ("if x.to(torch.float32) is x:\n    pass\n", False),
    ("y = x.to(out)\n", False),
    ("y = x.to(torch.float32)\nz = x.to(out.dtype)\n", True),
    ("print(x.is_cuda, file=log)\n", False),
    ("print(x.shape, end='')\n", True),
    ("t = torch.zeros(1, dtype=torch.int32, device='cpu')\n", False),
    ("t = torch.zeros(1, device='cpu' if x.is_cuda else x.device)\n", False),
    ("t = torch.zeros(1, dtype=torch.int32)\n", False),
    ("t = torch.empty_like(x)\nu = x.new_zeros(3)\nv = torch.empty(3, device=rt.device)\n", True),
    # hostile round 16: a device= of the learner's own object, torch.Tensor(), a device read beside a choice
    ("class Host:\n    device = 'cpu'\nt = torch.zeros(1, device=Host.device)\n", False),
    ("class Host:\n    def __init__(self):\n        self.device = 'cpu'\n", False),
    ("t = torch.Tensor(1)\n", False),
    ("print(x.is_cuda or trace.note)\n", False),
    ("print([t.note for _ in (1,) if x.is_cuda])\n", False),
    ("print(x.is_cuda, x.device, x.shape)\n", True),
    ("class Cfg:\n    BLOCK = 128\ncfg = Cfg()\ncfg.BLOCK = 256\n", True),
    ("import os\nos._exit(1)\n", False),
    ("torch.allclose = f\n", False),
    ("x.__class__\n", False),
    ("torch._C\n", False),
    ("getattr(torch, 'allclose')\n", False),
    ("from grader import harness\n", False),
    ("import gc\n", False),
    ("import sys\nsys.settrace(None)\n", False),
    ("del torch.equal\n", False),
    ("class T:\n    def __eq__(self, o):\n        return True\n", False),
    ("import operator\noperator.attrgetter('ops')(torch)\n", False),
    ("import pkgutil\npkgutil.resolve_name('grader.harness')\n", False),
    ("import functools\nfunctools.reduce(getattr, ['ops'], torch)\n", False),
    ("vars(torch)['allclose']\n", False),
    ("'{0.modules}'.format(sys)\n", False),
    ("s = '{0.__globals__}'\ns.format(f)\n", False),
    ("t = torch\nt.ops.aten\n", False),
    ("torch.special.softmax(x, 0)\n", False),
    ("x.softmax(0)\n", False),
    ("y = x.numpy()\n", False),
    ("@triton.jit\ndef k(x):\n    import os\n", False),
    ("@triton.jit\ndef k(x):\n    getattr(tl, 'core')\n", False),
    ("@triton.jit\ndef k(x):\n    tl.core._aggregate\n", False),
    ("@triton.jit\ndef k(x):\n    triton.runtime\n", False),
    # own attribute names that mean something elsewhere, and stores on objects that are not the learner's (2026-12-07)
    ("class C:\n    gi_frame = 0\n    f_builtins = 0\ng = (i for i in range(1))\ng.gi_frame.f_builtins\n", False),
    ("class C:\n    format = 0\n'{0.x}'.format(1)\n", False),
    ("T = torch.Tensor\nT.detach = f\n", False),
    ("@triton.jit\ndef k(x):\n    pass\nk.run = k.run\n", False),
    ("class Cfg:\n    BLOCK = 128\ncfg = Cfg()\ncfg = torch.Tensor\ncfg.detach = f\n", False),
    ("class Cfg:\n    def __init__(self, b):\n        self.block = b\ncfg = Cfg(4)\ncfg.block = 8\nCfg.block = 2\n", True),
    ("def patch(self):\n    self.detach = None\npatch(torch.Tensor)\n", False),
    ("class C:\n    def m(self):\n        self.detach = None\nC.m(torch.Tensor)\n", False),
    # a kernel reaching Python through the interpreter (found 2026-12-07: numpy and ctypes wrote out, 16/16)
    ("@triton.jit\ndef k(x, one):\n    if isinstance(one, tl.tensor):\n        pass\n", False),
    ("@triton.jit\ndef k(x):\n    g = (i for i in range(1))\n", False),
    ("@triton.jit\ndef k(x):\n    v = [i for i in range(4)]\n", False),
    ("@triton.jit\ndef k(x):\n    x.handle.data\n", False),
    ("@triton.jit\ndef k(x, d):\n    d['__import__']\n", False),
    ("@triton.jit\ndef k(x, d):\n    d.f_builtins\n", False),
    ("@triton.jit\ndef k(x, y, B: tl.constexpr):\n    v = tl.load(x + tl.arange(0, B)).to(y.dtype.element_ty)\n"
     "    tl.store(y + tl.arange(0, B), v.T.reshape((B,)))\n", True),
    # built-in names bound by the learner, functions compared in kernels, the main guard, IPython's rewriting, nesting
    # (found 2026-12-07: compile() ran in the replay through a branch only the interpreter takes)
    ("def helper(compile, type):\n    pass\n", False),
    ("def helper(isinstance):\n    pass\n@triton.jit\ndef k(x):\n    isinstance(x, 1)\n", False),
    ("@triton.jit\ndef k(x, sum):\n    pass\n", False),
    ("@triton.jit\ndef k(x):\n    sum = tl.sum(tl.load(x + tl.arange(0, 4)), axis=0)\n    tl.store(x, sum)\n", True),
    ("@triton.jit\ndef k(x):\n    if tl.range is tl.static_range:\n        pass\n", False),
    ("@triton.jit\ndef k(x):\n    if tl.static_print == print:\n        pass\n", False),
    ("@triton.jit\ndef k(x):\n    f = x.to\n", False),
    ("@triton.jit\ndef k(x, y):\n    if y is not None:\n        tl.store(x, 1)\n", True),
    ("@triton.jit\ndef k(x, B: tl.constexpr):\n    for i in tl.static_range(B):\n        tl.store(x + i, i)\n", True),
    ("if __name__ != '__main__':\n    pass\n", False),
    ("def f():\n    return __name__\n", False),
    ("x = " + "-" * 3000 + "1\n", False),
    ('s = """x\n>>> y"""\n', False),
    ("\n\nx = 1\n", True),
    ("@triton.jit\ndef k(x):\n    B: tl.constexpr = 4\n    tl.store(x + tl.arange(0, B), 1.0)\n", True),
    # objects Triton's language modules hold that are not Triton (found 2026-12-07: tl.extra.modules is sys.modules,
    # tl.extra.spec.loader writes files; numpy.load of a pickle ran Python at the sm_90 compile check, 17/17 on ex01)
    ("x = tl.extra.modules.get('numpy')\n", False),
    ("tl.extra.spec.loader.set_data('p', b'')\n", False),
    ("w = tl.math.wraps\n", False),
    ("@triton.jit\ndef k(x):\n    tl.extra.modules.get('numpy').load('q')\n", False),
    ("@triton.jit\ndef k(x):\n    tl.argmax.fn\n", False),
    ("@triton.jit\ndef k(x):\n    s = 'a|b'.split('|')\n", False),
    ("class C:\n    def __init__(self):\n        self.exec = 0\nc = C()\nc.exec\n", False),
    ("@triton.jit\ndef k(x, y):\n    tl.store(y, tl.maximum(tl.load(x), 0.0, propagate_nan=tl.PropagateNan.ALL))\n", True),
    ("@triton.jit\ndef k(x):\n    tl.store(x, tl.extra.cuda.libdevice.pow(tl.load(x), 2.0) + tl.float16.primitive_bitwidth)\n", True),
    # a branch only the interpreter takes (found 2026-12-07, 17/17 on ex01 and 15/15 on dr08 with numpy doing the work):
    # an annotation that contains "constexpr" is a constant to the compiler, not to the interpreter; .type of an int
    # argument equal to 1 (a constant on a GPU launch); the interpreter's own globals (np, TensorHandle) in a kernel
    ('@triton.jit\ndef k(x, M: "my_constexpr" = 1):\n    pass\n', False),
    ("@triton.jit\ndef k(x, M: tl.constexpr_type = 1):\n    pass\n", False),
    ("@triton.jit\ndef k(x, n: int):\n    pass\n", False),
    ('@triton.jit\ndef k(x, M: "tl.constexpr", N: triton.language.constexpr):\n    pass\n', True),
    ("@triton.jit\ndef k(x, n):\n    if n.type == tl.int32:\n        tl.store(x, 1.0)\n", False),
    ("@triton.jit\ndef k(x):\n    y = np.load('c00_x.npy')\n", False),
    ("@triton.jit\ndef k(x):\n    h = TensorHandle\n", False),
    ("T = tl.constexpr(4)\n@triton.jit\ndef k(x):\n    tl.store(x + tl.arange(0, T), 1.0)\n", True),
    ("@triton.jit\ndef k(x, np):\n    tl.store(x, np)\n", True),
])
def test_policy(src, ok):
    a = policy.audit({"c": src})
    assert (a.refused == []) == ok, a.refused
    assert all("；" in r or "不是合法" in r or "IPython" in r for r in a.refused)  # each refusal says what to write


def test_a_main_guard_is_not_run_in_grading():
    a = policy.audit({"c": "x = 1\nif __name__ == '__main__':\n    print(x)\n    y = 2\nz = 3\n"})
    assert a.refused == [] and a.sources["c"] == "x = 1\npass\n\n\nz = 3"  # the lines after it keep their numbers
    assert any("第 2 行" in n and "不运行" in n for n in a.notes)


def test_the_replays_kernels_see_only_the_kernel_builtins(tmp_path):
    """Defence in depth behind the policy: the module the replay imports gives its kernels no other built-in, in the
    interpreter too (which defines each kernel again in that module's namespace)."""
    import os
    import subprocess

    from grader import kernel_source

    module, names = kernel_source.extract([
        "@triton.jit\ndef k(x_ptr, B: tl.constexpr):\n    o = tl.arange(0, B)\n"
        "    tl.store(x_ptr + o, tl.load(x_ptr + o) + abs(-1))\n"])
    (tmp_path / "kernels.py").write_text(module, encoding="utf-8")
    (tmp_path / "kernel_names.json").write_text(json.dumps(names), encoding="utf-8")
    script = ("import torch\nfrom pathlib import Path\nfrom grader import replay\n"
              f"k = replay.load_kernels(Path({str(tmp_path / 'kernels.py')!r}))['k']\n"
              "try:\n    k[(1,)](torch.zeros(4), B=4)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
              "print(sorted(k.fn.__builtins__))\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO,
                       env={**os.environ, "TRITON_INTERPRET": "1"})
    assert "name 'abs' is not defined" in r.stdout, r.stdout + r.stderr
    assert "['float', 'int', 'len', 'max', 'min', 'print', 'range']" in r.stdout, r.stdout


AUDIT_ALL = """
import json, sys
import triton.language as tl  # decorated now: the interpreter's wrappers only where TRITON_INTERPRET=1 already
from grader import policy, rebuild, registry, source
refused = []
for ex_id, ex in registry.exercises().items():
    if ex.written:
        continue
    ids = {c.id for c in source.parse(source.SRC_DIR / f"{ex_id}.py") if c.role == "solution"}
    for folder in ("solutions", "exercises"):
        nb = json.loads(open(f"{folder}/{ex_id}.ipynb", encoding="utf-8").read())
        cells = {c["id"]: "".join(c["source"]) for c in nb["cells"] if c.get("id") in ids}
        refused += [(folder, ex_id, r[:120]) for r in policy.audit(cells, rebuild.template_names(ex_id)).refused]
print(type(tl.max).__name__, refused)
"""


@pytest.mark.parametrize("interpret", ["1", "0"])
def test_every_solution_passes_the_audit(interpret):
    """With the interpreter on (the grader on a CPU: tl.max is the interpreter's wrapper there) and off (a GPU)."""
    import os
    import subprocess

    env = {**os.environ, "TRITON_INTERPRET": interpret}
    r = subprocess.run([sys.executable, "-c", AUDIT_ALL], capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    kind, refused = r.stdout.strip().split(" ", 1)
    assert kind == ("InterpretedFunction" if interpret == "1" else "JITFunction") and refused == "[]", r.stdout


def test_memory_watchdog_kills_a_growing_kernel(tmp_path, monkeypatch):
    """Resident memory past the worker's limit is a crash with a memory message, not a stuck machine."""
    from grader import execute

    monkeypatch.setattr(execute, "MEM_LIMIT_MB", 1500)
    nb = _nb("solutions", "ex01_axpy")
    cell = next(c for c in nb["cells"] if c["id"] == KERNEL_CELL)
    cell["source"] = "HOLD = []\nfor _ in range(40):\n    HOLD.append(torch.ones(2**27, device=rt.device))\n" + _src(cell)
    path = tmp_path / "grow.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    r = grade.grade(path, "cpu", cell_timeout=60, seed=1)
    statuses = {t.status for t in r.tests if t.status != "skipped"}
    assert statuses == {"crashed"} and r.score == 0
    assert any("内存超限" in t.message or "崩溃" in t.message for t in r.tests)


@pytest.mark.skipif(sandbox.bwrap() is None, reason="no bubblewrap here")
def test_a_throwaway_user_without_a_passwd_entry_has_a_user_name(tmp_path):
    """torch asks getpass.getuser() for its cache paths; a throwaway uid (the uid mode) has no password entry, which
    raised KeyError in every case on an H100 node (2026-12-07). The kernel's environment names the user."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unknown uid")
    env = sandbox.base_env(tmp_path, tmp_path / "home", "cpu")
    import shutil

    python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")  # one the unknown uid may run (getpass: stdlib)
    r = subprocess.run([python, "-c", "import getpass; print(getpass.getuser())"], env=env, capture_output=True,
                       text=True, timeout=60, preexec_fn=lambda: (os.setgid(50214684), os.setuid(50214684)))
    assert r.returncode == 0 and r.stdout.strip() == "learner", r.stderr


def test_sandbox_writes_only_into_its_binds(tmp_path):
    """bwrap's new root and the folders it makes there for the binds are a tmpfs: a kernel wrote 3 GiB of RAM there
    that no watchdog saw (2026-12-07). Read-only now; the bound work folder stays writable."""
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    argv = sandbox._bwrap_argv(tmp_path, "cpu", [("--bind", work)], work)
    targets = [tmp_path / "x", tmp_path.parent / "x", "/x", "/tmp/x", "/home/x", work / "ok"]
    code = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'w').write('1')\n        print('WROTE', p)\n"
            "    except OSError:\n        print('REFUSED', p)\n")
    r = subprocess.run(argv + [sys.executable, "-c", code, *map(str, targets)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1000:]
    assert r.stdout.split() == [w for t in targets for w in ("WROTE" if t == work / "ok" else "REFUSED", str(t))], r.stdout


def test_sandbox_keeps_a_venv_inside_the_repository_but_not_the_repository(monkeypatch):
    """./course.sh puts .venv inside the repo: the kernel needs it, and must still not see the repo."""
    import os
    import sys

    from grader import sandbox

    venv = os.path.realpath(sandbox.REPO / ".venv")
    monkeypatch.setattr(sys, "prefix", venv)
    monkeypatch.setattr(sys, "exec_prefix", venv)
    monkeypatch.setattr(sys, "path", [str(sandbox.REPO), str(sandbox.REPO / "grader")])
    dirs = sandbox._python_dirs()
    assert venv in dirs
    assert not any(d == str(sandbox.REPO) or d.startswith(str(sandbox.REPO / "grader")) for d in dirs)
