"""``compile_for_sm90`` for several configs of one kernel, safe to call with the interpreter on.

With ``TRITON_INTERPRET=1`` an in-process ``compile_for_sm90`` of a kernel with a K loop and masked
loads fails (``'value' object has no attribute 'data'``: the code generator meets interpreter
objects) unless the Triton cache already holds the result. Here the kernel's source is written to a
temporary module and compiled in a child process without the interpreter; on a GPU machine (no
interpreter) the compilation runs in-process. Either way the reports are the real sm_90 ones.
"""
from __future__ import annotations

import inspect
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .compile_info import CompileReport, compile_for_sm90

_CHILD = """
import pickle, sys
sys.path.insert(0, {moddir!r})
from tcourse.compile_info import compile_for_sm90
import kernel_src
jobs = pickle.load(open({jobs!r}, "rb"))
out = []
for args, kw in jobs:
    try:
        out.append(compile_for_sm90(getattr(kernel_src, {name!r}), *args, **kw))
    except Exception as e:  # one config that does not compile must not hide the others
        out.append(f"{{type(e).__name__}}: {{e}}")
pickle.dump(out, open({result!r}, "wb"))
"""


def kernel_source(kernel) -> str:
    """The ``@triton.jit`` function's source, decorator included, dedented."""
    fn = getattr(kernel, "fn", kernel)
    return textwrap.dedent(inspect.getsource(fn))


def compile_many(kernel, jobs: list[tuple[tuple, dict]]) -> list[CompileReport | str]:
    """``[compile_for_sm90(kernel, *args, **kw) for args, kw in jobs]``; a failed config gives its
    error message (a string) instead of a report. Types like ``"*fp16"`` are the portable way to
    give pointer arguments (tensors do not cross the process boundary)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        out = []
        for args, kw in jobs:
            try:
                out.append(compile_for_sm90(kernel, *args, **kw))
            except Exception as e:  # same contract as the child process
                out.append(f"{type(e).__name__}: {e}")
        return out
    name = getattr(kernel, "fn", kernel).__name__
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        (d / "kernel_src.py").write_text("import triton\nimport triton.language as tl\n\n\n" + kernel_source(kernel))
        (d / "jobs.pkl").write_bytes(pickle.dumps(jobs))
        script = _CHILD.format(moddir=str(d), jobs=str(d / "jobs.pkl"), name=name, result=str(d / "out.pkl"))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"sm_90 compilation subprocess failed:\n{proc.stderr[-2000:]}")
        return pickle.loads((d / "out.pkl").read_bytes())
