"""Grade one submission: load -> check the answer cells -> plan inputs -> run the learner's notebook ->
replay its launches on fresh inputs -> judge every case here, in the grader's process."""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import compare, execute, kernel_source, plan, policy, rebuild, registry, sandbox, source
from .compare import TestResult
from .worker import clip

DEFAULT_CELL_TIMEOUT = 60.0


@dataclass
class Result:
    exercise: str
    device: str
    tests: list[TestResult]
    duration_s: float
    seed: int
    notes: list[str] = field(default_factory=list)
    sandbox: str = ""
    declared: str | None = None
    phases: dict = field(default_factory=dict)  # seconds spent running the learner's notebook and the replay
    date: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))  # when it was graded

    @property
    def score(self) -> float:
        return round(sum(t.points for t in self.tests), 2)

    @property
    def max_score(self) -> float:
        """Points that could be earned on this device (skipped GPU-only tests are not counted)."""
        return round(sum(t.max_points for t in self.tests if t.status != "skipped"), 2)

    @property
    def all_passed(self) -> bool:
        return all(t.status in ("passed", "skipped") for t in self.tests)

    def as_dict(self, versions: dict) -> dict:
        return {"exercise": self.exercise, "declared_exercise": self.declared, "score": self.score,
                "max_score": self.max_score, "device": self.device, "date": self.date, "versions": versions,
                "duration_s": round(self.duration_s, 2), "seed": self.seed,
                "skipped_points": round(sum(t.max_points for t in self.tests if t.status == "skipped"), 2),
                "notes": self.notes, "sandbox": self.sandbox, "phases": self.phases,
                "tests": [t.as_dict() for t in self.tests]}


class NoDevice(RuntimeError):
    """--device cuda on a machine without a CUDA GPU."""


def resolve_device(device: str) -> str:
    if device in ("auto", "cuda"):
        import torch

        if torch.cuda.is_available():
            return "cuda"
        if device == "cuda":
            raise NoDevice("--device cuda, but torch.cuda.is_available() is False on this machine")
    return "cpu"


def budget_for(n_cases: int, cell_timeout: float) -> float:
    """Whole-submission budget: kernel start + setup + answer cells + all cases, capped."""
    return min(60.0 + cell_timeout * 2 + 20.0 * n_cases, 600.0 + cell_timeout)


def grade(path: Path, device: str = "cpu", cell_timeout: float = DEFAULT_CELL_TIMEOUT,
          budget: float | None = None, seed: int | None = None, exercise: str | None = None) -> Result:
    """Raises :class:`rebuild.Unusable` for an input that cannot be graded at all."""
    t0 = time.monotonic()
    if device != "cuda":  # a reference that calls a Triton kernel (ex09's RNG) runs under the interpreter
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sub = rebuild.load(path, exercise)
    ex = registry.get(sub.exercise)
    seed = secrets.randbits(63) if seed is None else seed  # too many to try: the data sets' seeds hash it
    cases = ex.cases_for(device, seed)
    run_cases = [c for c in cases if not (c.gpu_only and device != "cuda")]
    audit = policy.audit(sub.solution_cells, rebuild.template_names(sub.exercise), rebuild.spec_names(sub.exercise))
    notes = sub.notes + audit.notes
    iso = sandbox.choose()
    root = Path(tempfile.mkdtemp(prefix="tcourse-grade-"))
    (root / "work").mkdir()
    budget = budget if budget is not None else budget_for(len(run_cases), cell_timeout)
    phases = {}
    try:
        planned = plan.make_plan(ex, run_cases, seed, root / "work", device)
        refused = audit.refused
        if not refused:
            try:
                module, names = kernel_source.extract(rebuild.answer_sources(sub, audit.sources))
            except (kernel_source.NotExtractable, SyntaxError) as e:
                refused = [str(e)]
        if refused:
            why = "；".join(refused[:3]) + (f"（另有 {len(refused) - 3} 处）" if len(refused) > 3 else "")
            tests = [TestResult(pc.case.name, "failed", 0.0, pc.case.points, f"答案单元里有评分时不允许的写法，没有运行：{why}",
                                "hidden" if pc.case.hidden else "visible") for pc in planned]
        else:
            nb = rebuild.graded_notebook(sub, audit.sources, [pc.id for pc in planned])
            t1 = time.monotonic()
            run = execute.run(nb, root, device, cell_timeout, budget, iso)
            phases["notebook_s"] = round(time.monotonic() - t1, 2)
            replay_ids = [pc.id for pc in planned if pc.case.mode != "python" and not pc.case.bare
                          and _worth_replaying(root / "work" / f"{pc.id}.json")]
            _write_replay(root, ex, planned, module, names, device, seed)
            left = max(10.0, budget - (time.monotonic() - t0))
            t1 = time.monotonic()
            # a replay case compiles for sm_90 and runs the launches one to four times (in order; with atomics interleaved,
            # and where programs share elements through atomics, steered and reversed)
            replay_case_limit = max(4.0 * cell_timeout, 30.0)
            rp = execute.replay(root, device, iso, replay_ids, replay_case_limit, left) if replay_ids else execute.Replay()
            phases["replay_s"] = round(time.monotonic() - t1, 2)
            tests = _verdicts(ex, planned, run, rp, root, device)
    finally:
        _remove(root)
    if device != "cuda":
        tests += [compare.skipped(c, "需要 GPU：性能分只在 GPU 上计时（解释器的时间衡量的是 Python）。" if c.mode == "perf"
                                  else "需要 GPU：解释器下 bfloat16 的结果不可靠，只在 GPU 上测。")
                  for c in cases if c.gpu_only]
    return Result(ex.id, device, tests, time.monotonic() - t0, seed, notes, iso.describe(), sub.declared, phases)


def _write_replay(root: Path, ex, planned, module: str, names: list[str], device: str, seed: int) -> None:
    """replay/: made only now, after every process of the learner's run is gone."""
    import json

    rp = root / "replay"
    rp.mkdir(mode=0o700)
    plan.write_replay(ex, planned, rp, device, seed)
    (rp / "kernels.py").write_text(module, encoding="utf-8")
    (rp / "kernel_names.json").write_text(json.dumps(names), encoding="utf-8")
    solution = [source.render(c.text, True) for c in source.parse(source.SRC_DIR / f"{ex.id}.py")
                if c.kind == "code" and c.role == "solution"]
    (rp / "solution_cells.py").write_text("import torch, triton\nimport triton.language as tl\n"
                                          "from types import SimpleNamespace\n"
                                          "rt = SimpleNamespace(gpu=True, device='cuda', interpret=False)\n\n"
                                          + "\n\n".join(solution) + "\n", encoding="utf-8")


def _worth_replaying(record: Path) -> bool:
    """A case whose call raised or launched nothing fails on its own record: no replay needed."""
    from . import safeio

    try:
        rec = safeio.load_json(record, compare.RECORD_CAP, depth=8)
    except safeio.Untrusted:
        return False
    return (isinstance(rec, dict) and not rec.get("error") and not rec.get("endless")
            and isinstance(rec.get("launches"), int) and rec["launches"] > 0)


def _remove(root: Path) -> None:
    """rmtree, after giving back write permission on the read-only library copy."""
    for p in (root / "lib").rglob("*") if (root / "lib").exists() else ():
        p.chmod(0o700)
    if (root / "lib").exists():
        (root / "lib").chmod(0o700)
    shutil.rmtree(root, ignore_errors=True)


def _verdicts(ex, planned, run: execute.Execution, rp: execute.Replay, root: Path, device: str) -> list[TestResult]:
    # The first template/answer cell that did not finish decides every case.
    blocking = next((c for c in run.cells.values() if c["role"] in ("setup", "given", "solution")
                     and c["status"] != "ok"), None)
    tests = []
    correct_so_far = True
    workdir, replay_out = root / "work", root / "replay" / "out"
    for pc in planned:
        vis = "hidden" if pc.case.hidden else "visible"
        mk = lambda status, msg: TestResult(pc.case.name, status, 0.0, pc.case.points, msg, vis)  # noqa: E731
        cell = run.cells.get(f"harness-{pc.id}")
        if blocking is not None:
            tests.append(_blocked(blocking, mk))
        elif cell is None:
            if run.budget_exceeded:
                tests.append(mk("timeout", "整份作业的时间预算用完了，这个测试没有运行（前面的测试太慢或死循环？）。"))
            elif run.rerun_failures:
                tests.append(_blocked(run.rerun_failures[-1], mk, rerun=True))
            elif any(c["status"] == "dead" for c in run.cells.values()):
                tests.append(mk("crashed", "内核在前面的测试中崩溃了，这个测试没有运行。"))
            else:
                tests.append(mk("crashed", f"评分进程异常退出（exit {run.worker_rc}），这个测试没有运行。"
                                           f"{_last_line(run.worker_stderr)}"))
        elif cell["status"] == "timeout":
            tests.append(mk("timeout", "这个测试超时了：kernel 或包装函数里有死循环，或者太慢（grid 太大？）。"
                                       + (pc.case.hint or "")))
        elif cell["status"] == "dead" and cell.get("files"):
            tests.append(mk("crashed", f"写的文件超限，内核被终止了（{cell['error'][-120:]}）：答案单元不需要写文件。"))
        elif cell["status"] == "dead" and cell.get("memory"):
            tests.append(mk("crashed", f"内存超限，内核被终止了（{cell['error'][-120:]}）：是不是分配了过大的张量或列表？"
                                       + (pc.case.hint or "")))
        elif cell["status"] == "dead":
            tests.append(mk("crashed", "运行这个测试时内核崩溃了（进程退出或段错误）：常见原因是越界读写（tl.load/tl.store 少了 mask）、"
                                       "os._exit 或 sys.exit。"))
        elif cell["status"] == "error" and not (workdir / f"{pc.id}.json").exists():
            tests.append(mk("error", f"评分单元出错：{cell['error'][-300:]}"))
        elif pc.case.mode == "perf" and not correct_so_far:
            tests.append(mk("failed", "正确性测试没有全部通过，不计性能分。"))
        elif rp.broken and pc.case.mode != "python":
            tests.append(mk("error", f"评分器的重放进程没能启动（不是你的错，请告诉老师）：{_last_line(rp.broken)}"))
        elif rp.fatal and pc.case.mode != "python":
            tests.append(mk("failed", f"评分器只导入你的 @triton.jit kernel（不运行别的代码）时出错：{_last_line(rp.fatal)}"))
        elif pc.id in rp.timed_out and "fresh" in rp.rounds.get(pc.id, ()):
            tests.append(mk("timeout", "评分器重放你的 kernel：按 program 编号依次运行时跑完了，让 program 像在 GPU 上那样交错运行时"
                                       "超时了：kernel 要做的事取决于 program 的先后。常见的是等待的条件在交错时永远不成立（等的标志被别的 "
                                       "program 改回去了，或者两个 program 各拿一把锁再等对方的锁），或者等待时每次读的位置、读到的值都在变，"
                                       "评分器认不出它在等。要前面块的结果，最稳妥的是分两次 launch；要在一次 launch 里等，就只等一个标志："
                                       "被等的 program 写完结果后用 tl.atomic_xchg 置位，等的一方反复 tl.atomic_add(flag, 0) 读它。"))
        elif pc.id in rp.timed_out:
            tests.append(mk("timeout", "评分器在新输入上重放你的 kernel 时超时了（kernel 里有死循环，或者太慢）。"))
        elif pc.id in rp.crashed:
            tests.append(mk("crashed", "评分器在新输入上重放你的 kernel 时进程崩溃了（越界读写？）。"))
        elif pc.case.mode != "python" and pc.id not in rp.done and rp.budget_exceeded:
            tests.append(mk("timeout", "整份作业的时间预算用完了，这个测试的重放没有运行或没有跑完。"))
        else:
            tests.append(compare.judge(ex, pc, workdir, replay_out, device, planned))
            # a bare call's launches are not replayed: it counts only for a kernel the other cases judged right
            if pc.case.bare and tests[-1].status == "passed" and not correct_so_far:
                tests[-1] = mk("failed", "其他正确性测试没有全部通过，这一项不计分：它在其余测试都通过之后，再检查只传必需参数、"
                                         "不传 out 的调用（输出由函数自己分配并返回，可选参数用题目签名里的默认值）。")
        if pc.case.mode != "perf" and not pc.case.bare and tests[-1].status != "passed":
            correct_so_far = False
    return tests


def _blocked(cell: dict, mk, rerun: bool = False) -> TestResult:
    """The verdict of a case that a template or answer cell stopped; ``rerun``: it stopped when the cells ran again in
    a fresh kernel, after an earlier case timed out or crashed."""
    who = "你的代码单元" if cell["role"] == "solution" else "模板单元"
    when = "在前面的测试超时或崩溃、换了新内核重跑时" if rerun else ""
    if cell["status"] == "timeout":
        return mk("timeout", f"{who} {cell['id']} {when}超时了（死循环？），测试没有运行。")
    if cell["status"] == "dead" and cell.get("files"):
        return mk("crashed", f"{who} {cell['id']} {when}写的文件超限，内核被终止了（{cell['error'][-120:]}），测试没有运行："
                             "答案单元不需要写文件。")
    if cell["status"] == "dead" and cell.get("memory"):
        return mk("crashed", f"{who} {cell['id']} {when}内存超限，内核被终止了（{cell['error'][-120:]}），测试没有运行："
                             "是不是分配了过大的张量？")
    if cell["status"] == "dead":
        return mk("crashed", f"{who} {cell['id']} {when}让内核崩溃了（os._exit、sys.exit 或段错误？），测试没有运行。")
    return mk("error", f"{who} {cell['id']} {when}运行出错，测试没有运行：{_last_line(cell['error'])}")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return clip(lines[-1], 300) if lines else ""  # head and tail: the exception's name stays
