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
# triton 3.6 with the locked numpy: NumPy 2.4 refuses int() of a one-element array, which Triton 3.6's interpreter
# took for every loop bound (tcourse.runtime.block_truth_is_an_error sets a working __index__)
NEW_NUMPY = {"triton": "3.6.0", "numpy": "2.4.6"}
CACHES = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tcourse-floor"

pytestmark = pytest.mark.skipif(os.environ.get("TCOURSE_SKIP_FLOOR") == "1", reason="TCOURSE_SKIP_FLOOR=1")


def _side_env(pins: dict) -> dict:
    """An environment whose ``pins`` (installed once into a cached side folder) come first on PYTHONPATH."""
    cache = CACHES / "-".join(pins.values())
    if not (cache / ".done").exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "--target", str(cache)] + [f"{k}=={v}" for k, v in pins.items()], check=True)
        (cache / ".done").write_text("ok")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TCOURSE_RECORD")}
    env.update(PYTHONPATH=f"{cache}{os.pathsep}{ROOT}", TCOURSE_DEVICE="cpu", MPLBACKEND="Agg")
    return env


@pytest.fixture(scope="module")
def floor_env():
    return _side_env(FLOOR)


@pytest.fixture(scope="module")
def new_numpy_env():
    return _side_env(NEW_NUMPY)


def test_floor_versions_are_the_ones_loaded(floor_env):
    r = subprocess.run([sys.executable, "-c", "import triton, numpy; print(triton.__version__, numpy.__version__)"],
                       capture_output=True, text=True, env=floor_env, check=True)
    assert r.stdout.split() == list(FLOOR.values())


@pytest.mark.parametrize("chapter", ["01_programming_model", "02_vector_add_axpy", "03_fused_softmax", "04_matmul_tiles"])
def test_chapter_runs_on_the_floor(floor_env, chapter):
    _run_chapter(floor_env, chapter, FLOOR)


def test_a_chapter_with_loops_runs_on_triton_3_6_with_the_locked_numpy(new_numpy_env):
    _run_chapter(new_numpy_env, "04_matmul_tiles", NEW_NUMPY)


def _run_chapter(env: dict, chapter: str, pins: dict) -> None:
    nb = ROOT / "notebooks" / f"{chapter}.ipynb"
    code = (
        "import nbformat, nbclient, sys\n"
        f"nb = nbformat.read({str(nb)!r}, as_version=4)\n"
        f"nbclient.NotebookClient(nb, timeout=120, kernel_name='python3', resources={{'metadata': {{'path': {str(nb.parent)!r}}}}}).execute()\n"
        "first = next(c for c in nb.cells if c.cell_type == 'code')\n"
        "print(''.join(o.get('text', '') for o in first.outputs))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"triton  {pins['triton']}" in r.stdout and f"numpy   {pins['numpy']}" in r.stdout
    assert "不在测试过的版本范围" not in r.stdout


@pytest.mark.parametrize("pins", ["floor", "new_numpy"])
def test_the_replays_checks_run_on_the_floor(pins, request):
    """The replay watches the interpreter by patching its builder (grader.replay.Guard), whose methods change between
    Triton versions: 3.6's create_masked_load takes an eviction policy that 3.9's does not, and every case of every
    CPU grade failed on 3.6 with a TypeError (found on an H100 node, 2026-12-07). The Guard's own tests, on the floor;
    and the GPU float model's (tcourse.gpu_floats patched builder methods 3.6 does not have: every case failed)."""
    tests = ("interleaved_launch or steered_launch or reversed_launch or wait_nothing or leaves_nothing_patched "
             "or look_back_chain or hints_are_checked or release_and_acquire or int_argument_of_1 "
             "or gpu_build_does or float32_as_a_gpu or fuses_orders")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_grader_rigor.py",
                        "tests/test_tcourse.py", "-k", tests], capture_output=True, text=True, env=request.getfixturevalue(f"{pins}_env"),
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-4000:]

