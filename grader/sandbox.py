"""Where and how the learner's code runs: its own folders, a minimal library copy, and process isolation.

Layout of one run (``root`` is a fresh temporary folder, see :mod:`grader.grade`)::

    root/work/    the learner's kernel's working directory: rebuilt notebook, plan, shown inputs, what
                  the harness writes
    root/rt/      the kernel's connection file, ipc sockets, IPython/matplotlib/Triton caches, HOME
    root/lib/     read-only copy of what the kernel and the replay import: tcourse/ and the learner-side
                  modules of grader/ (never exercise sources, solutions or the grader's judging code)
    root/ctl/     the worker's side, never visible to the kernel: kernelspec, environment, status lines
    root/replay/  made only after every process of the learner's run has been killed: fresh inputs,
                  the learner's kernels alone, the replay's outputs

Isolation, chosen once per run (:func:`choose`; ``TCOURSE_GRADER_SANDBOX=auto|bwrap|uid|off``):

- ``bwrap``: bubblewrap's new user, PID, network, IPC and UTS namespaces, a read-only system, only
  the run's folders visible, killed with its parent; GPU device files are bound in on a GPU run;
- ``uid``: where bubblewrap is missing but the grader runs as root (and its Python is readable by other
  users: :func:`uid_blocker` says what stops it otherwise): a throwaway unprivileged user per
  run (:mod:`grader.dropuid`: own network namespace, new session, parent-death signal), the run's
  folders owned by that user with mode 0700, and every process of that user killed afterwards;
- ``none``: only rlimits, a new session, the subreaper and the run's own folders. ``grade`` refuses
  to batch-grade like this unless given ``--unsafe-no-sandbox``.
"""
from __future__ import annotations

import functools
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import procs

REPO = Path(__file__).resolve().parent.parent
KERNEL_NAME = "tcourse-grader"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
LIB_MODULES = ("harness.py", "launchlog.py", "buffers.py", "kernel_io.py", "replay.py", "interleave.py", "spin.py",
               "patching.py", "lanes.py", "ordering.py", "safeio.py", "dropuid.py", "hints.py")
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "TZ")


@functools.lru_cache(maxsize=1)
def bwrap() -> str | None:
    """Path of a bubblewrap that can actually create the namespaces here, else None."""
    exe = shutil.which("bwrap")
    if not exe:
        return None
    try:
        p = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return exe if p.returncode == 0 else None


@dataclass
class Isolation:
    mode: str                       # bwrap | uid | none
    uid: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def isolated(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if self.mode == "bwrap":
            text = "bwrap (own user/PID/network namespaces, read-only system, repository hidden, killed with the grader)"
        elif self.mode == "uid":
            text = (f"uid {self.uid} (throwaway unprivileged user, own network namespace, new session, parent-death "
                    "signal, run folders mode 0700, every process of that user killed afterwards)")
        else:
            text = ("none: neither bubblewrap nor a throwaway user; network, PID namespace and file-system isolation are OFF "
                    "(rlimits, new session, subreaper, own folders, replay on fresh inputs still apply)")
        return text + ("; " + "; ".join(self.notes) if self.notes else "")


def _fresh_uid() -> int:
    while True:
        uid = 2_000_000 + secrets.randbelow(2_000_000_000)
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not procs.uid_pids(uid):
            return uid


def _others_can_enter(path: str) -> str | None:
    """None when a user other than the owner can reach ``path`` (every ancestor searchable by others,
    the path itself readable); else the first folder or file that blocks it."""
    p = os.path.realpath(path)
    parts = [p] + [str(a) for a in Path(p).parents]
    for q in parts:
        try:
            mode = os.stat(q).st_mode
        except OSError:
            return q
        need = stat.S_IXOTH if stat.S_ISDIR(mode) else stat.S_IROTH
        if not mode & need:
            return q
    return None


@functools.lru_cache(maxsize=1)
def uid_blocker() -> str | None:
    """Why a throwaway user could not run this Python (None when it can): it must be root, and the
    interpreter, the standard library and site-packages must be readable by other users."""
    if os.geteuid() != 0:
        return "the grader does not run as root"
    for d in [sys.executable, *_python_dirs()]:
        blocked = _others_can_enter(d)
        if blocked:
            return f"{blocked} is not readable by other users (the Python the grader runs lives below it)"
    return None


def choose() -> Isolation:
    want = os.environ.get("TCOURSE_GRADER_SANDBOX", "auto").lower()
    if want in ("off", "none"):
        return Isolation("none", notes=["TCOURSE_GRADER_SANDBOX=off"])
    if want in ("auto", "bwrap") and bwrap():
        return Isolation("bwrap")
    if want in ("auto", "uid") and uid_blocker() is None:
        return Isolation("uid", _fresh_uid(), ["bubblewrap unavailable"] if want == "auto" else [])
    notes = [f"TCOURSE_GRADER_SANDBOX={want} asked for, but it is not available here"] if want != "auto" else []
    return Isolation("none", notes=notes + [f"no throwaway user: {uid_blocker()}"])


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
    """root/lib: tcourse and the learner-side grader modules, read-only (world-readable for the uid mode)."""
    lib = root / "lib"
    shutil.copytree(REPO / "tcourse", lib / "tcourse", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (lib / "grader").mkdir()
    (lib / "grader" / "__init__.py").write_text('"""Kernel-side copy: the learner-side modules only."""\n', encoding="utf-8")
    for name in LIB_MODULES:
        shutil.copy2(REPO / "grader" / name, lib / "grader" / name)
    for p in sorted(lib.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    lib.chmod(0o555)
    return lib


SCRATCH_MOUNTS = ("/tmp", "/run", "/var")


def _bwrap_argv(root: Path, device: str, binds: list[tuple[str, Path]], chdir: Path) -> list[str]:
    # /tmp, /run and /var empty and read-only: a tmpfs there would hold whatever the kernel wrote in RAM, out of
    # the watchdog's sight (TMPDIR, HOME and the caches are in root/rt, whose files it counts)
    argv = [bwrap(), "--unshare-all", "--die-with-parent", "--new-session", "--proc", "/proc"]
    for d in SCRATCH_MOUNTS:
        argv += ["--tmpfs", d]
    if device == "cuda":
        argv += ["--dev", "/dev"]
        for dev in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(dev), str(dev)]
        if os.path.isdir("/sys"):
            argv += ["--ro-bind", "/sys", "/sys"]
    else:
        argv += ["--dev", "/dev"]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    for d in _python_dirs():
        argv += ["--ro-bind", d, d]
    for how, path in binds:
        argv += [how, str(path), str(path)]
    for d in SCRATCH_MOUNTS:  # after the binds, whose mount points may sit below them
        argv += ["--remount-ro", d]
    # the new root is a tmpfs too, and so are the folders bwrap makes in it for the binds (/work, /home/...): files
    # written there would sit in RAM, out of the watchdog's sight (3 GiB, found 2026-12-07). Read-only, not
    # recursive: the binds keep their own modes.
    return argv + ["--remount-ro", "/", "--chdir", str(chdir)]


def kernel_argv(root: Path, device: str, iso: Isolation) -> list[str]:
    py = [sys.executable, "-m", "grader.kernel_io", "-f", "{connection_file}"]
    if iso.mode == "uid":
        return [sys.executable, "-m", "grader.dropuid", str(iso.uid), "--"] + py
    if iso.mode != "bwrap":
        return py
    argv = _bwrap_argv(root, device, [("--bind", root / "work"), ("--bind", root / "rt"), ("--ro-bind", root / "lib")],
                       root / "work")
    # The kernel's parent is bwrap's init (PID 1 in the namespace): ipykernel's parent poller would read
    # that as "my parent exited" unless told that PID 1 is its parent (bwrap kills it with the worker).
    return argv + ["--setenv", "JPY_PARENT_PID", "1", "--"] + py


def replay_argv(root: Path, device: str, iso: Isolation, cases: list[str]) -> list[str]:
    py = [sys.executable, "-m", "grader.replay", str(root), device, ",".join(cases)]
    if iso.mode == "uid":
        return [sys.executable, "-m", "grader.dropuid", str(iso.uid), "--"] + py
    if iso.mode != "bwrap":
        return py
    return _bwrap_argv(root, device, [("--ro-bind", root / "work"), ("--bind", root / "replay"),
                                      ("--ro-bind", root / "lib")], root / "replay") + ["--"] + py


def base_env(root: Path, home: Path, device: str) -> dict[str, str]:
    """An environment with nothing of the grader's beyond PATH, locale and the GPU selection."""
    env = {k: v for k, v in os.environ.items() if k in ENV_KEEP}
    # USER/LOGNAME: getpass.getuser() (torch asks it for cache paths) reads them before the password database, where a
    # throwaway user (the uid mode) has no entry: KeyError in every case on an H100 node (2026-12-07)
    env.update({"HOME": str(home), "TMPDIR": str(home / "tmp"), "MPLCONFIGDIR": str(home / "mpl"), "MPLBACKEND": "Agg",
                "USER": "learner", "LOGNAME": "learner",
                "TRITON_CACHE_DIR": str(home / "triton"), "PYTHONPATH": str(root / "lib"),
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "TCOURSE_DEVICE": device,
                "TRITON_DEFAULT_FP_FUSION": "1"})
    for sub in ("tmp", "mpl", "triton"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return env


def _own(path: Path, uid: int) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, uid, uid, follow_symlinks=False)
    path.chmod(0o700)


def prepare(root: Path, device: str, marker: str, iso: Isolation) -> None:
    """lib/, rt/ and ctl/: the kernelspec the worker starts, the kernel's environment, the isolation."""
    root.chmod(0o711)
    make_lib(root)
    rt = root / "rt"
    env = base_env(root, rt / "home", device)
    (rt / "ipython").mkdir(parents=True, exist_ok=True)
    env.update({"IPYTHONDIR": str(rt / "ipython"), "JUPYTER_RUNTIME_DIR": str(rt),
                "TCOURSE_GRADER_DIR": str(root / "work"), "TCOURSE_GRADER_RUN": marker,
                # the learner's run computes float32 as the replay does (tcourse.setup: prepare_interpreter(grading=True)),
                # with a seed of its own: no notebook-only value is left to tell the two apart from a GPU
                "TCOURSE_GRADING_FLOATS": str(secrets.randbits(32))})
    spec = root / "ctl" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    (root / "ctl").chmod(0o700)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": kernel_argv(root, device, iso), "display_name": "tcourse grader", "language": "python",
        "interrupt_mode": "message"}), encoding="utf-8")
    (root / "ctl" / "kernel_env.json").write_text(json.dumps(env), encoding="utf-8")
    (root / "ctl" / "isolation.json").write_text(json.dumps({"mode": iso.mode, "uid": iso.uid}), encoding="utf-8")
    if iso.mode == "uid":
        _own(root / "work", iso.uid)
        _own(rt, iso.uid)


def prepare_replay(root: Path, device: str, iso: Isolation) -> dict[str, str]:
    """After the learner's run: replay/ handed to the replay (its user in the uid mode); its environment."""
    rp = root / "replay"
    env = base_env(root, rp / "home", device)
    (rp / "out").mkdir(exist_ok=True)
    if iso.mode == "uid":
        _own(rp, iso.uid)
        os.chown(root / "work", iso.uid, iso.uid)
    return env


def kill_leftovers(iso: Isolation) -> int:
    """Every process of the run's throwaway user (uid mode), then its files in the shared temporary folders
    (which may live in RAM); how many processes there were."""
    if iso.mode != "uid":
        return 0
    killed = procs.kill_uid(iso.uid)
    for d in procs.SHARED_TMP:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != iso.uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                pass
    return killed
