"""The grader's rigor (issue 13): work done outside Triton, untested sizes, out-of-bounds reads, program
order and data races, caching, exercise identity, correct code that must not be refused, unusable inputs, the replay's
own input, process isolation, and a mutation test over the solutions.

Verdict-critical submissions are graded in one ``grade --workers 2`` batch; the most critical ones
appear three times (each copy gets its own secret seed: a flaky verdict fails the test).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import batch, cli, grade, policy, registry, safeio, sandbox, source
from grader.replay import BadLog, Replayer
from test_grader import REPO, make_variant

sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures"))
from coverage_mutants import MUTANTS as COVERAGE_MUTANTS  # noqa: E402

AXPY_LAUNCH = "    axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)\n"
AXPY_STORE = "    tl.store(out_ptr + offs, a * x + y, mask=mask)"
COPY_KERNEL = [(AXPY_STORE, "    tl.store(out_ptr + offs, y, mask=mask)")]

# name: (exercise, replacements, words some failed test's message must all contain, or a tuple of such lists of which
# one must match; "full" = full marks)
CASES = {
    # work done outside Triton: the replay on fresh inputs runs the launches alone
    "copy-kernel-around-host-result": ("ex01_axpy", COPY_KERNEL + [(AXPY_LAUNCH,
        "    t = x.clone()\n    t *= a\n    t += y\n    axpy_kernel[grid](x, t, out, a, n, BLOCK_SIZE=BLOCK_SIZE)\n")],
        (["重放", "新输入"], ["值变了"])),  # when the repeated case is tiny, its host result is a small buffer that changed
    "negate-kernel-around-host-result": ("ex01_axpy", [(AXPY_STORE, "    tl.store(out_ptr + offs, -y, mask=mask)"),
        (AXPY_LAUNCH, "    t = x.clone()\n    t *= -a\n    t -= y\n    axpy_kernel[grid](x, t, out, a, n, BLOCK_SIZE=BLOCK_SIZE)\n")],
        (["重放", "新输入"], ["值变了"])),
    # a torch copy of an input handed to the kernel: the strided cases fail, and the message names the copy
    "wrapper-makes-b-contiguous": ("ex03_matmul", [("    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n",
        "    b = b.contiguous()\n    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n")],
        ["输入 b 拷贝成一个新张量", "stride"]),
    "host-fixes-the-tail": ("ex01_axpy", [("    mask = offs < n", "    mask = offs < (n // 8) * 8"),
        (AXPY_LAUNCH, AXPY_LAUNCH + "    t = x.clone()\n    t *= a\n    t += y\n    out[(n // 8) * 8:] = t[(n // 8) * 8:]\n")],
        ["重放"]),
    # sizes past one block, one loop trip, 2^20, exact multiples
    "softmax-fixed-block-1024": ("ex02_softmax", [("BLOCK_SIZE = triton.next_power_of_2(n_cols)", "BLOCK_SIZE = 1024")],
                                 ["1024"]),
    "softmax-specialised-to-public-widths": ("ex02_softmax", [("BLOCK_SIZE = triton.next_power_of_2(n_cols)",
        "BLOCK_SIZE = triton.next_power_of_2(n_cols) if n_cols <= 1000 else 1024")], ["1024"]),
    "layernorm-fixed-block-1024": ("ex05_layernorm", [("BLOCK_SIZE=triton.next_power_of_2(n_cols)", "BLOCK_SIZE=1024")],
                                   ["1024"]),
    "matmul-no-k-loop-past-256": ("ex03_matmul", [("for k0 in range(0, K, BLOCK_K):",
                                                   "for k0 in range(0, min(K, 256), BLOCK_K):")], ["K 远大于 BLOCK_K"]),
    "matmul-fp16-accumulator": ("ex03_matmul", [("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                                                 "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)"),
                                                ("acc += tl.dot(a, b)", "acc += tl.dot(a, b).to(tl.float16)")],
                                ["累加器必须是 float32"]),
    "axpy-wrong-past-2-20": ("ex01_axpy", [("    mask = offs < n", "    mask = (offs < n) & (offs < 1048576)")], ["2^20"]),
    "axpy-drops-last-block-on-exact-multiple": ("ex01_axpy", [("grid = (triton.cdiv(n, BLOCK_SIZE),)",
        "grid = (max(1, triton.cdiv(n, BLOCK_SIZE) - (n % BLOCK_SIZE == 0)),)")], ["整数倍"]),
    # tiles one row apart overlap (a race on the shared rows) and, for some drawn sizes, leave the last rows
    # unwritten (NaN): either message names the defect
    "transpose-overlapping-tiles": ("ex06_transpose", [("rm = tl.program_id(0) * BLOCK_M", "rm = tl.program_id(0) * (BLOCK_M - 1)")],
                                    (["NaN"], ["数据竞争"])),
    # out-of-bounds reads whose values are masked at the store
    "unmasked-load-masked-store": ("ex01_axpy", [("    x = tl.load(x_ptr + offs, mask=mask)", "    x = tl.load(x_ptr + offs)")],
                                   ["越界访问", "program"]),
    # a result that depends on the order in which programs run (the interpreter runs them in order)
    "race-on-the-next-block": ("ex01_axpy", [(AXPY_STORE, "    tl.store(out_ptr + offs + BLOCK_SIZE, 0.0 * x, "
                                              "mask=(offs + BLOCK_SIZE) < n)\n" + AXPY_STORE)], ["数据竞争"]),
    # two programs of one launch write the same element (identical values: order-independent, still a race)
    "two-programs-write-the-same-block": ("ex01_axpy", [
        ("    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
         "    offs = (pid % tl.cdiv(n, BLOCK_SIZE)) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)"),
        ("grid = (triton.cdiv(n, BLOCK_SIZE),)", "grid = (2 * triton.cdiv(n, BLOCK_SIZE),)")], ["数据竞争"]),
    # Python that the interpreter runs but a GPU compiler refuses
    "python-inside-the-kernel": ("ex01_axpy", [("    pid = tl.program_id(0)\n",
                                                "    pid = tl.program_id(0)\n    seen = {}\n")], ["sm_90"]),
    # a result cached by shape
    "cache-by-shape": ("ex01_axpy", [("def axpy(a, x, y, out=None, BLOCK_SIZE=1024):",
                                      "CACHE = {}\n\n\ndef axpy(a, x, y, out=None, BLOCK_SIZE=1024):"),
        (AXPY_LAUNCH, "    if n in CACHE:\n        out.copy_(CACHE[n])\n        return out\n" + AXPY_LAUNCH
         + "    CACHE[n] = out.clone()\n")], ["缓存"]),
    # a persistent kernel launched one program per tile: right results, not the exercise
    "persistent-matmul-one-tile-per-program": ("ex11_persistent_matmul", [(
        "programs = min(NUM_PROGRAMS, triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N))",
        "programs = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)")], ["persistent", "NUM_PROGRAMS="]),
    # a notebook from before the template gained a parameter: the message says which one the case passes
    "wrapper-without-a-parameter-the-case-passes": ("ex10_layernorm_backward", [
        ("def layernorm_backward(x, weight, dy, eps=1e-5, dx=None, dw=None, db=None, G=None):",
         "def layernorm_backward(x, weight, dy, eps=1e-5, dx=None, dw=None, db=None):\n    G = None")],
        ["没有这个参数", "把 G 加进参数表"]),
    # an optional pointer left out (None), as Triton's launcher allows: compiled with it as a constexpr None
    "optional-pointer-left-out": ("ex01_axpy", [
        ("def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK_SIZE: tl.constexpr):",
         "def axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, bias_ptr, BLOCK_SIZE: tl.constexpr):"),
        (AXPY_STORE, "    if bias_ptr is not None:\n        y += tl.load(bias_ptr + offs, mask=mask)\n" + AXPY_STORE),
        (AXPY_LAUNCH, "    axpy_kernel[grid](x, y, out, a, n, None, BLOCK_SIZE=BLOCK_SIZE)\n")], "full"),
    # correct code that must not be refused (issue 13's false rejections, all in one submission)
    "correct-with-config-main-version-time-global": ("ex01_axpy", [(
        "def axpy(a, x, y, out=None, BLOCK_SIZE=1024):",
        "class Cfg:\n    BLOCK = 1024\n\n\ncfg = Cfg()\ncfg.BLOCK = 1024\nLAUNCHES = 0\n"
        "print(triton.__version__)\n%time z = 1\n%timeit -n 2 -r 1 z = 2\n\n\ndef axpy(a, x, y, out=None, BLOCK_SIZE=1024):\n"
        "    global LAUNCHES\n    LAUNCHES += 1"),
        ("    return out", "    return out\n\n\nif __name__ == '__main__':\n    print(cfg.BLOCK, LAUNCHES)")], "full"),
}
REPEATED = ("copy-kernel-around-host-result", "unmasked-load-masked-store", "race-on-the-next-block")


def _problem(words, result: dict) -> str:
    tests = [t for t in result["tests"] if t["status"] != "skipped"]
    if words == "full":
        bad = [(t["name"], t["message"][:150]) for t in tests if t["status"] != "passed"]
        return f"expected full marks: {bad}" if bad else ""
    if result["score"] >= result["max_score"]:
        return "full marks for a wrong submission"
    msgs = [t["message"] for t in tests if t["status"] != "passed"]
    alternatives = words if isinstance(words, tuple) else (words,)  # a tuple: any one of its word lists
    found = any(all(w in m for w in alt) for alt in alternatives for m in msgs)
    return "" if found else f"no message has {' or '.join(map(str, alternatives))}: {[m[:160] for m in msgs[:3]]}"


def test_rigor_batch(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    expected = {}
    for name, (ex_id, repl, words) in CASES.items():
        for k in range(3 if name in REPEATED else 1):
            p = make_variant(subs, ex_id, repl, f"{name}-{k}")
            expected[p.stem] = words
    flags = [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]
    assert cli.main(["grade", str(subs), "--out", str(out), "--device", "cpu", "--workers", "2", "--timeout", "60"]
                    + flags) == 0
    problems, table = {}, []
    for stem, words in expected.items():
        result = json.loads((out / f"{batch.stem_for(subs / f'{stem}.ipynb')}.json").read_text(encoding="utf-8"))
        why = _problem(words, result)
        if why:
            problems[stem] = why
        first = next((t["message"] for t in result["tests"] if t["status"] not in ("passed", "skipped")), "")
        table.append(f"{stem:<48} {result['score']:g}/{result['max_score']:g} {result['duration_s']:.0f}s  {first[:60]}")
    with capsys.disabled():
        print("\n" + "\n".join(table))
    assert not problems, problems


def test_exercise_identity_mismatch_is_reported(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "easy.ipynb").write_bytes((REPO / "solutions" / "ex01_axpy.ipynb").read_bytes())
    flags = [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]
    assert cli.main(["grade", str(subs), "--out", str(out), "--device", "cpu", "--exercise", "ex02_softmax"] + flags) == 0
    row = next(csv.DictReader(open(out / "gradebook.csv", encoding="utf-8")))
    assert row["exercise"] == "ex02_softmax" and float(row["score"]) == 0
    assert row["status"].startswith("exercise mismatch") and "ex01_axpy" in row["status"]


def test_batch_refuses_without_isolation(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TCOURSE_GRADER_SANDBOX", "off")
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "--unsafe-no-sandbox" in capsys.readouterr().err


def _deep(n: int) -> bytes:
    return b'{"cells": ' + b"[" * n + b"]" * n + b"}"


@pytest.mark.parametrize("kind", ["fifo", "symlink-dev-zero", "deep-json", "surrogate", "huge", "directory"])
def test_unusable_submissions_exit_2_fast(tmp_path, capsys, kind):
    path = tmp_path / "sub.ipynb"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink-dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "deep-json":
        path.write_bytes(_deep(100_000))
    elif kind == "surrogate":
        nb = json.loads((REPO / "solutions" / "ex01_axpy.ipynb").read_text(encoding="utf-8"))
        cell = next(c for c in nb["cells"] if c["id"] == "ex01-kernel")
        cell["source"] = "x = 1\n"
        path.write_text(json.dumps(nb).replace('"x = 1\\n"', '"x = \\"\\udc80\\"\\n"'), encoding="utf-8")
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(64 << 20)
    else:
        path.mkdir()
    t0 = time.monotonic()
    assert cli.main(["check", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:"), err
    assert time.monotonic() - t0 < 10


def _replayer(tmp_path, log) -> Replayer:
    (tmp_path / "work").mkdir(exist_ok=True)
    target = tmp_path / "work" / "c00_launches.json"
    if callable(log):
        log(target)
    else:
        target.write_text(json.dumps(log) if not isinstance(log, bytes) else log.decode(), encoding="utf-8")
    return Replayer(tmp_path, "cpu", {"axpy_kernel": object()}, None)


GOOD = {"kernel": "axpy_kernel", "grid": [1], "args": [], "kwargs": {}}


@pytest.mark.parametrize("log", [
    {"launches": [{**GOOD, "kernel": "not_mine"}]},
    {"launches": [{**GOOD, "grid": [-1]}]},
    {"launches": [{**GOOD, "grid": [1 << 30]}]},
    {"launches": [GOOD] * 65},
    {"launches": [{**GOOD, "extra": 1}]},
    {"launches": "x"},
    _deep(100_000),
    lambda p: p.symlink_to("/dev/zero"),
    lambda p: os.mkfifo(p),
    lambda p: open(p, "wb").truncate(64 << 20),
])
def test_forged_launch_logs_are_refused(tmp_path, log):
    rp = _replayer(tmp_path, log)
    t0 = time.monotonic()
    with pytest.raises((BadLog, safeio.Untrusted)):
        rp.read_log("c00")
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("arg", [
    {"t": "tensor", "buf": "in:nope", "byte": 0, "dtype": "float32"},
    {"t": "tensor", "buf": "in:x", "byte": 1 << 40, "dtype": "float32"},
    {"t": "tensor", "buf": "in:x", "byte": 2, "dtype": "float32"},
    {"t": "tensor", "buf": "in:x", "byte": 0, "dtype": "object"},
    {"t": "int", "v": True},
    {"t": "unsupported", "type": "Generator"},
    json.loads('{"t": "tuple", "v": [' * 8 + '{"t": "none"}' + ']}' * 8),
])
def test_replay_refuses_malformed_arguments(tmp_path, arg):
    import torch

    rp = _replayer(tmp_path, {"launches": []})
    with pytest.raises(BadLog):
        rp.decode(arg, {"in:x": torch.zeros(16)})


@pytest.mark.skipif(sandbox.uid_blocker() is not None, reason=f"no throwaway-user isolation here: {sandbox.uid_blocker()}")
def test_uid_isolation_kills_escapees_and_confines_writes(tmp_path, monkeypatch):
    """Without bubblewrap, as root: the learner's kernel runs as a fresh unprivileged user; a daemon that
    cleared its environment and left the session is killed, and the grader's files stay out of reach."""
    monkeypatch.setenv("TCOURSE_GRADER_SANDBOX", "uid")
    monkeypatch.setattr(grade.policy, "audit", lambda cells, *names: policy.Audit(sources=dict(cells)))
    victim = tmp_path / "grader_file.txt"
    victim.write_text("grader's", encoding="utf-8")
    victim.chmod(0o644)
    tmp_path.chmod(0o700)
    marker = f"tcourse-escapee-{os.getpid()}"
    code = (f"import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3000)', {marker!r}], env={{}}, "
            f"start_new_session=True)\n"
            f"try:\n    open({str(victim)!r}, 'w').write('forged')\nexcept OSError as e:\n    print('refused', e)\n"
            f"try:\n    open('/etc/tcourse-forged', 'w').write('x')\nexcept OSError as e:\n    print('refused', e)\n")
    path = make_variant(tmp_path, "ex01_axpy", [("@triton.jit\ndef axpy_kernel", code + "\n\n@triton.jit\ndef axpy_kernel")])
    r = grade.grade(path, "cpu", cell_timeout=60, seed=2)
    assert r.sandbox.startswith("uid "), r.sandbox
    assert r.score == r.max_score, [(t.name, t.message) for t in r.tests if t.status != "passed"]
    assert victim.read_text(encoding="utf-8") == "grader's" and not Path("/etc/tcourse-forged").exists()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


def _mutants(ex_id: str) -> list[tuple[str, str]]:
    """(old, new) edits of the solution's last kernel cell, one mutation each: the first ``tl.load``
    without its mask (and ``other``), and the first ``<`` comparison turned into ``<=``."""
    import ast

    cells = [c for c in source.parse(source.SRC_DIR / f"{ex_id}.py") if c.role == "solution" and "@triton.jit" in c.text]
    src = source.render(cells[-1].text, True)
    tree = ast.parse(src)
    found = []
    load = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
                 and any(k.arg == "mask" for k in n.keywords)), None)
    if load is not None:
        old = ast.get_source_segment(src, load)
        load.keywords = [k for k in load.keywords if k.arg not in ("mask", "other")]
        found.append((old, ast.unparse(load)))
    cmp = next((n for n in ast.walk(tree) if isinstance(n, ast.Compare) and isinstance(n.ops[0], ast.Lt)), None)
    if cmp is not None:
        old = ast.get_source_segment(src, cmp)
        cmp.ops = [ast.LtE()]
        found.append((old, ast.unparse(cmp)))
    return found


def test_mutants_of_every_solution_are_caught(tmp_path, capsys):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    made = []
    for ex_id, ex in registry.exercises().items():
        if ex.written or ex_id == "ex04_group_m_swizzle":  # its kernel has no mask; the python part has its own cases
            continue
        for k, edit in enumerate(_mutants(ex_id)):
            made.append((make_variant(subs, ex_id, [edit], f"{ex_id}-m{k}"), edit))
    for ex_id, edits, name in COVERAGE_MUTANTS:  # gaps in the cases a mutation pass found, closed since
        made.append((make_variant(subs, ex_id, edits, name), edits))
    assert len(made) >= 10
    flags = [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]
    assert cli.main(["grade", str(subs), "--out", str(out), "--device", "cpu", "--workers", "2"] + flags) == 0
    survived = []
    for path, edit in made:
        result = json.loads((out / f"{batch.stem_for(path)}.json").read_text(encoding="utf-8"))
        if result["score"] >= result["max_score"]:
            survived.append((path.stem, edit))
    with capsys.disabled():
        print(f"\nmutation test: {len(made)} mutants, {len(made) - len(survived)} caught")
    assert not survived, survived


def test_the_replay_names_the_triton_install_instead_of_hashing_libtriton(tmp_path, monkeypatch):
    """Triton keys its compile cache by a SHA-256 over its own files, libtriton (about 500 MB) included: a second of
    every replay. The replay's cache is its own folder per submission, so it keys it by the install instead; its sm_90
    compile check still compiles, without reading libtriton. The spy sees the original key read it."""
    script = tmp_path / "key.py"
    script.write_text(
        "import builtins, os, sys\n"
        f"os.environ['TRITON_CACHE_DIR'] = {str(tmp_path / 'cache')!r}\n"
        "import torch, triton, triton.language as tl\n"
        "import triton.runtime.cache as cache\n"
        "from grader import replay\n"
        "from tcourse.compile_info import compile_for_sm90\n"
        "opened, real_open = [], builtins.open\n"
        "builtins.open = lambda f, *a, **k: (opened.append(str(f)), real_open(f, *a, **k))[1]\n"
        "original = cache.triton_key\n"
        "key = replay.name_the_triton_install()\n"
        "@triton.jit\n"
        "def copy(x, y, BLOCK: tl.constexpr):\n"
        "    o = tl.arange(0, BLOCK)\n"
        "    tl.store(y + o, tl.load(x + o))\n"
        "x = torch.empty(64)\n"
        "rep = compile_for_sm90(copy, x, x, BLOCK=64)\n"
        "print(key, cache.triton_key() == key, 'cubin' in rep.asm, any('libtriton' in f for f in opened))\n"
        "original()\n"
        "print(any('libtriton' in f for f in opened))\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TCOURSE_DEVICE")}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    first, second = r.stdout.strip().splitlines()[-2:]
    import triton

    assert first.startswith(f"{triton.__version__}-libtriton") and first.endswith(" True True False"), first
    assert second == "True"
    # an install without _C/libtriton* where Triton keeps it: Triton's own key stays
    import triton.runtime.cache as cache
    from grader import replay

    monkeypatch.setattr(cache, "__file__", str(tmp_path / "triton" / "runtime" / "cache.py"))
    kept = cache.triton_key
    assert replay.name_the_triton_install() is None and cache.triton_key is kept


def test_interleaved_launch_loses_split_updates_and_keeps_locked_ones(monkeypatch):
    """grader.interleave: a read-modify-write made of two atomics loses counts once programs overlap (the
    interpreter's in-order loop never shows it); a lock taken with atomic_cas keeps a shared sum right, and the
    launch with the lock is not reported as a race."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    from grader import interleave
    from grader.replay import Guard

    @triton.jit
    def split_count(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        for i in range(BLOCK):
            idx = tl.program_id(0) * BLOCK + i
            b = tl.load(x_ptr + idx, mask=idx < n, other=0)
            c = tl.atomic_add(out_ptr + b, 0, mask=idx < n)
            tl.atomic_xchg(out_ptr + b, c + 1, mask=idx < n)

    @triton.jit
    def locked_sum(x_ptr, acc_ptr, lock_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0), axis=0)
        while tl.atomic_cas(lock_ptr, 0, 1) == 1:
            pass
        tl.store(acc_ptr, tl.load(acc_ptr) + v)
        tl.atomic_xchg(lock_ptr, 0)

    x = torch.randint(0, 4, (512,), dtype=torch.int32)
    counts, acc, lock = torch.zeros(4, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    guard = Guard()
    uninstall = guard.install()
    try:
        guard.ranges = [(t.data_ptr(), t.data_ptr() + 4 * t.numel(), name, 4)
                        for name, t in (("x", x), ("counts", counts), ("acc", acc), ("lock", lock))]
        split_count[(8,)](x, counts, 512, BLOCK=64)
        assert counts.tolist() == torch.bincount(x, minlength=4).tolist()  # in order: right
        counts.zero_()
        interleave.launch(split_count, (8,), [x, counts, 512], {"BLOCK": 64}, np.random.default_rng(0), guard)
        assert counts.sum().item() < 512
        interleave.launch(locked_sum, (8,), [x, acc, lock, 512], {"BLOCK": 64}, np.random.default_rng(0), guard)
        assert acc.item() == int(x.sum()) and lock.item() == 0
        assert guard.race() is None
    finally:
        uninstall()


def _in_order_then_steered(guard, kernel, args, kw, seed, reverse=False, ordered=True):
    """Two programs in order (the guard finds the shared addresses; with ``ordered`` False the in-order run must
    already report an access no release/acquire orders), then steered (or reversed) from the same start; returns
    the tensors after the in-order run, ``args`` hold the steered run's."""
    import numpy as np
    import torch

    from grader import interleave

    before = [a.clone() if torch.is_tensor(a) else a for a in args]
    guard.ranges = [(t.data_ptr(), t.data_ptr() + t.element_size() * t.numel(), f"t{i}", t.element_size())
                    for i, t in enumerate(args) if torch.is_tensor(t)]
    guard.launch_no, guard.shared = 0, {}
    kernel[(2,)](*args, **kw)
    problem = guard.race()
    assert (problem is None) == ordered and guard.shared[1].size > 0, problem
    in_order = [a.clone() for a in args if torch.is_tensor(a)]
    for a, b in zip(args, before):
        if torch.is_tensor(a):
            a.copy_(b)
    interleave.launch(kernel, (2,), args, kw, np.random.default_rng(seed), guard, guard.shared[1], reverse)
    guard.events = []  # the steered run's, not checked here
    return in_order


def test_steered_launch_overtakes_every_split_update_and_ticket_order(monkeypatch):
    """grader.interleave steered by the in-order run, two programs, every seed: a read-modify-write made of two
    atomics (any two, no lock, no plain store; a compare-and-swap not retried; a volatile load and an exchange)
    loses counts, and a program that took block number 1 from a ticket adds its
    sum to the running total before the one with block 0 (a running total that does not wait); one atomic_add per
    element stays right under the same steering."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from grader.replay import Guard

    @triton.jit
    def count(x_ptr, out_ptr, n, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
        for i in range(BLOCK):
            idx = tl.program_id(0) * BLOCK + i
            m = idx < n
            b = tl.load(x_ptr + idx, mask=m, other=0)
            if SPLIT == 0:  # right
                tl.atomic_add(out_ptr + b, 1, mask=m)
            elif SPLIT == 1:
                tl.atomic_xchg(out_ptr + b, tl.atomic_add(out_ptr + b, 0, mask=m) + 1, mask=m)
            elif SPLIT == 2:  # no xchg or cas: not a lock, steered all the same
                tl.atomic_max(out_ptr + b, tl.atomic_or(out_ptr + b, 0, mask=m) + 1, mask=m)
            elif SPLIT == 3:  # a compare-and-swap that is not retried
                c = tl.atomic_add(out_ptr + b, 0, mask=m)
                tl.atomic_cas(out_ptr + b, c, c + 1)
            else:
                tl.atomic_xchg(out_ptr + b, tl.load(out_ptr + b, mask=m, volatile=True) + 1, mask=m)

    @triton.jit
    def ticket_cumsum(x_ptr, out_ptr, n, ticket_ptr, total_ptr, BLOCK: tl.constexpr):
        cols = tl.atomic_add(ticket_ptr, 1) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        carry = tl.atomic_add(total_ptr, tl.sum(v, axis=0))
        tl.store(out_ptr + cols, tl.cumsum(v, axis=0) + carry, mask=cols < n)

    guard = Guard()
    uninstall = guard.install()
    try:
        for seed in range(5):
            x = torch.randint(0, 193, (255,), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
            want = torch.bincount(x, minlength=193)
            for split in range(5):
                out = torch.zeros(193, dtype=torch.int32)
                assert _in_order_then_steered(guard, count, [x, out, 255], {"SPLIT": split, "BLOCK": 128}, seed)[1].equal(want)
                assert out.equal(want) == (split == 0), (seed, split)
            v = torch.randn(200, generator=torch.Generator().manual_seed(seed))
            out, ticket, total = torch.zeros(200), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
            in_order = _in_order_then_steered(guard, ticket_cumsum, [v, out, 200, ticket, total], {"BLOCK": 128}, seed)
            assert torch.allclose(in_order[1], v.cumsum(0), atol=1e-4)
            assert not torch.allclose(out, v.cumsum(0), atol=1e-4), seed
    finally:
        uninstall()


def test_reversed_launch_reads_before_the_writes_it_did_not_wait_for(monkeypatch):
    """grader.interleave reversed at the shared addresses, two programs, every seed: the program with the
    highest id summing the others' partial counts without waiting for them, a flag published before the value
    it guards, and a plain store another program overwrote in order all come out wrong (the in-order run
    already reports them: grader.ordering); waiting on a ticket, the value before its flag and a locked update
    stay right."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from grader.replay import Guard

    @triton.jit
    def last_sums(x_ptr, part_ptr, out_ptr, ticket_ptr, WAIT: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.atomic_add(part_ptr + pid * 8 + tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)), 1)
        last = tl.atomic_add(ticket_ptr, 1) == tl.num_programs(0) - 1 if WAIT else pid == tl.num_programs(0) - 1
        if last:
            b = tl.arange(0, 8)
            tl.store(out_ptr + b, tl.load(part_ptr + b) + tl.load(part_ptr + 8 + b))

    @triton.jit
    def publish(v_ptr, flag_ptr, out_ptr, FLAG_FIRST: tl.constexpr):
        if tl.program_id(0) == 0:
            tl.store(v_ptr + 1, 3.0)
            if FLAG_FIRST:
                tl.atomic_xchg(flag_ptr, 1)
                tl.store(v_ptr, 7.0)
            else:
                tl.store(v_ptr, 7.0)
                tl.atomic_xchg(flag_ptr, 1)
        else:
            while tl.atomic_add(flag_ptr, 0) == 0:
                pass
            tl.store(out_ptr, tl.load(v_ptr) + tl.load(v_ptr + 1))

    @triton.jit
    def overwrite(out_ptr, lock_ptr):
        while tl.atomic_cas(lock_ptr, 0, 1) == 1:
            pass
        tl.store(out_ptr, tl.load(out_ptr) + 1.0)  # a locked update: right in any order
        tl.atomic_xchg(lock_ptr, 0)
        tl.store(out_ptr + 1, tl.program_id(0) * 2.0 - 1.0)  # program 1's 1.0 lands last in order

    guard = Guard()
    uninstall = guard.install()
    try:
        for seed in range(5):
            x = torch.randint(0, 8, (64,), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
            want = torch.bincount(x, minlength=8)
            for wait in (0, 1):
                part, out, ticket = torch.zeros(16, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
                in_order = _in_order_then_steered(guard, last_sums, [x, part, out, ticket], {"WAIT": wait, "BLOCK": 32},
                                                  seed, reverse=True, ordered=bool(wait))
                assert in_order[2].equal(want) and out.equal(want) == bool(wait), (seed, wait)
            for flag_first in (0, 1):
                v, flag, out = torch.zeros(2), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
                _in_order_then_steered(guard, publish, [v, flag, out], {"FLAG_FIRST": flag_first}, seed, reverse=True,
                                       ordered=not flag_first)
                assert (out.item() == 10.0) == (not flag_first), (seed, flag_first)  # the spinner looks again at once
            out, lock = torch.zeros(2), torch.zeros(1, dtype=torch.int32)
            in_order = _in_order_then_steered(guard, overwrite, [out, lock], {}, seed, reverse=True, ordered=False)
            assert in_order[0].tolist() == [2.0, 1.0] and out.tolist() == [2.0, -1.0], seed
    finally:
        uninstall()


def test_a_wait_nothing_can_end_stops_at_once_in_order(monkeypatch):
    """In order (the learner's run, the replay's first round) a program spinning on a flag that no earlier program
    raised waits for nothing: grader.spin ends it after ENDLESS reads, naming the program and the tensor (element, in
    the replay), where the case used to run into its time limit; a wait for an earlier program's flag runs through.
    A wait on a sum of flags read with a mask and no other= ends in the interpreter and never in the replay."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from grader import spin
    from grader.replay import Guard

    @triton.jit
    def chain(flag_ptr, SKIP: tl.constexpr, TURNS: tl.constexpr, MASKED: tl.constexpr):  # each program waits for the
        p = tl.program_id(0)                                 # one before it (at most TURNS turns), then raises its flag
        if p > 0:
            turns = 0
            if MASKED:  # the flag and its neighbour read together, the neighbour masked off without other=
                while (tl.sum(tl.atomic_load(flag_ptr + p - 1 + tl.arange(0, 2), mask=tl.arange(0, 2) < 1)) != 1) \
                        & (turns < TURNS):
                    turns += 1
            else:
                while (tl.atomic_add(flag_ptr + p - 1, 0) == 0) & (turns < TURNS):
                    turns += 1
        if p != SKIP:
            tl.atomic_xchg(flag_ptr + p, 1)

    monkeypatch.setattr(spin, "ENDLESS", 2000)  # a fifth of the real count: the same verdicts, sooner
    flags = torch.zeros(4, dtype=torch.int32)

    def run(skip: int, masked: bool = False) -> str | None:
        flags.zero_()
        t0 = time.monotonic()
        try:
            chain[(4,)](flags, SKIP=skip, TURNS=2 * spin.ENDLESS, MASKED=masked)
        except spin.EndlessWait as e:
            return str(e)
        finally:
            assert time.monotonic() - t0 < 30
        return None

    guard = Guard()
    uninstall = guard.install()
    try:
        guard.ranges = [(flags.data_ptr(), flags.data_ptr() + 16, "flags", 4)]
        assert run(-1) is None and flags.tolist() == [1, 1, 1, 1]
        assert f"program (2, 0, 0) 连续 {spin.ENDLESS} 次读同样的位置（flags[1]）" in run(1)
        # the replay fills the masked-off neighbour with the largest int32: the sum is never 1, and the message says why
        # (tl.atomic_load came with Triton 3.9)
        assert not hasattr(tl, "atomic_load") or f"program (1, 0, 0) 连续 {spin.ENDLESS} 次读同样的位置（flags[0]），读到的" \
               "一直是 [1, 2147483647]（其中有 mask 关掉、又没给 other= 的元素" in run(-1, masked=True)
    finally:
        uninstall()
    with spin.watch(lambda addr: "flags"):
        assert run(-1) is None and (not hasattr(tl, "atomic_load") or run(-1, masked=True) is None)  # the interpreter reads 0
        assert f"program (2, 0, 0) 连续 {spin.ENDLESS} 次读同样的位置（flags）" in run(1)


def test_watching_a_launch_leaves_nothing_patched_behind():
    """Every way the grader watches a launch puts back what it replaced: an attribute the object had is set again,
    one it only inherited is deleted, and a patch that fails half-way undoes the half that was done."""
    from triton.runtime import interpreter as I

    import threading

    import torch

    from grader import launchlog, patching, spin
    from grader.replay import Guard

    class Base:
        def m(self):
            return "base"

    class Sub(Base):
        pass

    holder = type("Holder", (), {"x": 1})
    restore = patching.patch([(Sub, "m", lambda self: "patched"), (holder, "x", 2)])
    assert Sub().m() == "patched" and holder.x == 2
    restore()
    assert "m" not in vars(Sub) and Sub().m() == "base" and holder.x == 1
    with pytest.raises(TypeError):  # a built-in type refuses the second patch: the first is undone
        patching.patch([(holder, "x", 3), (int, "x", 3)])
    assert holder.x == 1

    def owned():
        import triton.runtime.jit as jit
        objects = (I.interpreter_builder, I.interpreter_semantic, I.TensorHandle, jit.JITFunction, I.InterpretedFunction,
                   torch)
        return [{k: id(v) for k, v in vars(o).items()} for o in objects]

    before = owned()
    Guard().install()()
    with spin.watch(lambda addr: "x"):
        assert owned() != before
    with launchlog.watched(launchlog.Log({}, threading.get_ident()), ["torch.add", "torch.Tensor.T"]):
        assert owned() != before
        with pytest.raises(launchlog.ForbiddenOp):
            torch.add(torch.ones(1), 1)
        with pytest.raises(launchlog.ForbiddenOp):  # an attribute, not a method: reading it raises
            torch.ones(2, 3).T
    assert owned() == before and torch.ones(2, 3).T.shape == (3, 2)


def test_interleaved_launch_runs_a_look_back_chain_and_reports_a_lock_order_deadlock(monkeypatch):
    """grader.interleave: a program that spins on the flag of the program before it finishes once every started
    program spins (the lowest pending program starts, as a GPU dispatches it), over a grid far larger than the
    window, and setting the flag before the value is still caught; two locks taken in opposite orders by
    neighbouring programs stop every program: Deadlock, at once."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    from grader import interleave
    from grader.replay import Guard

    @triton.jit
    def chain(flags_ptr, out_ptr, FLAG_FIRST: tl.constexpr):
        pid = tl.program_id(0)
        prev = 0
        if pid > 0:
            while tl.atomic_add(flags_ptr + pid - 1, 0) == 0:
                pass
            prev = tl.load(out_ptr + pid - 1)
        if FLAG_FIRST:  # wrong: the flag says "done" before the value is stored
            tl.atomic_xchg(flags_ptr + pid, 1)
        tl.store(out_ptr + pid, prev + 1)
        if not FLAG_FIRST:
            tl.atomic_xchg(flags_ptr + pid, 1)

    @triton.jit
    def two_locks(locks_ptr, acc_ptr):
        first = tl.program_id(0) % 2
        while tl.atomic_cas(locks_ptr + first, 0, 1) == 1:
            pass
        while tl.atomic_cas(locks_ptr + 1 - first, 0, 1) == 1:
            pass
        tl.atomic_add(acc_ptr, 1)
        tl.atomic_xchg(locks_ptr + 1 - first, 0)
        tl.atomic_xchg(locks_ptr + first, 0)

    flags, out = torch.zeros(64, dtype=torch.int32), torch.zeros(64, dtype=torch.int32)
    locks, acc = torch.zeros(2, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    guard = Guard()
    uninstall = guard.install()
    try:
        guard.ranges = [(t.data_ptr(), t.data_ptr() + 4 * t.numel(), name, 4)
                        for name, t in (("flags", flags), ("out", out), ("locks", locks), ("acc", acc))]
        interleave.launch(chain, (64,), [flags, out], {"FLAG_FIRST": False}, np.random.default_rng(0), guard)
        assert out.tolist() == list(range(1, 65))
        flags.zero_()
        out.zero_()
        interleave.launch(chain, (64,), [flags, out], {"FLAG_FIRST": True}, np.random.default_rng(0), guard)
        assert out.tolist() != list(range(1, 65))  # a waiter still gets turns right after the flag is set
        two_locks[(16,)](locks, acc)  # in order, one program after another: no deadlock
        assert acc.item() == 16
        with pytest.raises(interleave.Deadlock, match="死锁"):
            interleave.launch(two_locks, (16,), [locks, acc], {}, np.random.default_rng(0), guard)
    finally:
        uninstall()


def test_selfcheck_finds_kernels_under_autotune_and_heuristics(monkeypatch):
    """The self-check replays what the learner launched: a kernel under @triton.autotune or @triton.heuristics is
    found by its name (the decorators' own objects are not kernels), and a self-referencing ``fn`` does not loop."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import triton
    import triton.language as tl

    from grader import selfcheck

    @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        pass

    @triton.heuristics({"BLOCK": lambda args: 64})
    @triton.jit
    def guessed(x_ptr, BLOCK: tl.constexpr):
        pass

    class Loop:
        pass

    loop = Loop()
    loop.fn = loop
    found = selfcheck._kernels({"tuned": tuned, "guessed": guessed, "loop": loop, "n": 3})
    assert sorted(found) == ["guessed", "tuned"]
    assert found["tuned"] is tuned.fn and found["guessed"] is guessed.fn


def test_the_compile_check_compiles_an_int_argument_of_1_as_a_gpu_launch_does(monkeypatch):
    """An int argument equal to 1 is a compile-time constant on a GPU launch and a tensor in the interpreter: the
    replay compiles such a launch both ways, so a kernel that compiles only unspecialised (n.dtype on a constant)
    fails there with a message naming the argument; n = 2 compiles once and passes."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import types

    import torch
    import triton
    import triton.language as tl

    from grader.replay import Replayer

    @triton.jit
    def fill(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.zeros([BLOCK], dtype=n.dtype), mask=offs < n)

    x = torch.zeros(16, dtype=torch.int32)
    for n, verdict in [(2, None), (1, "参数 n 等于 1 时")]:
        checker = types.SimpleNamespace(kernels={"fill": fill}, compiled={})
        got = Replayer.compile_check(checker, "fill", [x, n], {"BLOCK": 16})
        assert (got is None) if verdict is None else (got[0] == "compile_error" and verdict in got[1]), got
    checker = types.SimpleNamespace(kernels={"fill": fill}, compiled={})
    kind, message = Replayer.compile_check(checker, "fill", [x, 2], {"BLOCK": 16, "num_warps": 64})
    assert kind == "launch_error" and "2048 个线程" in message  # compiles, but sm_90 cannot launch it
    # hostile round 13: launch options the replay does not compile with change the launch on a GPU (a cluster of
    # 32 CTAs, a cooperative grid past what fits at once): refused, at their defaults accepted
    for option, value in (("num_ctas", 32), ("launch_cooperative_grid", True), ("launch_pdl", True), ("maxnreg", 64)):
        checker = types.SimpleNamespace(kernels={"fill": fill}, compiled={})
        kind, message = Replayer.compile_check(checker, "fill", [x, 2], {"BLOCK": 16, option: value})
        assert kind == "launch_error" and option in message, (option, message)
    checker = types.SimpleNamespace(kernels={"fill": fill}, compiled={})
    assert Replayer.compile_check(checker, "fill", [x, 2], {"BLOCK": 16, "num_ctas": 1, "launch_pdl": False}) is None


def test_a_grid_past_cudas_limits_is_refused(tmp_path):
    """Hostile round 13: a grid of (1, 68516) ran in the interpreter; CUDA refuses more than 65535 programs along
    the grid's second and third dimensions (the first may have 2^31 - 1)."""
    for grid, refused in (([68516], False), ([1, 65535, 2], False), ([1, 68516], True), ([1, 1, 70000], True)):
        rp = _replayer(tmp_path, {"launches": [{**GOOD, "grid": grid}]})
        if refused:
            with pytest.raises(BadLog, match="65535"):
                rp.read_log("c00")
        else:
            assert rp.read_log("c00")[0]["grid"] == grid


def test_the_sandbox_lib_holds_every_grader_module_its_modules_import():
    """sandbox.LIB_MODULES is what the learner's kernel and the replay can import of the grader: a module one of them
    imports but the list forgot fails every case with an ImportError (it happened to grader.hints)."""
    import ast

    have = {name.removesuffix(".py") for name in sandbox.LIB_MODULES}
    for name in sandbox.LIB_MODULES:
        tree = ast.parse((REPO / "grader" / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                wanted = {a.name for a in node.names} if node.module is None else {node.module.split(".")[0]}
                assert wanted <= have, f"{name} imports {sorted(wanted - have)}, missing from sandbox.LIB_MODULES"


def test_multiple_of_hints_are_checked_against_the_values(monkeypatch):
    """The interpreter ignores tl.multiple_of and tl.max_contiguous; the replay checks them: a scalar that is not a
    multiple, and gathered rows called contiguous, are reported; the usual hints on a block's offsets are not."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from grader.replay import Guard

    @triton.jit
    def copy_rows(x_ptr, y_ptr, idx_ptr, stride, BLOCK: tl.constexpr):
        offs = tl.max_contiguous(tl.multiple_of(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), BLOCK), BLOCK)
        start = tl.multiple_of(stride * tl.program_id(0), 4)
        src = tl.max_contiguous(tl.load(idx_ptr + offs), BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + start - stride * tl.program_id(0) + src))

    x, y, idx = torch.arange(64, dtype=torch.float32), torch.zeros(64), torch.arange(64)
    guard = Guard()
    uninstall = guard.install()
    try:
        for stride, order, hint in [(8, idx, None), (6, idx, "的值里有 6，"), (8, idx.flip(0), "[63, 62, 61")]:
            guard.ranges = [(t.data_ptr(), t.data_ptr() + t.element_size() * t.numel(), name, t.element_size())
                            for name, t in (("x", x), ("y", y), ("idx", order))]
            guard.false_hint = None
            copy_rows[(4,)](x, y, order, stride, BLOCK=16)
            assert (guard.false_hint is None) if hint is None else (hint in guard.false_hint), guard.false_hint
            assert torch.equal(x[order], y)
    finally:
        uninstall()


@pytest.mark.parametrize("key, data, values, verdict", [
    ("tt.contiguity", [0, 1, 2, 3, 8, 9, 10, 11], [4], None),                # Triton's docstring example
    ("tt.contiguity", [0, 1, 2, 3, 8, 9, 10, 11], [8], "[0, 1, 2, 3, 8"),    # one group of 8 it is not
    ("tt.contiguity", [[0, 1, 2, 3], [10, 11, 12, 13]], [1, 4], None),       # along the rows
    ("tt.contiguity", [[0, 1, 2, 3], [10, 11, 12, 13]], [2, 1], "[0, 10]"),  # down the columns
    ("tt.contiguity", [i % 100 for i in range(64, 128)], [64], None),        # offs % M of the matmul tutorials
    ("tt.contiguity", [i if i < 100 else 0 for i in range(64, 128)], [64], None),  # tl.where(offs < M, offs, 0)
    ("tt.contiguity", [5, 6, 7, 1, 2, 9, 9, 9], [8], "[5, 6, 7, 1, 2, 9"),   # two breaks
    ("tt.constancy", [0, 0, 0, 0, 1, 1, 1, 1], [4], None),
    ("tt.constancy", [0, 0, 1, 1, 2, 2, 3, 3], [4], "[0, 0, 1, 1]"),
    ("tt.divisibility", [64, 65, 66, 0, 0, 0], [64], None),                  # runs start at 64 and 0
    ("tt.divisibility", [64, 65, 66, 99, 99], [64], "99"),                   # a run starting at 99
    ("tt.divisibility", [96, 97, 98, 99, 99, 99], [32], None),               # tl.minimum(offs, M - 1): repeats
    ("tt.divisibility", [0, 3, 6, 9], [3], None),                            # every element a run of its own
    ("tt.divisibility", [[0, 1], [16, 17], [40, 41]], [1, 16], "40"),         # each row's start
    ("tt.divisibility", 48, [16], None),
    ("tt.contiguity", [[5], [9]], [1, 16], None),                           # one element along the hinted axis
    ("tt.constancy", 7, [4], None),
])
def test_hint_meaning(key, data, values, verdict):
    """grader.hints reads each hint as Triton's docstrings define it, with the edge idioms of the matmul tutorials."""
    import numpy as np

    from grader import hints

    got = hints.violation(key, np.array(data), values)
    assert (got is None) if verdict is None else (verdict in got), got


def test_pointer_hints_are_in_bytes():
    import numpy as np

    from grader import hints

    base = 1 << 20
    assert hints.violation("tt.divisibility", np.array([base + 4 * i for i in range(8)], np.uint64), [16], 4) is None
    assert "字节" in hints.violation("tt.divisibility", np.array([base + 12 * i for i in range(8)], np.uint64), [16], 4)
    assert hints.violation("tt.contiguity", np.array([base + 2 * i for i in range(8)], np.uint64), [8], 2) is None
    assert hints.violation("tt.contiguity", np.array([base + 4 * i for i in range(8)], np.uint64), [8], 2)


@pytest.mark.parametrize("publish, wait, verdict", [
    ("xchg", "add", None),                          # tl.atomic_* default to acq_rel: ordered
    ("store", "load", None),                        # tl.atomic_store (release) / tl.atomic_load (acquire), Triton 3.9
    ("xchg_relaxed", "add", "没有做带 release"),      # the flag raised with sem="relaxed": the data may come later
    ("xchg_cta", "add", "没有做带 release"),          # scope="cta" orders nothing between programs
    ("xchg", "volatile", "没有用带 acquire"),         # a volatile load of the flag is not an acquire
    ("xchg", "add_relaxed", "没有用带 acquire"),
    ("plain", "add", "普通的 tl.store"),             # the flag itself written with a plain store
    ("ticket", "ticket", None),                     # the last program to take a ticket sums what the others stored
    ("ticket", "none", "没有用带 acquire"),           # ... without taking one itself
])
def test_programs_pass_data_only_through_release_and_acquire(monkeypatch, publish, wait, verdict):
    """Program 0 stores a value and raises a flag; program 1 waits for the flag and reads the value. The replay
    orders the two only through a release and an acquire (grader.ordering), whatever the interpreter's order."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch
    import triton
    import triton.language as tl

    from grader.replay import Guard

    @triton.jit
    def pass_on(data_ptr, flag_ptr, out_ptr, PUBLISH: tl.constexpr, WAIT: tl.constexpr):
        pid = tl.program_id(0)
        if pid == 0:
            tl.store(data_ptr, 42.0)
            if PUBLISH == "xchg":
                tl.atomic_xchg(flag_ptr, 1)
            elif PUBLISH == "xchg_relaxed":
                tl.atomic_xchg(flag_ptr, 1, sem="relaxed")
            elif PUBLISH == "xchg_cta":
                tl.atomic_xchg(flag_ptr, 1, scope="cta")
            elif PUBLISH == "store":
                tl.atomic_store(flag_ptr, 1)
            elif PUBLISH == "plain":
                tl.store(flag_ptr, 1)
            else:
                tl.atomic_add(flag_ptr, 1)
        else:
            if WAIT == "add":
                while tl.atomic_add(flag_ptr, 0) == 0:
                    pass
            elif WAIT == "add_relaxed":
                while tl.atomic_add(flag_ptr, 0, sem="relaxed") == 0:
                    pass
            elif WAIT == "load":
                while tl.atomic_load(flag_ptr) == 0:
                    pass
            elif WAIT == "volatile":
                while tl.load(flag_ptr, volatile=True) == 0:
                    pass
            elif WAIT == "ticket":
                tl.atomic_add(flag_ptr, 1)
            tl.store(out_ptr, tl.load(data_ptr))

    if (publish == "store" or wait == "load") and not hasattr(tl, "atomic_store"):
        pytest.skip("tl.atomic_load / tl.atomic_store came with Triton 3.9")
    data, flag, out = torch.zeros(1), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    guard = Guard()
    uninstall = guard.install()
    try:
        guard.ranges = [(t.data_ptr(), t.data_ptr() + 4, name, 4) for name, t in (("data", data), ("flag", flag), ("out", out))]
        pass_on[(2,)](data, flag, out, PUBLISH=publish, WAIT=wait)
        problem = guard.race()
    finally:
        uninstall()
    assert out.item() == 42.0  # in order the value is always there: only the ordering check can tell
    if verdict is None:
        assert problem is None
    else:
        assert verdict in str(problem) and ("flag[0]" if publish == "plain" else "data[0]") in str(problem), problem


def test_ordering_checks_atomics_against_the_plain_write_before_them():
    """grader.ordering on hand-made event lists: an atomic add by a program that did not wait is checked against the
    plain store before it even when another program's atomic came between (atomic pairs need no order); a read
    before the other program's write is reported as read too early, unless the program reads it again later."""
    import numpy as np

    from grader.ordering import first_unordered

    def ev(kind, addr, program, sem=None):
        return (kind, np.array([addr], dtype=np.uint64), program, sem, None if sem is None else "GPU")

    acq_rel = "ACQUIRE_RELEASE"
    init_then_add = [ev("w", 100, 0), ev("arw", 200, 0, acq_rel),   # program 0 stores c, raises the flag
                     ev("arw", 200, 1, acq_rel), ev("arw", 100, 1, acq_rel)]  # program 1 waits, adds to c
    label = lambda a: f"m[{a}]"  # noqa: E731
    assert first_unordered(init_then_add, label) is None
    found = first_unordered(init_then_add + [ev("arw", 100, 2, acq_rel)], label)  # program 2 adds without waiting
    assert found.startswith("program 2 用原子操作改写了 m[100]，program 0") and "acquire" in found, found
    assert first_unordered(init_then_add + [ev("arw", 200, 2, acq_rel), ev("arw", 100, 2, acq_rel)], label) is None
    early = first_unordered([ev("arw", 300, 0, acq_rel), ev("r", 100, 1), ev("w", 100, 0)], label)
    assert early.startswith("program 1 在 program 0 写 m[100] 之前就读了它"), early
    # a spin loop reading the data on every turn: only its last read (after the flag) is the one used
    spin = [ev("r", 100, 1), ev("w", 100, 0), ev("r", 100, 1), ev("arw", 200, 0, acq_rel)]
    assert first_unordered(spin + [ev("arw", 200, 1, acq_rel), ev("r", 100, 1)], label) is None
    late = first_unordered(spin + [ev("arw", 300, 1, acq_rel), ev("r", 100, 1)], label)  # waited on another flag
    assert late.startswith("program 1 读取了 m[100]，program 0") and "acquire" in late, late


def test_each_launch_is_interleaved_on_its_own_grid():
    """A launch too big for a thread per program runs in order; it does not switch the interleaving off for the
    case's other launches (an empty launch of 8193 programs beside a racy one hid the race)."""
    from grader import interleave
    from grader.replay import interleaving_plan

    big = interleave.MAX_PROGRAMS + 1
    launch = lambda *grid: {"grid": list(grid)}  # noqa: E731
    assert interleaving_plan([launch(3), launch(big)]) == (True, big)
    assert interleaving_plan([launch(big, 1)]) == (False, big)
    assert interleaving_plan([launch(1), launch(1, 1, 1)]) == (False, None)
    assert interleaving_plan([launch(2, 4)]) == (True, None)


def test_one_store_putting_different_values_into_one_address_is_a_lane_race():
    """Which element of a store lands on an address several of them write is undefined on a GPU: different values
    are reported (the interpreter keeps the last element's), the same value or distinct addresses are not."""
    import numpy as np

    from grader.lanes import Lanes

    def found(addrs, values):
        lanes = Lanes()
        lanes.one_store((0, 0, 0), np.array(addrs), np.arange(len(addrs)), np.array(values), lambda a: f"out[{a}]")
        return lanes.take()

    assert "out[7]" in found([5, 7, 6, 7], np.float32([1, 2, 3, 0]))
    assert found([5, 7, 6, 7], np.float32([1, 2, 3, 2])) is None
    assert found([4, 5, 6, 7], np.float32([0, 0, 0, 0])) is None
    assert found([3, 3], np.float32([np.nan, np.nan])) is None  # the same bits


def test_lanes_of_other_shapes_scalars_and_two_plain_stores_are_races():
    """Hostile round 12 (2026-12-07): a [128] store read back as a [8, 16] block (other layouts: other threads), a
    scalar load of what element 0 stored (every thread loads it), and two plain stores of one address from two
    elements (which lands is undefined) passed the lanes check. Atomics of several elements on one address, and the
    same element reading back its own store, stay no race."""
    import numpy as np

    from grader.lanes import Lanes

    def run(*accesses, threads=2):  # 2: only a scalar is smaller than the program
        lanes, label = Lanes(), (lambda a: f"out[{a}]")
        lanes.threads = threads
        for kind, shape, addrs in accesses:
            addrs = np.array(addrs, dtype=np.int64)
            pos = lanes.position(shape, np.arange(addrs.size))
            if kind == "load":
                lanes.load((0, 0, 0), addrs, pos, label)
            else:
                lanes.store((0, 0, 0), addrs, pos, label, plain=kind == "store")
        return lanes.take()

    four = [10, 11, 12, 13]
    assert run(("store", (4,), four), ("load", (4,), four)) is None
    assert "形状" in run(("store", (4,), four), ("load", (2, 2), four))
    assert "out[10]" in run(("store", (4,), four), ("load", (), [10]))
    # a scalar store is thread 0's, a scalar load every thread's (hostile round 13: no bar.sync between in the PTX)
    assert "标量 load" in run(("store", (), [10]), ("load", (), [10]))
    assert run(("load", (), [10]), ("store", (), [10])) is None  # thread 0 loads before it stores
    assert run(("load", (), [10]), ("load", (), [10])) is None
    assert run(("store", (), [10]), ("store", (), [10])) is None
    # hostile round 14: a [32] block under 4 warps is held by every warp, one copy stores; a [128] block is not
    block = list(range(10, 42))
    assert "每个 warp 都有一份" in run(("store", (32,), block), ("load", (32,), block), threads=128)
    assert run(("store", (128,), list(range(128))), ("load", (128,), list(range(128))), threads=128) is None
    assert "先后写了 out[10]" in run(("store", (4,), four[::-1]), ("store", (4,), four))
    assert run(("store", (4,), four), ("store", (4,), four)) is None
    assert run(("atomic", (4,), [10, 10, 11, 11]), ("atomic", (4,), [11, 10, 10, 11])) is None


def test_lanes_compare_bytes_once_two_sizes_meet_and_pipelined_turns_are_followed():
    """Hostile round 15: a float32 store and a byte of it read back by the next element through an int8 pointer (the
    first addresses differ, the bytes do not); each turn of a tl.range(..., num_stages=3) loop reading what the turn
    before stored (sm_90 issues that load before the store)."""
    import numpy as np

    from grader.lanes import Lanes, Pipelines

    def run(*accesses):
        lanes, label = Lanes(), (lambda a: f"out[{a}]")
        lanes.threads = 4  # blocks of 4: one element a thread
        for kind, size, addrs in accesses:
            addrs = np.array(addrs, dtype=np.int64)
            pos = lanes.position((len(addrs),), np.arange(addrs.size))
            (lanes.load if kind == "load" else lanes.store)((0, 0, 0), addrs, pos, label, size=size)
        return lanes.take()

    words = [100, 104, 108, 112]
    assert run(("store", 4, words), ("load", 1, [w + 3 for w in words])) is None  # each element its own top byte
    assert "out[" in run(("store", 4, words), ("load", 1, [96 + 3, 100 + 3, 104 + 3, 108 + 3]))  # the neighbour's
    assert "out[" in run(("load", 1, [96 + 3, 100 + 3, 104 + 3, 108 + 3]), ("store", 4, words))
    assert run(("store", 2, [100, 102, 104, 106]), ("load", 2, [100, 102, 104, 106])) is None

    def loop(stages, reads_back):
        pipes, label = Pipelines(), (lambda a: f"out[{a}]")
        for turn in pipes.loop(range(3), stages, (0, 0, 0)):
            pipes.load(np.array([10 + turn - reads_back]), 1, label)
            pipes.store(np.array([10 + turn]), 1)
        return pipes.take()

    assert "第 1 轮读取了第 0 轮" in loop(3, 1)
    assert "第 2 轮读取了第 0 轮" in loop(3, 2)
    assert loop(2, 2) is None  # issued one turn early: after the store two turns before
    assert loop(3, 0) is None  # each turn reads its own address before storing it


def test_a_kernel_that_compiles_but_cannot_launch_on_sm90_is_refused():
    """Hostile round 12: a kernel needing 262144 B of shared memory (a [64, 2048] x [2048, 64] dot) and one launched
    with num_warps=64 compile for sm_90, but Triton's launcher raises OutOfResources there; the interpreter ran both."""
    from types import SimpleNamespace

    from grader.replay import launch_limits
    from tcourse.compile_info import H100_SMEM_LIMIT

    def report(shared=0, warps=4, registers=32):
        return SimpleNamespace(shared_bytes=shared, num_warps=warps, registers=registers,
                               fits_sm90=shared <= H100_SMEM_LIMIT)

    assert launch_limits("k", report()) is None
    assert launch_limits("k", report(H100_SMEM_LIMIT, 32, 64)) is None
    assert "262144 B" in launch_limits("k", report(262144))
    assert "2048 个线程" in launch_limits("k", report(warps=64))
    assert "65536" in launch_limits("k", report(warps=16, registers=255))


def test_kernel_source_takes_one_definition_per_name_and_constant_defaults():
    """The replay runs the top-level kernel of each launched name: a second definition of that name (redefined after
    the wrapper bound the first, or nested in a helper) is refused; defaults may be constant expressions and
    constexpr globals defined above."""
    from grader import kernel_source

    kernel = "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr = B):\n    pass\n"
    module, names = kernel_source.extract(["B = tl.constexpr(2 ** 10)\n" + kernel.replace("= B", "= B * 2")])
    assert names == ["k"] and "B = tl.constexpr(2 ** 10)" in module
    for twice in (["B = tl.constexpr(4)\n" + kernel, "B = tl.constexpr(4)\n" + kernel],
                  ["B = tl.constexpr(4)\n" + kernel + "def helper():\n    def k():\n        pass\n    return k\n"]):
        with pytest.raises(kernel_source.NotExtractable, match="定义了 2 次"):
            kernel_source.extract(twice)
    with pytest.raises(kernel_source.NotExtractable, match="不是常数"):
        kernel_source.extract([kernel.replace("= B", "= len('ab')")])


@pytest.mark.parametrize("shape", [(5, 7), (3, 20, 24), (2, 3, 4, 5)])
def test_layouts_reach_every_dimension(shape):
    """``padded`` puts gaps between rows and between the matrices of a batch, ``transposed`` swaps the last two
    dimensions, for any rank (a 3-D "padded" input used to be silently contiguous); the span is exactly what the
    view reaches."""
    import torch

    from grader.buffers import layout_strides

    contig, _ = layout_strides(shape, "contig")
    padded, span = layout_strides(shape, "padded")
    assert padded[-1] == 1 and all(p > c for p, c in zip(padded[:-1], contig[:-1]))
    assert span == sum((n - 1) * s for n, s in zip(shape, padded)) + 1
    swapped, span_t = layout_strides(shape, "transposed")
    assert swapped == torch.empty(*shape[:-2], shape[-1], shape[-2]).transpose(-1, -2).stride()
    assert span_t == torch.Size(shape).numel()


def test_timed_launches_that_skip_the_work_get_no_performance_points():
    """The replay compares the timed launches' outputs with the solution's on the timing shape: an output left as
    it was allocated (a launch that does nothing there) or half computed is named; rounding is not."""
    import torch

    from grader.replay import _perf_mismatch

    want = {"out": torch.randn(4096, dtype=torch.float16)}
    assert _perf_mismatch({"out": torch.full((4096,), float("nan"), dtype=torch.float16)}, want)
    half = want["out"].clone()
    half[2048:] = 0
    assert "out" in _perf_mismatch({"out": half}, want)
    assert _perf_mismatch({"out": (want["out"].float() * (1 + 1e-3)).half()}, want) is None
