"""Where and how the student's kernel runs: its own folders, a minimal library copy, bubblewrap if it works.

Layout of one run (``root`` is a fresh temporary folder, see :mod:`grader.grade`)::

    root/work/   the kernel's working directory: rebuilt notebook, plan, inputs, the harness's outputs
    root/lib/    read-only copy of what the kernel may import: tcourse/, grader/harness.py and
                 grader/kernel_io.py (the kernel's main module: size-capped messages and streams) only
    root/rt/     kernel connection file and ipc sockets, IPython/matplotlib/Triton caches, HOME
    root/ctl/    the worker's side, never bound into the sandbox: kernelspec, kernel environment,
                 status.jsonl, worker.log

The kernel never sees the repository (``solutions/``, ``grader/exercise_src/``): PYTHONPATH is
``root/lib``. With bubblewrap (``bwrap``, probed once per process), the kernel also runs in new
user, PID, network, IPC and UTS namespaces, sees only the system's read-only folders plus
``root``, and dies with its worker. Without it, those protections are off (see :func:`describe`).
Set ``TCOURSE_GRADER_SANDBOX=off`` to run without bubblewrap even where it works.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNEL_NAME = "tcourse-grader"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


@functools.lru_cache(maxsize=1)
def bwrap() -> str | None:
    """Path of a bubblewrap that can actually create the namespaces here, else None."""
    if os.environ.get("TCOURSE_GRADER_SANDBOX", "").lower() == "off":
        return None
    exe = shutil.which("bwrap")
    if not exe:
        return None
    try:
        p = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if p.returncode == 0 else None


def describe() -> str:
    if bwrap():
        return "bwrap (no network, own PID namespace, read-only system, repository hidden)"
    return ("none: bubblewrap unavailable; network, PID namespace and file-system isolation are OFF "
            "(rlimits, own working dir, library copy, static audit, sealed results still apply)")


def _python_dirs() -> list[str]:
    """Folders the kernel's Python needs (interpreter, stdlib, site-packages), but none of the repository.

    A virtual environment inside the repository (``./course.sh`` makes ``.venv`` there) is kept: it holds
    installed packages, not course sources; other ``sys.path`` entries inside the repository are not.
    """
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    dirs = prefixes | {os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)}
    keep = set()
    for real in dirs:
        inside_repo = real == str(REPO) or real.startswith(str(REPO) + os.sep)
        if real in ("/", "/tmp", str(REPO)) or (inside_repo and real not in prefixes):
            continue
        keep.add(real)
    return sorted(d for d in keep if not any(d != o and d.startswith(o + os.sep) for o in keep))


def make_lib(root: Path) -> Path:
    """root/lib: tcourse, the harness and the output cap, read-only (the kernel imports nothing else of the repository)."""
    lib = root / "lib"
    shutil.copytree(REPO / "tcourse", lib / "tcourse", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (lib / "grader").mkdir()
    (lib / "grader" / "__init__.py").write_text('"""Kernel-side copy: the harness and the output cap only."""\n', encoding="utf-8")
    for name in ("harness.py", "kernel_io.py"):
        shutil.copy2(REPO / "grader" / name, lib / "grader" / name)
    for p in sorted(lib.rglob("*"), reverse=True):
        p.chmod(stat.S_IRUSR | stat.S_IRGRP | (stat.S_IXUSR | stat.S_IXGRP if p.is_dir() else 0))
    lib.chmod(stat.S_IRUSR | stat.S_IXUSR)
    return lib


def kernel_argv(root: Path, device: str) -> list[str]:
    py = [sys.executable, "-m", "grader.kernel_io", "-f", "{connection_file}"]
    exe = bwrap()
    if not exe:
        return py
    argv = [exe, "--unshare-all", "--die-with-parent", "--new-session", "--proc", "/proc", "--tmpfs", "/tmp",
            "--tmpfs", "/run", "--tmpfs", "/var"]
    argv += ["--dev-bind", "/dev", "/dev"] if device == "cuda" else ["--dev", "/dev"]
    if device == "cuda" and os.path.isdir("/sys"):
        argv += ["--ro-bind", "/sys", "/sys"]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for d in _python_dirs():
        argv += ["--ro-bind", d, d]
    argv += ["--bind", str(root / "work"), str(root / "work"), "--bind", str(root / "rt"), str(root / "rt"),
             "--ro-bind", str(root / "lib"), str(root / "lib"), "--chdir", str(root / "work")]
    # The kernel's parent is bwrap's init (PID 1 in the namespace): ipykernel's parent poller would read
    # that as "my parent exited" unless told that PID 1 is its parent (bwrap kills it with the worker).
    return argv + ["--setenv", "JPY_PARENT_PID", "1", "--"] + py


def kernel_env(root: Path, device: str, marker: str) -> dict[str, str]:
    """The kernel's whole environment: nothing of the grader's beyond PATH, locale and the GPU selection."""
    rt = root / "rt"
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TZ")}
    env.update({
        "HOME": str(rt / "home"), "TMPDIR": str(rt / "tmp"), "IPYTHONDIR": str(rt / "ipython"),
        "MPLCONFIGDIR": str(rt / "mpl"), "MPLBACKEND": "Agg", "TRITON_CACHE_DIR": str(rt / "triton"),
        "JUPYTER_RUNTIME_DIR": str(rt), "PYTHONPATH": str(root / "lib"), "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1", "TCOURSE_DEVICE": device, "TCOURSE_GRADER_DIR": str(root / "work"),
        "TCOURSE_GRADER_RUN": marker,
    })
    return env


def prepare(root: Path, device: str, marker: str) -> None:
    """Create lib/, rt/ and ctl/: the kernelspec (ctl/kernels) the worker starts and the kernel's environment."""
    make_lib(root)
    rt = root / "rt"
    for sub in ("home", "tmp", "ipython", "mpl", "triton"):
        (rt / sub).mkdir(parents=True, exist_ok=True)
    spec = root / "ctl" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": kernel_argv(root, device), "display_name": "tcourse grader", "language": "python",
        "interrupt_mode": "message"}), encoding="utf-8")
    (root / "ctl" / "kernel_env.json").write_text(json.dumps(kernel_env(root, device, marker)), encoding="utf-8")
