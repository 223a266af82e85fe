"""The low end of requirements.txt's ranges: triton 3.6 (what GPU clusters run today) with numpy < 2.4.

The rest of the suite runs on requirements-lock.txt (the high end). Here the floor's triton and
numpy are installed into a side folder put first on PYTHONPATH, and the CPU-heavy chapters run again.
Set TCOURSE_SKIP_FLOOR=1 to skip (it downloads ~200 MB the first time; cached afterwards).
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOOR = {"triton": "3.6.0", "numpy": "2.3.5"}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tcourse-floor" / "-".join(FLOOR.values())

pytestmark = pytest.mark.skipif(os.environ.get("TCOURSE_SKIP_FLOOR") == "1", reason="TCOURSE_SKIP_FLOOR=1")


@pytest.fixture(scope="module")
def floor_env():
    if not (CACHE / ".done").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--target", str(CACHE)] + [f"{k}=={v}" for k, v in FLOOR.items()], check=True)
        (CACHE / ".done").write_text("ok")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TCOURSE_RECORD")}
    env.update(PYTHONPATH=f"{CACHE}{os.pathsep}{ROOT}", TCOURSE_DEVICE="cpu", MPLBACKEND="Agg")
    return env


def test_floor_versions_are_the_ones_loaded(floor_env):
    r = subprocess.run([sys.executable, "-c", "import triton, numpy; print(triton.__version__, numpy.__version__)"],
                       capture_output=True, text=True, env=floor_env, check=True)
    assert r.stdout.split() == list(FLOOR.values())


@pytest.mark.parametrize("chapter", ["01_programming_model", "02_vector_add_axpy", "03_fused_softmax", "04_matmul_tiles"])
def test_chapter_runs_on_the_floor(floor_env, chapter):
    nb = ROOT / "notebooks" / f"{chapter}.ipynb"
    code = (
        "import nbformat, nbclient, sys\n"
        f"nb = nbformat.read({str(nb)!r}, as_version=4)\n"
        f"nbclient.NotebookClient(nb, timeout=120, kernel_name='python3', resources={{'metadata': {{'path': {str(nb.parent)!r}}}}}).execute()\n"
        "first = next(c for c in nb.cells if c.cell_type == 'code')\n"
        "print(''.join(o.get('text', '') for o in first.outputs))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=floor_env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"triton  {FLOOR['triton']}" in r.stdout and f"numpy   {FLOOR['numpy']}" in r.stdout
    assert "不在测试过的版本范围" not in r.stdout


def test_the_replays_checks_run_on_the_floor(floor_env):
    """The replay watches the interpreter by patching its builder (grader.replay.Guard), whose methods change between
    Triton versions: 3.6's create_masked_load takes an eviction policy that 3.9's does not, and every case of every
    CPU grade failed on 3.6 with a TypeError (found on an H100 node, 2026-12-07). The Guard's own tests, on the floor."""
    tests = ("interleaved_launch or steered_launch or reversed_launch or wait_nothing or leaves_nothing_patched "
             "or look_back_chain or hints_are_checked or release_and_acquire or int_argument_of_1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_grader_rigor.py",
                        "-k", tests], capture_output=True, text=True, env=floor_env, cwd=ROOT, timeout=600)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-4000:]

