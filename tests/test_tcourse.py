"""Unit tests of the helper package: mode detection, sizes, versions, bench refusal, recordings, sm_90 compile."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_py(code: str, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter from a file (Triton's @jit needs real source lines)."""
    e = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TCOURSE_DEVICE", "TCOURSE_RECORD")}
    e.update(env)
    e["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "snippet.py"
        script.write_text(textwrap.dedent(code))
        return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=e, timeout=120)



def test_the_replay_fuses_orders_and_specialises_as_a_gpu_build_does():
    """Hostile round 10 (2026-12-07): thirteen more kernels took a branch only the interpreter takes, each scored full
    marks on CPU. In the replay now: a multiply-add is one correctly rounded fma in float16, float32 and float64, also
    after the product is broadcast, expanded or splat (fma.rn.f16x2 / .f32 / .f64); a float sum is a tree and a
    float cumsum a Hillis-Steele scan (the GPU's shfl.bfly / shfl.up orders), not NumPy's; tl.dot rounds its float32
    accumulator after every MMA step of K; an int argument of 1 is a constant (a GPU launch specialises it); an
    integer division by zero raises (LLVM folds it away)."""
    code = r"""
import tcourse
tcourse.setup(quiet=True)
from tcourse.runtime import prepare_interpreter
prepare_interpreter(grading=True, float_seed=11)
import torch, triton, triton.language as tl

@triton.jit
def k(out_ptr, a, one, zero, W: tl.constexpr):
    z = a * 0.0
    r = tl.zeros([1], tl.float32)
    if W == 0:
        h = (z + 16.015625).to(tl.float16)
        r += (h * h - 256.5).to(tl.float32) * 4096        # fma.rn.f16: 2^-12
    if W == 1:
        q = tl.full([2], 1.000244140625, tl.float32) + z
        p = q * q
        r += tl.max(tl.max(p[:, None] - tl.full([2, 2], 1.00048828125, tl.float32), 1), 0) * 16777216.0
    if W == 2:
        s = z + 1.000244140625
        r += tl.max(s * s - tl.full([2], 1.00048828125, tl.float32), 0) * 16777216.0
    if W == 3:
        i = tl.arange(0, 64)
        v = tl.where(i == 0, 16777216.0, 1.0) + z
        r += tl.max(tl.cumsum(v, 0), 0) > 16777216.0       # a tree scan adds 1 + 1 first
    if W == 4:
        d = z.to(tl.float64) + (1.0 + 2.0 ** -30)
        r += ((d * d - (1.0 + 2.0 ** -29)) * 2.0 ** 60).to(tl.float32)   # fma.rn.f64: 2^-60
    if W == 5:
        x = z + 177.0
        r += (x * 3033169.0 + 9007199254740992.0) == 9007199254740992.0  # one rounding: 2^53 + 2^30
    if W == 6:
        i = tl.arange(0, 16)
        ones = tl.full([16, 32], 1.0, tl.float16)
        b = tl.where((tl.arange(0, 32)[:, None] % 16 == 0), 1.0, 0.0).to(tl.float16) + tl.zeros([32, 16], tl.float16)
        acc = tl.dot(ones, b, tl.full([16, 16], 16777216.0, tl.float32))
        r += tl.max(tl.max(acc, 1), 0) - 16777216.0        # each MMA step's +1 rounds away: 0
    if W == 7:
        r += (one * 2147483647 * 2) > 0                    # the constant 1: Python ints, no int32 wrap
    if W == 8:
        r += ((tl.arange(0, 4) + 7) // zero).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0) + tl.arange(0, 1), r)

for w in range(9):
    o = torch.zeros(16)
    try:
        k[(16,)](o, 1.5, 1, 0, W=w)
        print(w, "|".join(sorted({str(v) for v in o.tolist()})))
    except Exception as e:
        print(w, "ERR", "除以 0" in str(e))
"""
    code += r"""
@triton.jit
def add(a, b):
    return a + b

@triton.jit
def k2(out_ptr, a, W: tl.constexpr):  # hostile round 11
    z = a * 0.0
    i = tl.arange(0, 8)
    r = tl.zeros([1], tl.float32)
    if W == 0:
        r += 1.0 / tl.maximum(z, -z) > 0                      # max.f32(+0, -0) is +0
    if W == 1:
        r += 1.0 / tl.max(tl.where(i == 3, z, -z), 0) > 0      # so is a max reduction with one +0
    if W == 2:
        c0 = z + (1.0 + 1.0 / 4096)
        r += (-(c0 * c0) + 1.0) == -1.0 / 2048                # fma(-c0, c0, 1): -(2^-11 + 2^-24)
    if W == 3:
        v = tl.where(i == 0, 1.0, tl.where((i == 1) | (i == 3), 2.0 ** -24, 0.0)) + z
        r += tl.reduce(v, 0, add) == 1.0                       # 1 + 2^-23 when 2^-24 + 2^-24 come first
    if W == 4:
        j = tl.arange(0, 4)
        v = tl.where(j == 0, 1.0, tl.where(j >= 2, 2.0 ** -24, 0.0)) + z
        s = tl.associative_scan(v, 0, add)
        r += (tl.max(s, 0) - 1.0) * 8388608.0                  # Hillis-Steele: (x2 + x3) + (x0 + x1) = 1 + 2^-23
    if W == 5:
        j = tl.arange(0, 4)
        v = tl.where(j == 0, 1.1, tl.where(j == 1, 1.0, 1.7)) + z
        r += tl.max(tl.cumprod(v, 0), 0) == (1.1 * 1.7) * 1.7  # a scan multiplies 1.7 * 1.7 first
    if W == 6:
        r += (z + 49.0) / 7.0 == 7.0                           # x * rcp(7): never exactly 7
    if W == 7:
        c1 = z + (1.0 + 1.0 / 4096)
        p, _ = tl.split(tl.join(c1 * c1, c1 * c1))
        r += (p - 1.0) == 1.0 / 2048                           # still one fma after join and split
    tl.store(out_ptr + tl.program_id(0) + tl.arange(0, 1), r)

for w in range(8):
    o = torch.zeros(16)
    k2[(16,)](o, 1.5, W=w)
    print(f"b{w}", "|".join(sorted({str(v) for v in o.tolist()})))
"""
    r = run_py(code, TCOURSE_DEVICE="cpu")
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line[:1].isdigit() or line[:1] == "b")
    # 16 programs each: a multiply-add is fused in most of them (a keyed choice per program and operands, as LLVM
    # fuses most pairs, not all), and a user's reduction takes one of two trees
    fused = {"0": "1.0", "1": "1.0", "2": "1.0", "4": "1.0", "5": "0.0", "b2": "0.0", "b7": "0.0"}
    from triton.runtime import interpreter
    if not hasattr(interpreter.interpreter_builder, "create_fneg"):  # Triton 3.6 negates as 0 - x: no fneg to carry
        del fused["b2"]
    assert all(v in got.get(key, "").split("|") for key, v in fused.items()), (got, r.stderr[-3000:])
    assert {k: got.get(k) for k in ("3", "6", "7", "8", "b0", "b1", "b4", "b5", "b6")} == {
        "3": "1.0", "6": "0.0", "7": "1.0", "8": "ERR True", "b0": "1.0", "b1": "1.0", "b4": "1.0", "b5": "0.0",
        "b6": "0.0"}, (got, r.stderr[-3000:])
    assert got.get("b3") in ("0.0", "1.0", "0.0|1.0"), got

def test_the_replay_puts_reorderable_joins_in_a_layout_order_and_refuses_a_gather_out_of_range():
    """Hostile round 13 (2026-12-07): tl.cat(..., can_reorder=True) stored in order, and tl.gather with index -1, were
    right in the interpreter and wrong on sm_90 (the PTX stores z[t] and z[t + 128] side by side; the gather reads
    shared memory outside its buffer). In the replay a cat and a reordering reshape take one order per shapes (two of
    the same shapes agree, so offsets joined alike still match their values), and such a gather raises. Round 14:
    300.0 to int8 is 44 (cvt.rzi.s16, then the low byte; the interpreter saturated to 127), and a shift of an int32
    by a constant 32 raises (LLVM folds it to poison); amounts that vary shift as PTX does at run time."""
    code = r"""
import tcourse
tcourse.setup(quiet=True)
from tcourse.runtime import prepare_interpreter
prepare_interpreter(grading=True, float_seed=5)
import torch, triton, triton.language as tl

@triton.jit
def k(o_ptr, o2_ptr, o3_ptr, BLOCK: tl.constexpr):
    a = tl.arange(0, BLOCK)
    z = tl.cat(a, a + BLOCK, can_reorder=True)
    tl.store(o_ptr + tl.arange(0, 2 * BLOCK), z)
    tl.store(o2_ptr + tl.cat(a, a + BLOCK, can_reorder=True), z)
    r = tl.reshape(tl.arange(0, 2 * BLOCK), (2, BLOCK), can_reorder=True)
    tl.store(o3_ptr + tl.arange(0, 2)[:, None] * BLOCK + a[None, :], r)

@triton.jit
def g(x_ptr, o_ptr, BLOCK: tl.constexpr):
    a = tl.arange(0, BLOCK)
    tl.store(o_ptr + a, tl.gather(tl.load(x_ptr + a), a - 1, 0))

o, o2, o3 = (torch.zeros(16, dtype=torch.int32) for _ in range(3))
k[(1,)](o, o2, o3, BLOCK=8)
print("cat", o.tolist() == list(range(16)), o2.tolist() == list(range(16)), sorted(o.tolist()) == list(range(16)))
print("reshape", o3.tolist() == list(range(16)), sorted(o3.tolist()) == list(range(16)))
try:
    g[(1,)](torch.arange(8.0), torch.zeros(8), BLOCK=8)
    print("gather ran")
except Exception as e:
    print("gather", "[0, 8)" in str(e))

@triton.jit
def narrow(o_ptr, a, S: tl.constexpr):  # hostile round 14: 300.0 to int8, a shift by the operand's width
    i = tl.arange(0, 4)
    tl.store(o_ptr + i, ((a * 0.0 + 300.0).to(tl.int8).to(tl.int32) + (i << S)))

o = torch.zeros(4, dtype=torch.int32)
narrow[(1,)](o, 1.0, S=1)
print("int8", o.tolist())
try:
    narrow[(1,)](o, 1.0, S=32)
    print("shift ran")
except Exception as e:
    print("shift", "[0, 32)" in str(e))

@triton.jit
def vary(o_ptr):  # amounts that vary are shifted at run time: PTX clamps them to the width, as NumPy does
    i = tl.arange(0, 4)
    tl.store(o_ptr + i, (i + 1) << (i * 16))

vary[(1,)](o)
print("vary", o.tolist())
"""
    r = run_py(code, TCOURSE_DEVICE="cpu")
    assert r.stdout.splitlines()[-6:] == ["cat False True True", "reshape False True", "gather True",
                                          "int8 [44, 46, 48, 50]", "shift True", "vary [1, 131072, 0, 0]"], \
        (r.stdout, r.stderr[-3000:])


def test_setup_switches_interpreter_on_before_triton_loads():
    r = run_py("""
        import os, sys, tcourse
        assert "triton" not in sys.modules and "torch" not in sys.modules, "importing tcourse must load neither"
        rt = tcourse.setup()
        import triton
        from triton.runtime.interpreter import InterpretedFunction
        @triton.jit
        def k(x): pass
        print("MODE", rt.mode, rt.device, os.environ["TRITON_INTERPRET"], isinstance(k, InterpretedFunction))
    """)
    assert r.returncode == 0, r.stderr
    assert "MODE cpu cpu 1 True" in r.stdout
    assert "CPU interpreter (TRITON_INTERPRET=1)" in r.stdout  # the environment table
    assert "解释器下的 bf16 结果是错的" in r.stdout


def test_setup_skips_only_the_overflow_checks_the_interpreter_throws_away():
    """setup() switches the interpreter's int-overflow check off (tcourse.runtime.skip_discarded_overflow_checks):
    results and errors stay as they were, and a Triton whose interpreter would keep the check is left alone."""
    r = run_py("""
        import dataclasses, tcourse
        tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        from triton.runtime import interpreter
        from tcourse.runtime import skip_discarded_overflow_checks
        b = interpreter.interpreter_builder
        print("AFTER_SETUP", b.options.debug, b.options.sanitize_overflow)

        @triton.jit
        def scaled_index(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + i, mask=i < n)
            tl.store(out_ptr + i, v * 65536 + i * 40000, mask=i < n)   # int32: wraps past 2^31

        x = torch.arange(40000, 40100, dtype=torch.int32)
        outs = {}
        for check in (False, True):
            b.options = dataclasses.replace(b.options, sanitize_overflow=check)
            out = torch.empty_like(x)
            scaled_index[(4,)](x, out, x.numel(), BLOCK=32)
            outs[check] = out
        print("SAME", torch.equal(outs[False], outs[True]), int((outs[True] < 0).sum()))
        b.options = dataclasses.replace(b.options, debug=True, sanitize_overflow=True)
        print("KEPT", skip_discarded_overflow_checks(), b.options.sanitize_overflow)
        b.options = dataclasses.replace(b.options, debug=False)
        print("SKIPPED", skip_discarded_overflow_checks(), b.options.sanitize_overflow)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert "SAME True" in r.stdout and int(lines[lines.index("SAME") + 2]) > 0, r.stdout  # it did overflow, silently
    assert "AFTER_SETUP False False" in r.stdout, r.stdout
    assert "KEPT False True" in r.stdout and "SKIPPED True False" in r.stdout, r.stdout


def test_setup_warns_when_triton_was_imported_first():
    r = run_py("import triton, tcourse; tcourse.setup()")
    assert r.returncode == 0, r.stderr
    assert "triton 在 tcourse.setup() 之前已被 import" in r.stdout


def test_forcing_cuda_without_a_gpu_is_a_clear_error():
    r = run_py("import tcourse; tcourse.setup()", TCOURSE_DEVICE="cuda")
    assert r.returncode != 0
    assert "TCOURSE_DEVICE=cuda，但这台机器上 torch.cuda.is_available() 为 False" in r.stderr


def test_bad_device_value_is_rejected():
    r = run_py("import tcourse; tcourse.setup()", TCOURSE_DEVICE="tpu")
    assert "TCOURSE_DEVICE 只能是 auto、cpu 或 cuda" in r.stderr


def test_pick_sizes_by_mode():
    from tcourse.runtime import Runtime

    assert Runtime("cpu", None, {}).pick(cpu=1000, gpu=2**24) == 1000
    assert Runtime("gpu", None, {}).pick(cpu=1000, gpu=2**24) == 2**24


def test_known_bad_triton36_with_numpy24_is_no_longer_bad():
    """Triton 3.6's interpreter took int() of a one-element array for a loop bound, which NumPy 2.4 refuses;
    tcourse.setup() patches that (tests/test_version_floor.py runs chapter 4 on the pair), so no warning."""
    from tcourse.runtime import known_bad

    assert not any("上界是张量" in w for w in known_bad("cpu", {"triton": "3.6.0", "numpy": "2.4.6"}, False))
    assert known_bad("gpu", {"triton": "3.6.0", "numpy": "2.5.2"}, False) == []


def test_out_of_range_versions_are_reported(tmp_path):
    from tcourse import versions

    req = tmp_path / "requirements.txt"
    req.write_text("torch>=2.11,<2.16  # comment\ntriton>=3.6,<3.10\n")
    assert versions.out_of_range({"torch": "2.13.0+cpu", "triton": "3.9.0"}, req) == []
    msgs = versions.out_of_range({"torch": "2.10.0", "triton": "3.10.1"}, req)
    assert len(msgs) == 2 and "torch 2.10.0 不在测试过的版本范围" in msgs[0]


def test_installed_versions_are_inside_requirements():
    """The environment the tests run in is the one CI promises."""
    from tcourse import versions

    assert versions.out_of_range(versions.installed()) == []


def test_bench_refuses_to_time_on_cpu(monkeypatch):
    """monkeypatch puts TRITON_INTERPRET back as it was: a module that ran tcourse.setup() (which sets it on
    CPU) before this test still needs it afterwards (test_kernels_frontier's sm_90 compiles did)."""
    from tcourse import bench

    with monkeypatch.context() as m:
        m.setenv("TRITON_INTERPRET", "1")
        with pytest.raises(bench.NeedsGPU, match="interpreter"):
            bench.compare(lambda: None, lambda: None, nbytes=1)
        with pytest.raises(bench.NeedsGPU):
            bench.time_fn(lambda: None)
        with pytest.raises(bench.NeedsGPU):
            bench.gpu_samples(lambda: None)
        with pytest.raises(bench.NeedsGPU, match="interpreter"):
            bench.compare(lambda: None, lambda: None, timer="kernel")
        m.delenv("TRITON_INTERPRET")
        with pytest.raises(bench.NeedsGPU, match="no CUDA GPU"):
            bench.hbm_ceiling_gbs()


def test_timing_statistics_and_comparison_units():
    from tcourse.bench import Comparison, Timing

    t = Timing.from_samples([1.0, 2.0, 3.0, 4.0, 100.0])
    assert t.median_ms == 3.0 and t.p20_ms < t.median_ms < t.p80_ms and t.n == 5
    c = Comparison(Timing(0.5, 0.4, 0.6, 10), Timing(1.0, 0.9, 1.1, 10), nbytes=10**9, ceiling=4000.0)
    assert c.speedup == 2.0 and c.unit == "GB/s"
    assert c.rate(c.ours) == pytest.approx(2000.0)
    assert c.as_dict()["ours_of_ceiling"] == pytest.approx(0.5)
    assert "speedup vs torch: 2.0×（±15%）" in str(c)  # digits as the spread allows (tcourse.numbers)


def test_recordings_round_trip_and_refuse_cpu(tmp_path, monkeypatch, capsys):
    from tcourse import recorded
    from tcourse.runtime import GPUInfo, Runtime

    monkeypatch.setattr(recorded, "RESULTS", tmp_path)
    cpu = Runtime("cpu", None, {"torch": "2.13.0"})
    with pytest.raises(ValueError, match="only GPU runs"):
        recorded.save("x", {"a": 1}, cpu)
    assert cpu.live_or_recorded("x", lambda: 1 / 0) is None  # no recording yet: a note, not a crash
    assert "还没有 x 的 GPU 记录" in capsys.readouterr().out

    gpu = Runtime("gpu", GPUInfo("NVIDIA H200", (9, 0), 132, 139.8, "580.1"), {"torch": "2.11.0", "triton": "3.6.0"})
    monkeypatch.setenv("TCOURSE_RECORD", "1")
    assert gpu.live_or_recorded("x", lambda: {"gbs": [1, 2]}) == {"gbs": [1, 2]}
    doc = json.loads((tmp_path / "h200" / "x.json").read_text())
    assert doc["meta"]["device"] == "NVIDIA H200" and doc["meta"]["triton"] == "3.6.0"
    assert cpu.live_or_recorded("x", lambda: 1 / 0) == {"gbs": [1, 2]}
    assert "NVIDIA H200" in capsys.readouterr().out  # the label is printed with the data


def test_compile_for_sm90_on_a_cpu_machine():
    r = run_py("""
        import tcourse; tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        from tcourse.compile_info import compile_for_sm90
        @triton.jit
        def add(x, y, z, n, BLOCK: tl.constexpr):
            o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = o < n
            tl.store(z + o, tl.load(x + o, mask=m) + tl.load(y + o, mask=m), mask=m)
        x = torch.empty(1024)
        rep = compile_for_sm90(add, x, x, x, 1000, BLOCK=1024, num_warps=4)
        print(rep.stages(), rep.registers, rep.spills, rep.shared_bytes, rep.fits_sm90)
        aligned = compile_for_sm90(add, x, x, x, 1024, BLOCK=1024, num_warps=4)
        print("ld.global.v4" in rep.asm["ptx"], "ld.global.v4" in aligned.asm["ptx"], "LDG.E.128" in aligned.sass())
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-2].startswith("['ttir', 'ttgir', 'llir', 'ptx', 'cubin']")
    regs = int(lines[-2].split()[-4])
    assert 8 <= regs <= 255 and lines[-2].endswith("0 0 True")
    # n % 16 != 0: the mask may cut a vector, so loads stay scalar; n % 16 == 0 is specialised like
    # a real launch does, and the loads become 16 bytes wide.
    assert lines[-1] == "False True True"


def test_compile_for_sm90_unspecialised_compiles_the_branch_an_int_1_would_fold():
    """The grader compiles with ``specialize=False``: an int argument equal to 1 stays a runtime value, as in the
    interpreter, so a branch that only the interpreter takes is compiled too (and Python there is refused)."""
    r = run_py("""
        import tcourse; tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        from tcourse.compile_info import compile_for_sm90
        @triton.jit
        def k(x, one, BLOCK: tl.constexpr):
            if isinstance(one, tl.tensor):
                g = (i for i in range(1))
            tl.store(x + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32))
        x = torch.empty(64)
        print("SPECIALISED", compile_for_sm90(k, x, 1, BLOCK=64).fits_sm90)
        try:
            compile_for_sm90(k, x, 1, BLOCK=64, specialize=False)
            print("UNSPECIALISED compiled")
        except Exception as e:
            print("UNSPECIALISED refused", type(e).__name__)
    """)
    assert r.returncode == 0, r.stderr
    assert "SPECIALISED True" in r.stdout and "UNSPECIALISED refused" in r.stdout, r.stdout


def test_compile_for_sm90_rejects_wrong_arity():
    from tcourse.compile_info import compile_for_sm90

    def k(x, n, BLOCK):  # plain function: the arity check happens before compiling
        pass

    with pytest.raises(TypeError, match="takes runtime args"):
        compile_for_sm90(k, "*fp32", BLOCK=16)


def test_nbtools_normalizes_ids_and_metadata(tmp_path):
    import nbformat

    from tcourse import nbtools

    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"state": {}}
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("# t")]
    nb.cells[0].metadata["collapsed"] = True
    nb.cells[0].id = "bad id with spaces"
    p = tmp_path / "demo.ipynb"
    p.write_text(nbformat.writes(nb))
    assert nbtools.main(["check", str(p)]) == 1
    assert nbtools.main(["normalize", str(p)]) == 0
    assert nbtools.main(["check", str(p)]) == 0
    out = nbformat.read(p, as_version=4)
    assert [c.id for c in out.cells] == ["demo-00", nb.cells[1].id]
    assert "widgets" not in out.metadata and out.cells[0].metadata == {}


def test_compile_after_interpreted_kernels_ran():
    """Triton 3.6-3.9's interpreter leaves triton.language patched and its library kernels interpreted;
    compile_for_sm90 must still give real sm_90 reports afterwards, and the interpreter must still work."""
    r = run_py("""
        import tcourse; tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        from tcourse.compile_info import compile_for_sm90, compile_many

        @triton.jit
        def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
            row = tl.program_id(0)
            cols = tl.arange(0, BLOCK_SIZE)
            x = tl.load(in_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
            num = tl.exp(x - tl.max(x, axis=0))
            tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)

        @triton.jit
        def dot_kernel(a_ptr, c_ptr, K, stride_k, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
            for k0 in range(0, tl.cdiv(K, BLOCK)):
                a = tl.load(a_ptr + offs[:, None] * K + (k0 * BLOCK + offs[None, :]) * stride_k,
                            mask=k0 * BLOCK + offs[None, :] < K, other=0.0)
                acc = tl.dot(a, tl.trans(a), acc)
            tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)

        x = torch.randn(5, 100); y = torch.empty_like(x)
        softmax_kernel[(5,)](y, x, 100, 100, BLOCK_SIZE=128)       # leaves tl.core patched (upstream)
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        rep = compile_for_sm90(softmax_kernel, y, x, 100, 100, BLOCK_SIZE=128, num_warps=4)
        wide = compile_for_sm90(softmax_kernel, y, x, 16384, 16384, BLOCK_SIZE=16384, num_warps=2)
        good, bad = compile_many(dot_kernel, [(("*fp16", "*fp32", 256, 1), dict(BLOCK=64, num_stages=3)),
                                              (("*fp16", "*fp32", 256, 1), dict(BLOCK=100))])
        softmax_kernel[(5,)](y, x, 100, 100, BLOCK_SIZE=128)       # the interpreter still works afterwards
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        print("RESULT", "tt.reduce" in rep.asm["ttir"], rep.registers > 0, wide.spills > 0,
              "HGMMA" in good.sass(), "stride_k" not in good.asm["ttir"], isinstance(bad, str))
    """, TCOURSE_DEVICE="cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    # reductions compile; spills (ptxas: STACK) are counted; the K loop uses sm_90's wgmma; the unit
    # stride was specialised to a constant as a real launch does; a bad config is a message, not a crash.
    assert "RESULT True True True True True True" in r.stdout, r.stdout[-2000:]


def test_a_float16_accumulator_rounds_every_16_products_along_k_as_on_a_gpu():
    """setup() makes the interpreter's tl.dot into a float16 accumulator round every MMA step (16 along K), as a GPU
    does: products of +-1e4 whose result is 0 overflow there once K passes one step (NumPy's one matmul rounded once
    gave 0, right on a laptop and wrong on the GPU). A float32 accumulator is untouched, and setting it up twice wraps
    the dot once."""
    r = run_py("""
        import tcourse
        tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        from triton.runtime import interpreter
        from tcourse.runtime import round_float16_accumulators_along_k

        @triton.jit
        def dot16(a_ptr, b_ptr, o_ptr, K: tl.constexpr, HALF_ACC: tl.constexpr):
            r, k = tl.arange(0, 16), tl.arange(0, K)
            a = tl.load(a_ptr + r[:, None] * K + k[None, :])
            b = tl.load(b_ptr + k[:, None] * 16 + r[None, :])
            c = tl.dot(a, b, out_dtype=tl.float16) if HALF_ACC else tl.dot(a, b)
            tl.store(o_ptr + r[:, None] * 16 + r[None, :], c)

        for K in (16, 64):
            a = torch.cat([torch.full((16, K // 2), 100.0), torch.full((16, K // 2), -100.0)], 1).half()
            b = torch.full((K, 16), 100.0).half()
            for half in (False, True):
                o = torch.empty(16, 16, dtype=torch.float16 if half else torch.float32)
                dot16[(1,)](a, b, o, K, half)
                print("K", K, half, bool(o.isfinite().all()), float(o.float().nan_to_num(7).abs().max()))
        dot = interpreter.interpreter_builder.create_dot
        print("ONCE", round_float16_accumulators_along_k(), interpreter.interpreter_builder.create_dot is dot)
    """)
    assert r.returncode == 0, r.stderr
    assert "K 16 False True 0.0" in r.stdout and "K 64 False True 0.0" in r.stdout, r.stdout
    assert "K 16 True True 0.0" in r.stdout, r.stdout  # one MMA step: its 16 products are summed before rounding
    assert "K 64 True False" in r.stdout, r.stdout  # the first step's 8 products of +1e4 pass 65504
    assert "ONCE True True" in r.stdout, r.stdout


def test_the_interpreter_computes_what_a_gpu_build_does():
    """Each line is a kernel that took one branch on a CPU and the other on a GPU (hostile round, 2026-12-07: 17/17
    on ex01 with a+x stored on the GPU side): after tcourse.setup() the interpreter gives the GPU's value (checked
    against PTX semantics: signed % and // truncate toward zero, int32 wraps, cvt.rzi saturates, NaN -> 0, a float
    argument is an fp32 scalar, an int in [2^31, 2^32) an i64; tl.dot reads float32 as TF32, truncated, measured on an
    H100) or refuses where a GPU build computes element-wise."""
    code = r"""
import tcourse
tcourse.setup(quiet=True)
from tcourse.runtime import prepare_interpreter
prepare_interpreter(grading=True)
import torch, triton, triton.language as tl

@triton.jit
def k(out_ptr, a, big, W: tl.constexpr):
    r = tl.zeros([1], tl.float32)
    if W == 0:
        for i in range(0, 1):
            r += (i - 1) % 2           # a loop variable is an int32
    if W == 1:
        c, d = -7, 0
        r += c // 2 + d                # so is each element of a literal tuple
    if W == 2:
        e: tl.int32 = -7
        r += e // 2                    # and an annotated value
    if W == 3:
        for i in range(65536, 65537):
            r += i * i                 # int32 wraps
    if W == 4:
        for i in tl.static_range(0, 1):
            r += (i - 1) % 2           # a static_range variable is a constant: Python's %
    if W == 5:
        x = tl.full([1], 2.0, tl.float16)
        r += (a * x).dtype == tl.float32   # a float argument is an fp32 scalar
    if W == 6:
        r += (big + big).to(tl.float32) / 1e9
    if W == 7:
        r += tl.full([1], 3e9, tl.float32).to(tl.int32).to(tl.float32) / 1e9
    if W == 8:
        r += tl.full([1], float("nan"), tl.float32).to(tl.int32)
    if W == 9:
        v = tl.full([1], 1.5, tl.float32).to(tl.bfloat16)
        r += (v + v).to(tl.float32)    # bfloat16 arithmetic on values (the replay's)
    if W == 10:
        offs = tl.arange(0, 4)
        r += tl.sum(((offs < 2) and (offs < 3)).to(tl.float32))
    if W >= 11:
        one = tl.full([16, 16], 1.0 + 1.0 / 4096, tl.float32)
        sixteenth = tl.full([16, 16], 0.0625, tl.float32)
        d = tl.dot(one, sixteenth) if W == 11 else tl.dot(one, sixteenth, input_precision="ieee")
        r += (tl.max(tl.max(d, 1), 0) - 1.0) * 4096   # the tensor cores read TF32: 1 + 2^-12 is 1.0
    tl.store(out_ptr + tl.arange(0, 1), r)

for w in range(13):
    o = torch.zeros(1)
    try:
        k[(1,)](o, 1.5, 3_000_000_000, W=w)
        print(w, round(o.item(), 4))
    except Exception as e:
        print(w, "ERR", "没有真假值" in str(e))
"""
    r = run_py(code, TCOURSE_DEVICE="cpu")
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line[:1].isdigit())
    assert got == {"0": "-1.0", "1": "-3.0", "2": "-3.0", "3": "0.0", "4": "1.0", "5": "1.0", "6": "6.0",
                   "7": "2.1475", "8": "0.0", "9": "3.0", "10": "ERR True", "11": "0.0", "12": "1.0"}, (got, r.stderr[-2000:])


def test_the_replay_computes_float32_as_a_gpu_build_does():
    """Hostile round 9 (2026-12-07): eleven kernels told the interpreter from a GPU by a float result and scored full
    marks on CPU. In the replay (prepare_interpreter(grading=True)) each detector now reads what sm_90 code computes
    (the PTX Triton emits: ex2/sqrt/rsqrt .ftz, fma.rn.f32 for a multiply-add, frem as div.rn + cvt.rzi + fma,
    cvt.rn.bf16.f32, cvt.rn.satfinite.e4m3x2.f32, cvt.rmi.ftz; round 12: cvt.rn.bf16.f64, fp8 from bfloat16, a clamp of
    signed zeros); approximate results move by at most 2 ulp, the
    same operands giving the same value in two runs; a learner's notebook (grading=False) keeps NumPy's values."""
    code = r"""
import os
import tcourse
tcourse.setup(quiet=True)
from tcourse.runtime import prepare_interpreter
if os.environ["MODE"] == "grading":
    prepare_interpreter(grading=True, float_seed=7)
import numpy as np, torch, triton, triton.language as tl

@triton.jit
def k(out_ptr, a, W: tl.constexpr):
    z = a * 0.0
    r = tl.zeros([1], tl.float32)
    if W == 0:
        r += tl.exp2(z - 130.0) > 0                    # ex2.approx.ftz: 2^-130 is 0
    if W == 1:
        r += tl.sqrt(z + 1e-40) > 0                    # sqrt.approx.ftz of a subnormal: 0
    if W == 2:
        r += tl.math.rsqrt(z + 1e-40) > 1e30           # rsqrt.approx.ftz: inf
    if W == 3:
        p = z + 1.000244140625
        r += (p * p - 1.00048828125) * 16777216.0      # one fma: 2^-24, not 0
    if W == 4:
        r += (z + 1e10) % 3.0                          # fma(-trunc(x / y), y, x): 256
    if W == 5:
        r += (z + 17.0).to(tl.float8e4nv).to(tl.float32)    # a tie: to even, 16
    if W == 6:
        r += (z + 1000.0).to(tl.float8e4nv).to(tl.float32)  # satfinite: 448
    if W == 7:
        r += (z + 1.005859375).to(tl.bfloat16).to(tl.float32) * 128   # to nearest: 1.0078125
    if W == 8:
        r += tl.floor(z - 1e-40)                       # cvt.rmi.ftz: -0 (r is 0), not -1
    if W == 9:
        r += tl.exp(z + 88.0) == 1.6516362549940018e38  # NumPy's float32 exp(88): never relied on
    if W == 10:
        r += ((z + 96.0) / 32.0 == 3.0).to(tl.float32) + (tl.exp2(z + 3.0) == 8.0).to(tl.float32)  # exact: kept
    if W == 11:
        r += (z.to(tl.float64) + 1.0039072036743164).to(tl.bfloat16).to(tl.float32) * 128  # cvt.rn.bf16.f64: 1.0078125
    if W == 12:
        r += (z + 1000.0).to(tl.bfloat16).to(tl.float8e4nv).to(tl.float32)  # from bfloat16 too: satfinite, 448
    if W == 13:
        r += tl.where(1.0 / tl.clamp(-z, z, z + 1.0) > 0, 1.0, 0.0)  # max(-0, +0) is +0 on sm_90
    tl.store(out_ptr + tl.program_id(0) + tl.arange(0, 1), r)

@triton.jit
def approx(x_ptr, o_ptr, n, OP: tl.constexpr):
    i = tl.arange(0, 1024)
    x = tl.load(x_ptr + i, mask=i < n)
    if OP == 0:
        y = tl.exp(x)
    elif OP == 1:
        y = x / (x + 3.0)
    else:
        y = tl.sqrt(tl.abs(x))
    tl.store(o_ptr + i, y, mask=i < n)

for w in range(14):
    o = torch.zeros(16)
    k[(16,)](o, 1.5, W=w)
    print(w, "|".join(sorted({str(v) for v in o.tolist()})))
x = torch.randn(1000) * 3
for op in range(3):
    o1, o2 = torch.zeros(1000), torch.zeros(1000)
    approx[(1,)](x, o1, 1000, OP=op)
    approx[(1,)](x, o2, 1000, OP=op)
    # correctly rounded float32 (NumPy's; torch's vectorised sqrt is not); exp as sm_90 computes it: ex2 of
    # x * log2(e) rounded to float32
    xn = x.numpy()
    gpu_exp = np.exp2((xn * np.float32(1.4426950408889634)).astype(np.float64)).astype(np.float32)
    ref = torch.from_numpy([gpu_exp, xn / (xn + np.float32(3.0)), np.sqrt(np.abs(xn).astype(np.float64)).astype(np.float32)][op])
    ulps = (o1.view(torch.int32).long() - ref.view(torch.int32).long()).abs()
    print(f"op{op}", bool((o1 == o2).all()), int(ulps.max()), bool((ulps > 0).any()))
"""
    gpu = {"0": "0.0", "1": "0.0", "2": "1.0", "3": "1.0", "4": "256.0", "5": "16.0", "6": "448.0", "7": "129.0",
           "8": "0.0", "9": "0.0", "10": "2.0", "11": "129.0", "12": "448.0", "13": "1.0"}
    r = run_py(code, TCOURSE_DEVICE="cpu", MODE="grading")
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert "1.0" in got.get("3", "").split("|"), got  # fused in most of the 16 programs (a keyed choice)
    assert {k: got.get(k) for k in gpu if k != "3"} == {k: v for k, v in gpu.items() if k != "3"}, (got, r.stderr[-2000:])
    for op, most in (("op0", 2), ("op1", 4), ("op2", 2)):  # the same in both runs, a few ulp away, not all NumPy's
        same, ulps, moved = got.get(op, "False 99 False").split()
        assert same == moved == "True" and 1 <= int(ulps) <= most, (op, got)  # x / y is x * rcp(y): up to 4
    r = run_py(code, TCOURSE_DEVICE="cpu", MODE="notebook")
    got = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert got["3"] == "0.0" and got["8"] == "-1.0" and got["op1"] == "True 0 False", (got, r.stderr[-2000:])

