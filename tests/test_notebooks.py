"""Every chapter runs top to bottom on a CPU through the interpreter, within its time budget."""
import time
from pathlib import Path

import nbclient
import nbformat
import pytest

from tcourse import nbtools

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ALL_NOTEBOOKS = CHAPTERS + sorted((ROOT / "exercises").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


def output_text(cell) -> str:
    return "".join(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))


def budget_s(path: Path) -> int:
    """Chapters 0-3: 60 s on 2 cores; chapters 4-7: 90 s (the issues' budgets)."""
    return 60 if int(path.name[:2]) <= 3 else 90


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_on_cpu(path, monkeypatch):
    monkeypatch.setenv("TCOURSE_DEVICE", "cpu")
    monkeypatch.delenv("TCOURSE_RECORD", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=budget_s(path), kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    t0 = time.time()
    client.execute()  # raises CellExecutionError with the failing cell and traceback
    took = time.time() - t0
    assert took < budget_s(path), f"{path.name} took {took:.0f} s on CPU (budget {budget_s(path)} s)"
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    env_table = output_text(first_code)
    assert "CPU interpreter (TRITON_INTERPRET=1)" in env_table, "the first code cell must print tcourse's environment table"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_is_normalized(path):
    assert path.read_text(encoding="utf-8") == nbtools.normalized_text(path), (
        f"{path} is not normalized: run python -m tcourse.nbtools normalize {path.relative_to(ROOT)}")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_stored_outputs_are_labelled_gpu_recordings(path):
    """Committed outputs come only from scripts/record_gpu.py on a GPU, never from the interpreter."""
    nb = nbformat.read(path, as_version=4)
    has_outputs = any(c.get("outputs") for c in nb.cells if c.cell_type == "code")
    if not has_outputs:
        return
    label = nb.metadata.get("tcourse", {}).get("recorded")
    assert label and label.get("device") and label.get("date"), f"{path.name} has outputs but no recording label"
    text = "".join(output_text(c) for c in nb.cells if c.cell_type == "code")
    for marker in ("CPU interpreter (TRITON_INTERPRET=1)", "[CPU]"):
        assert marker not in text, f"{path.name} stores outputs of an interpreter run ({marker!r})"


def test_there_are_eleven_chapters():
    assert [p.name[:2] for p in CHAPTERS] == [f"{i:02d}" for i in range(11)]
