"""The grader on CPU: solutions get full marks, stubs get 0, wrong variants are caught with the right message,
unusable inputs exit 2, hangs and crashes are verdicts and the batch goes on.

Wrong variants are made here from the solution notebooks by small string replacements; each
replacement must apply (a variant that silently equals the solution would make its test pointless).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from grader import build, cli, compare, grade, registry, sandbox
from grader.buffers import OUT_SENTINEL, guard_size
from grader.plan import make_plan

REPO = Path(__file__).resolve().parent.parent
GRADED = [e for e, ex in registry.exercises().items() if not ex.written]


def _cells(ex_id: str, folder: str = "solutions") -> dict:
    return json.loads((REPO / folder / f"{ex_id}.ipynb").read_text(encoding="utf-8"))


def make_variant(tmp_path: Path, ex_id: str, replacements, name: str = "variant") -> Path:
    nb = _cells(ex_id)
    for old, new in replacements:
        hits = 0
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if old in src:
                cell["source"] = src.replace(old, new)
                hits += 1
        assert hits, f"replacement does not apply to {ex_id}: {old!r}"
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return path


def run(path: Path, **kw) -> grade.Result:
    kw.setdefault("cell_timeout", 60)
    return grade.grade(path, "cpu", seed=kw.pop("seed", 7), **kw)


@pytest.mark.parametrize("ex_id", GRADED)
def test_solution_gets_full_marks(ex_id):
    r = run(REPO / "solutions" / f"{ex_id}.ipynb")
    bad = [(t.name, t.status, t.message) for t in r.tests if t.status not in ("passed", "skipped")]
    assert not bad
    assert r.score == r.max_score > 0
    assert all(t.status == "skipped" for t in r.tests if t.status != "passed")  # only GPU-only tests
    # the replay interleaves the programs of launches with atomics only; without, the race check shows order is moot
    said = " ".join(t.message for t in r.tests)
    nb = json.loads((REPO / "solutions" / f"{ex_id}.ipynb").read_text(encoding="utf-8"))
    atomics = any("tl.atomic_" in "".join(c["source"]) for c in nb["cells"]
                  if c.get("metadata", {}).get("tcourse", {}).get("role") == "solution")
    assert ("program 交错运行也通过" in said) == atomics and ("谁先谁后结果都一样" in said) != atomics, said[:300]


def test_interpreter_mask_dtype_error_says_what_to_write():
    """Triton 3.9's interpreter refuses a mask made of a block comparison & a Python bool (a range loop's index):
    the message says so and how to write it (the same kernel compiles on a GPU)."""
    last = "triton.runtime.errors.InterpreterError: ValueError('mask has unsupported dtype')"
    msg = compare._error_message(f"Traceback (most recent call last):\n{last}\n")
    assert msg.startswith(f"调用你的函数时出错：{last}") and "if k < K:" in msg and "rm * 0 + k < K" in msg


@pytest.mark.parametrize("ex_id", GRADED)
def test_untouched_exercise_scores_zero(ex_id):
    r = run(REPO / "exercises" / f"{ex_id}.ipynb")
    assert r.score == 0 and r.max_score > 0
    assert {t.status for t in r.tests} <= {"error", "failed", "skipped"}
    assert any("还没有实现" in t.message for t in r.tests)


_AXPY_UNMASKED = [("x = tl.load(x_ptr + offs, mask=mask)", "x = tl.load(x_ptr + offs)"),
                  ("y = tl.load(y_ptr + offs, mask=mask)", "y = tl.load(y_ptr + offs)"),
                  ("tl.store(out_ptr + offs, a * x + y, mask=mask)", "tl.store(out_ptr + offs, a * x + y)")]
_ATTN_LAUNCH = """    attention_kernel[grid](q, k, v, out, S, H, sm_scale, q.stride(0), q.stride(1), q.stride(2),
                           CAUSAL=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_D=D)"""

# id: (exercise, replacements, words every one of which some non-passed test message must contain)
VARIANTS = {
    "axpy-no-tail-mask": ("ex01_axpy", _AXPY_UNMASKED, ["越界写"]),
    "axpy-wrong-offset": ("ex01_axpy", [("offs = pid * BLOCK_SIZE + tl.arange", "offs = pid + tl.arange")], ["NaN", "没有被写"]),
    "axpy-forgot-a": ("ex01_axpy", [("a * x + y, mask=mask)", "x + y, mask=mask)")], ["超出容差", "最大误差"]),
    "axpy-torch": ("ex01_axpy", [("axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)", "out.copy_(a * x + y)")],
                   ["调用了 torch.", "Triton kernel"]),
    "axpy-numpy-no-launch": ("ex01_axpy", [("axpy_kernel[grid](x, y, out, a, n, BLOCK_SIZE=BLOCK_SIZE)",
                                            "out[:] = torch.from_numpy(a * x.numpy() + y.numpy())")], ["不允许"]),
    "axpy-writes-input": ("ex01_axpy", [("    tl.store(out_ptr + offs, a * x + y, mask=mask)",
                                         "    tl.store(y_ptr + offs, x, mask=mask)\n    tl.store(out_ptr + offs, a * x + y, mask=mask)")],
                          ["输入 y 在调用后被修改了"]),
    "axpy-returns-new-tensor": ("ex01_axpy", [("    return out", "    return out.clone()")], ["没有返回传入的"]),
    "softmax-other-zero": ("ex02_softmax", [('other=float("-inf")', "other=0.0")], ["超出容差", "other=-inf"]),
    "softmax-unstable": ("ex02_softmax", [("z = x - tl.max(x, axis=0)", "z = x")], ["大数值", "溢出"]),
    "softmax-row-stride": ("ex02_softmax", [("row * stride_x + cols", "row * n_cols + cols")], ["行间有空隙", "stride(0)"]),
    "softmax-torch": ("ex02_softmax", [("softmax_kernel[(n_rows,)](x, out, n_cols, x.stride(0), out.stride(0), BLOCK_SIZE=BLOCK_SIZE)",
                                        "out.copy_(torch.softmax(x.float(), dim=-1))")], ["不允许使用 torch.softmax"]),
    "matmul-no-k-mask": ("ex03_matmul", [("mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0", "mask=rm[:, None] < M, other=0.0"),
                                         ("mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0", "mask=rn[None, :] < N, other=0.0")],
                         ["K 两个方向 mask"]),
    "matmul-assume-contiguous": ("ex03_matmul", [("rk[:, None] * stride_bk + rn[None, :] * stride_bn", "rk[:, None] * N + rn[None, :]")],
                                 ["b 是转置视图", "stride"]),
    "matmul-torch": ("ex03_matmul", [("    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n",
                                      "    out.copy_(a @ b)\n    return out\n")],
                     ["调用了 torch.Tensor.__matmul__"]),
    "swizzle-no-min": ("ex04_group_m_swizzle", [("group_size_m = min(num_pid_m - first_pid_m, GROUP_M)", "group_size_m = GROUP_M")],
                       ["最后一组不满", "group_size_m = min"]),
    "swizzle-row-major": ("ex04_group_m_swizzle", [("    return pid_m, pid_n", "    return pid // num_pid_n, pid % num_pid_n")],
                          ["num_pid_m 是 GROUP_M 的倍数", "组内按列走"]),
    "swizzle-kernel-swapped": ("ex04_group_m_swizzle", [("tl.store(out_ptr + pid * 2, pid_m)", "tl.store(out_ptr + pid * 2, pid_n)")],
                               ["元素不对"]),
    "swizzle-python-no-launch": ("ex04_group_m_swizzle", [(
        "swizzle_kernel[(num_pid_m * num_pid_n,)](out, num_pid_m, num_pid_n, GROUP_M=GROUP_M)",
        "out[:] = torch.tensor([pid_to_tile(p, num_pid_m, num_pid_n, GROUP_M) for p in range(num_pid_m * num_pid_n)], device=out.device)")],
        ["没有启动任何 Triton kernel"]),
    "layernorm-masked-lanes-in-var": ("ex05_layernorm", [("xc = tl.where(mask, x - mean, 0.0)", "xc = x - mean")],
                                      ["tl.where(mask, x - mean, 0.0)"]),
    "layernorm-unstable-var": ("ex05_layernorm", [("var = tl.sum(xc * xc, axis=0) / n_cols",
                                                   "var = tl.sum(x * x, axis=0) / n_cols - mean * mean")], ["均值很大", "数值不稳定"]),
    "layernorm-torch": ("ex05_layernorm", [("    n_rows, n_cols = x.shape\n", "    n_rows, n_cols = x.shape\n    out.copy_("
                                            "torch.nn.functional.layer_norm(x, (n_cols,), weight, bias, eps))\n    return out\n")],
                        ["不允许使用 torch.nn.functional.layer_norm"]),
    "transpose-assume-contiguous": ("ex06_transpose", [("rm[:, None] * stride_xm + rn[None, :] * stride_xn", "rm[:, None] * N + rn[None, :]")],
                                    ["x.stride(0)"]),
    "transpose-one-mask": ("ex06_transpose", [("mask = (rm[:, None] < M) & (rn[None, :] < N)", "mask = rm[:, None] < M")], ["越界写"]),
    "transpose-torch": ("ex06_transpose", [("    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))\n",
                                            "    out.copy_(x.t())\n    return out\n")], ["没有启动任何 Triton kernel"]),
    "attention-no-rescale": ("ex07_flash_attention", [("l_i = l_i * alpha + ", "l_i = l_i + "),
                                                      ("acc = acc * alpha[:, None] + ", "acc = acc + ")], ["alpha"]),
    "attention-no-causal-mask": ("ex07_flash_attention", [("valid = valid & (rn[None, :] <= rm[:, None])", "valid = valid")],
                                 ["causal=True"]),
    "attention-unstable": ("ex07_flash_attention", [("m_new = tl.maximum(m_i, tl.max(s, axis=1))",
                                                     "m_new = tl.zeros((BLOCK_M,), tl.float32)")], ["大数值", "溢出"]),
    "attention-torch": ("ex07_flash_attention", [(_ATTN_LAUNCH, "    out.copy_(torch.nn.functional.scaled_dot_product_attention("
                                                               "q, k, v, is_causal=causal))")],
                        ["不允许使用 torch.nn.functional.scaled_dot_product_attention"]),
}


@pytest.mark.parametrize("vid", sorted(VARIANTS))
def test_wrong_variant_is_caught(tmp_path, vid):
    ex_id, repl, words = VARIANTS[vid]
    r = run(make_variant(tmp_path, ex_id, repl))
    assert r.score < r.max_score
    failed = [t for t in r.tests if t.status not in ("passed", "skipped")]
    assert failed and all(t.points == 0 for t in failed)
    assert any(all(w in f"{t.name} {t.message}" for w in words) for t in failed), [t.message for t in failed]


def test_every_exercise_has_three_wrong_variants():
    # exercises 1-7 here; every solution (drills and exercises 9-12 too) also meets the mutation test
    # of tests/test_grader_rigor.py
    counts = {e: sum(v[0] == e for v in VARIANTS.values()) for e in GRADED if e.startswith("ex") and e <= "ex07"}
    assert min(counts.values()) >= 3, counts


def test_renamed_file_still_grades_and_ignores_student_metadata(tmp_path):
    nb = _cells("ex04_group_m_swizzle")
    nb["metadata"]["kernelspec"] = {"name": "nonexistent", "display_name": "x", "language": "python"}
    for cell in nb["cells"]:
        cell.setdefault("metadata", {})["tags"] = ["skip-execution", "raises-exception"]
    nb["cells"].insert(0, {"cell_type": "code", "id": "evil", "metadata": {}, "outputs": [], "execution_count": None,
                           "source": "raise SystemExit('not from the template')"})
    path = tmp_path / "my_homework_final(2).ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    r = run(path)
    assert r.exercise == "ex04_group_m_swizzle" and r.score == r.max_score


def test_missing_solution_cell_falls_back_to_stub(tmp_path):
    nb = _cells("ex01_axpy")
    nb["cells"] = [c for c in nb["cells"] if c["id"] != "ex01-kernel"]
    path = tmp_path / "deleted.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    r = run(path)
    assert r.score == 0 and any("ex01-kernel" in n for n in r.notes)


@pytest.mark.parametrize("content, reason", [
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not a notebook"),
    (b'{"cells": [', "not a notebook"),
    (b'{"nbformat": 4, "metadata": {}}', "no 'cells'"),
    (b'{"cells": [], "metadata": {}}', "metadata.tcourse.exercise"),
    (b'{"cells": [], "metadata": {"tcourse": {"exercise": "ex99_nope"}}}', "unknown exercise"),
    (b'{"cells": [], "metadata": {"tcourse": {"exercise": "ex08_tilelang_mapping"}}}', "not auto-graded"),
])
def test_unusable_input_exits_2(tmp_path, capsys, content, reason):
    path = tmp_path / "bad.ipynb"
    path.write_bytes(content)
    assert cli.main(["check", str(path), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert reason in err and len(err.splitlines()) == 1


def test_a_file_name_that_is_not_utf8_is_one_unusable_row(tmp_path):
    """A name with bytes that are not UTF-8 (found 2026-12-07) stopped the whole batch before anything was graded."""
    subs = tmp_path / "subs"
    subs.mkdir()
    odd = os.fsdecode(bytes(subs) + b"/mallory\xff.ipynb")
    Path(odd).write_bytes((REPO / "solutions" / "ex01_axpy.ipynb").read_bytes())
    (subs / "alice.ipynb").write_bytes(b'{"cells": []}')
    assert cli.main(["grade", str(subs), "--out", str(tmp_path / "out"), "--device", "cpu", "--unsafe-no-sandbox"]) == 0
    rows = {r["file"]: r["status"] for r in csv.DictReader(open(tmp_path / "out" / "gradebook.csv", encoding="utf-8"))}
    assert rows == {f"{subs}/alice.ipynb": "unusable: alice.ipynb has no metadata.tcourse.exercise: not a course exercise notebook (or pass --exercise)",
                    f"{subs}/mallory\\xff.ipynb": "unusable: the file name is not valid UTF-8 (rename the file)"}


def test_build_is_in_sync():
    assert build.build(check=True) == 0


def test_an_answer_cell_failing_in_a_fresh_kernel_decides_the_cases_after_it(tmp_path):
    """After a case times out, the cases left run in a fresh kernel, the template and answer cells first. If the answer
    cell times out there (a loaded machine can push a slow one over the limit on its second run only), the worker
    stops, and the cases it never reached are timeouts that say why, not crashes of the grader ("exit 0")."""
    from grader import execute, plan

    ex = registry.get("ex01_axpy")
    (tmp_path / "work").mkdir()
    planned = plan.make_plan(ex, [c for c in ex.cases_for("cpu", 7) if not c.gpu_only], 7, tmp_path / "work", "cpu")
    lines = [{"id": "ex01-kernel", "role": "solution", "status": "ok", "error": ""},
             {"id": f"harness-{planned[0].id}", "role": "harness", "status": "timeout", "error": "CellTimeout"},
             {"id": "ex01-kernel", "role": "solution", "status": "timeout", "error": "CellTimeout", "rerun": 1}]
    (tmp_path / "status.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    run_ = execute.Execution(worker_rc=0)
    execute.read_status(tmp_path / "status.jsonl", run_)
    assert run_.cells["ex01-kernel"]["status"] == "ok" and len(run_.rerun_failures) == 1
    tests = grade._verdicts(ex, planned, run_, execute.Replay(), tmp_path, "cpu")
    assert tests[0].status == "timeout" and "死循环" in tests[0].message
    assert len(tests) > 1 and all(t.status == "timeout" and "换了新内核重跑时超时" in t.message for t in tests[1:])


def test_integers_are_drawn_kept_and_compared_as_int64(tmp_path):
    """float64 holds an integer exactly only up to 2^53: dr03's int64 case draws values over the whole int64 range,
    and the plan, the reference and the comparison keep them exact (a copy through float64 is then wrong)."""
    ex = registry.get("dr03_strided_copy_2d")
    case = next(c for c in ex.cases_for("cpu", 3) if c.dtype == "int64")
    pc = make_plan(ex, [case], 3, tmp_path, "cpu")[0]
    x = pc.shown["x"]
    assert x.dtype == torch.int64 and float((x.abs() > 2**53).double().mean()) > 0.99
    assert np.array_equal(np.load(tmp_path / f"{pc.id}_x.npy"), x.numpy())
    ref = compare.reference(ex, pc, pc.shown)[0]
    assert ref.dtype == np.int64 and np.array_equal(ref, x.numpy())
    assert (compare._as_carried(x.double(), "int64") != ref).mean() > 0.99


def test_the_fresh_inputs_do_not_continue_the_stream_the_shown_ones_came_from(tmp_path):
    """A Mersenne Twister's state can be worked out from 624 of its outputs, which an int64 case over the whole range
    shows the learner's call (found 2026-12-07: the fresh inputs of every case, and the seed, predicted exactly). Each
    data set has a generator of its own, seeded by a hash of the secret seed: continuing the shown stream, or
    re-seeding it by the old rule, gives values the replay never sees."""
    from grader import plan

    ex = registry.get("dr03_strided_copy_2d")
    cases = ex.cases_for("cpu", 3)
    i = next(k for k, c in enumerate(cases) if c.dtype == "int64")
    pc = make_plan(ex, cases, 3, tmp_path, "cpu")[i]
    spec = pc.case.inputs[0]
    g = torch.Generator().manual_seed(0)
    g.set_state(plan._generator(3, i, "shown").get_state())
    assert torch.equal(plan.draw(spec, pc.case, g), pc.shown["x"])
    for guess in (plan.draw(spec, pc.case, g), plan.draw(spec, pc.case, torch.Generator().manual_seed(3 * 1000 + i))):
        assert not torch.equal(guess, pc.fresh["x"])
    assert not torch.equal(pc.shown["x"], pc.fresh["x"])


def test_infinite_loop_is_timeout_and_budget_holds(tmp_path):
    path = make_variant(tmp_path, "ex01_axpy", [("    n = x.numel()\n", "    n = x.numel()\n    while True:\n        pass\n")])
    r = run(path, cell_timeout=3, budget=20)
    assert r.duration_s < 40
    assert {t.status for t in r.tests if t.status != "skipped"} == {"timeout"}
    assert r.score == 0


def test_killed_kernel_is_crashed(tmp_path):
    """A store far outside every tensor kills the interpreter's process (SIGSEGV): crashed, case by case."""
    path = make_variant(tmp_path, "ex06_transpose", [("tl.store(out_ptr + rn[None, :] * stride_on", "tl.store(out_ptr + (1 << 40) + rn[None, :] * stride_on")])
    r = run(path)
    assert {t.status for t in r.tests if t.status != "skipped"} == {"crashed"}


def test_cli_check_json_and_exit_codes(tmp_path):
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "grader", "check", str(REPO / "solutions" / "ex04_group_m_swizzle.ipynb"),
                        "--json", str(out), "--device", "cpu"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text(encoding="utf-8"))
    assert {"exercise", "score", "max_score", "device", "date", "versions", "duration_s", "tests"} <= d.keys()
    assert d["score"] == d["max_score"] and d["device"] == "cpu"
    assert all({"name", "status", "points", "max_points", "message"} <= t.keys() for t in d["tests"])
    bad = make_variant(tmp_path, "ex04_group_m_swizzle", VARIANTS["swizzle-no-min"][1])
    p = subprocess.run([sys.executable, "-m", "grader", "check", str(bad), "--device", "cpu"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1 and "group_size_m" in p.stdout


def test_batch_survives_crash_and_is_incremental(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.ipynb").write_bytes((REPO / "solutions" / "ex04_group_m_swizzle.ipynb").read_bytes())
    crash = make_variant(tmp_path, "ex04_group_m_swizzle", [("tl.store(out_ptr + pid * 2, pid_m)",
                                                             "tl.store(out_ptr + (1 << 40) + pid * 2, pid_m)")], "bob")
    crash.rename(subs / "bob.ipynb")
    (subs / "carol.ipynb").write_text("not json", encoding="utf-8")
    (subs / "dave.ipynb").write_bytes((REPO / "exercises" / "ex01_axpy.ipynb").read_bytes())
    out = tmp_path / "out"
    args = ["grade", str(subs), "--out", str(out), "--device", "cpu", "--workers", "2", "--timeout", "60"]
    args += [] if sandbox.choose().isolated else ["--unsafe-no-sandbox"]  # a laptop without bubblewrap
    assert cli.main(args) == 0
    rows = {Path(r["file"]).stem: r for r in csv.DictReader(open(out / "gradebook.csv", encoding="utf-8"))}
    assert set(rows) == {"alice", "bob", "carol", "dave"}
    assert float(rows["alice"]["score"]) == float(rows["alice"]["max_score"]) > 0
    assert float(rows["bob"]["score"]) < float(rows["bob"]["max_score"])
    assert rows["carol"]["status"].startswith("unusable")
    assert float(rows["dave"]["score"]) == 0
    bob_json = json.loads(next(out.glob("bob-*.json")).read_text(encoding="utf-8"))
    assert "crashed" in {t["status"] for t in bob_json["tests"]}
    assert len(list(out.glob("*.feedback.txt"))) == 4
    stamp = {p: p.stat().st_mtime_ns for p in out.glob("*.json") if p.name != ".cache.json"}
    assert cli.main(args) == 0  # nothing changed: nothing re-graded
    assert stamp == {p: p.stat().st_mtime_ns for p in stamp}
    assert cli.main(args + ["--force"]) == 0
    assert any(p.stat().st_mtime_ns != t for p, t in stamp.items())


@pytest.mark.parametrize("ours_ms, target_ms, frac", [(1.0, 1.0, 1.0), (1.0, 0.95, 1.0), (1.0, 0.7, 0.5), (1.0, 0.4, 0.0)])
def test_perf_points_by_speed_ratio(ours_ms, target_ms, frac):
    mk = lambda status, msg, pts=0.0: compare.TestResult("perf", status, pts, 2.0, msg)  # noqa: E731
    r = compare.perf_result({"ours_ms": ours_ms, "target_ms": target_ms, "unit": "TFLOP/s", "ours_rate": 1.0}, mk)
    assert r.points == pytest.approx(2.0 * frac)
    assert r.status == ("passed" if frac == 1.0 else "failed") and "倍" in r.message


@pytest.mark.parametrize("record, array", [
    ({"launches": "1", "error": None, "returned": "out"}, None),
    ({"launches": 1, "error": None, "returned": "out"}, "pickle"),
    ({"launches": 1, "error": None, "returned": "out"}, "wrong-size"),
    ({"launches": 1, "error": None, "returned": "out"}, "symlink"),
    ({"launches": 1, "error": None, "returned": "out"}, "fifo"),
    ([[[[[[[[[[[]]]]]]]]]]], None),
])
def test_forged_or_malformed_records_are_errors(tmp_path, record, array):
    ex = registry.get("ex01_axpy")
    planned = make_plan(ex, ex.cases_for("cpu", 3), 3, tmp_path, "cpu")
    pc = planned[1]
    (tmp_path / f"{pc.id}.json").write_text(json.dumps(record), encoding="utf-8")
    n = pc.case.outputs[0].shape[0]
    buf = np.full(n + 2 * guard_size(n), OUT_SENTINEL["float32"], dtype=np.float32)
    out = tmp_path / f"{pc.id}_out_out.npy"
    if array == "pickle":
        np.save(out, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    elif array == "symlink":
        out.symlink_to("/dev/zero")
    elif array == "fifo":
        os.mkfifo(out)
    else:
        np.save(out, buf[:-1] if array == "wrong-size" else buf)
    r = compare.judge(ex, pc, tmp_path, tmp_path / "replay_out", "cpu")
    assert r.status == "error" and "评分数据无效" in r.message


def test_a_call_without_launches_is_called_a_cached_result_when_its_siblings_launched(tmp_path):
    """A function that returns kept results launches nothing on a shape it has seen; with secret sizes that
    happens on any case, not only the repeated one. When other cases of the same function launched, the
    verdict names the cache; when none did (or their records are missing or forged), the missing kernel."""
    ex = registry.get("ex01_axpy")
    planned = make_plan(ex, ex.cases_for("cpu", 3), 3, tmp_path, "cpu")
    pc, other = planned[1], planned[0]
    (tmp_path / f"{pc.id}.json").write_text(json.dumps({"launches": 0, "error": None}), encoding="utf-8")
    for launches, siblings, words in ((2, [pc, other], "缓存"), (0, [pc, other], "没有启动任何 Triton kernel"),
                                      ("2", [pc, other], "没有启动任何 Triton kernel"),
                                      (2, [pc], "没有启动任何 Triton kernel")):
        (tmp_path / f"{other.id}.json").write_text(json.dumps({"launches": launches}), encoding="utf-8")
        r = compare.judge(ex, pc, tmp_path, tmp_path / "replay_out", "cpu", siblings)
        assert r.status == "failed" and words in r.message, (launches, siblings, r.message)


def test_gpu_plan_holds_exact_bf16_inputs(tmp_path):
    for ex_id in GRADED:
        ex = registry.get(ex_id)
        planned = make_plan(ex, ex.cases_for("cuda", 5), 5, tmp_path, "cuda")
        assert any(pc.case.dtype == "bfloat16" for pc in planned) or ex_id == "ex04_group_m_swizzle" or ex_id.startswith("dr")
        for pc in planned:
            for t in pc.case.inputs:
                saved = np.load(tmp_path / f"{pc.id}_{t.name}.npy", allow_pickle=False)
                assert np.array_equal(saved.astype(np.float64), pc.shown[t.name].numpy(), equal_nan=True)  # inf, NaN fills
                if pc.case.dtype == "bfloat16":
                    assert np.array_equal(pc.shown[t.name].to(torch.bfloat16).double().numpy(), pc.shown[t.name].numpy(),
                                          equal_nan=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_device_cuda_without_gpu_exits_2(capsys):
    assert cli.main(["check", str(REPO / "solutions" / "ex01_axpy.ipynb"), "--device", "cuda"]) == 2
    assert "torch.cuda.is_available() is False" in capsys.readouterr().err


THREADED_REFERENCE = """
import threading
import numpy as np
from grader import compare, registry
from grader.plan import make_plan
ex = registry.get("ex09_dropout")
planned = [pc for pc in make_plan(ex, ex.cases_for("cpu", 5), 5, WORK, "cpu") if pc.case.mode == "tensor"][:4]
want = [compare.reference(ex, pc, pc.fresh)[0] for pc in planned]
errors, wrong = [], []
def work():
    try:
        for _ in range(6):
            for pc, w in zip(planned, want):
                if not np.array_equal(compare.reference(ex, pc, pc.fresh)[0], w, equal_nan=True):
                    wrong.append(pc.case.name)
    except Exception as e:
        errors.append(repr(e)[:200])
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors), len(wrong), errors[:1])
"""


def test_a_reference_that_runs_a_triton_kernel_is_right_from_threads_at_once(tmp_path):
    """grade --workers N grades in threads of one process, and ex09's reference runs a Triton kernel there (its RNG).
    The interpreter patches triton.language for each launch and undoes it after; before the lock in
    grader.compare, two threads' launches undid each other's patches and the case was a grader error."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    code = f"WORK = __import__('pathlib').Path({str(tmp_path)!r})\n" + THREADED_REFERENCE
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.split()[:2] == ["0", "0"], (out.stdout[-500:], out.stderr[-1500:])
