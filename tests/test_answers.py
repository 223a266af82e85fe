"""The chapters' learner tasks: the checker rejects wrong answers, and each model answer passes its own check."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from tcourse import answers

ROOT = Path(__file__).resolve().parent.parent


def test_checker_accepts_close_rejects_far_and_empty(capsys):
    assert answers.check_number("x", 1.01, 1.0, rel=0.02)
    assert not answers.check_number("x", 1.1, 1.0, rel=0.02)
    assert not answers.check_number("x", None, 1.0)
    assert not answers.check_table("t", {1: 1.0}, {1: 1.0, 2: 2.0})
    assert not answers.check_table("t", {1: 1.0, 3: 3.0}, {1: 1.0})
    out = capsys.readouterr().out
    assert "✗ x: 1.1 偏大了 10%（允许 ±2%）" in out and "还没填" in out   # how far off, never the reference


def model_code(task: str) -> str:
    return re.search(r"```python\n(.*?)```", answers.MODEL_ANSWERS[task], re.S).group(1)


def test_model_answers_of_recorded_tasks_pass():
    from tcourse import recorded

    data = recorded.load("ch02_axpy_sweep").data
    scope = {"data": data}
    exec(model_code("ch02-block-size"), scope)
    ref = {r["BLOCK_SIZE"]: r["triton_gbs"] for r in data["sweep"] if r["num_warps"] == 4}
    assert answers.check_table("t", scope["my_table"], ref, rel=0.01)
    sweep = recorded.load("ch04_matmul_sweep").data
    scope = {"sweep": sweep}
    exec(model_code("ch04-latency"), scope)
    ref = {tuple(r["config"]): 2 * 4096**3 / (r["float16"]["ours"] * 1e12) * 1e6
           for r in sweep if r["fits"] and "ours" in r.get("float16", {})}
    assert answers.check_table("t", scope["my_latency_us"], ref, rel=0.02)


def test_model_answer_of_the_mask_task_passes_under_the_interpreter(tmp_path):
    script = tmp_path / "task.py"   # @triton.jit needs a file
    script.write_text(textwrap.dedent("""
        import tcourse
        rt = tcourse.setup(quiet=True)
        import torch, triton, triton.language as tl
        import torch.nn.functional as F
        from tcourse import answers
        x_task = torch.randn(37, 1000, generator=torch.Generator().manual_seed(0))
        reference = torch.softmax(F.pad(x_task, (0, 24), value=0.0), dim=1)[:, :1000]
        expected = ((reference - torch.softmax(x_task, dim=1)).abs() / torch.softmax(x_task, dim=1)).max().item()
    """) + model_code("ch03-mask") + "\nprint('PASS' if answers.check_number('e', my_rel_error, expected, rel=0.05) else 'FAIL')\n")
    env = {**os.environ, "TCOURSE_DEVICE": "cpu"}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert "PASS" in r.stdout, r.stdout + r.stderr[-2000:]
