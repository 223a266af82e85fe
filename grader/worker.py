"""Worker process: execute one rebuilt notebook with nbclient, cell by cell, and log each cell's fate.

    python -m grader.worker WORKDIR CELL_TIMEOUT_S

Started by :mod:`grader.execute`, one process per submission, in WORKDIR (which holds only the
rebuilt notebook, the plan and the inputs). Writes ``status.jsonl``: one JSON line per executed cell
``{"index", "id", "role", "status": ok|error|timeout|dead, "error"}``, flushed as it goes, so a
worker killed by the whole-submission budget still leaves the verdicts of the cells before.
Cell outputs are dropped as soon as a cell finishes (an output flood is not kept around).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

STOP_ON_ERROR = ("setup", "given", "solution")  # nothing after them can work


def main(workdir: str, cell_timeout: float) -> int:
    wd = Path(workdir)
    nb = nbformat.read(wd / "notebook.ipynb", as_version=4)
    client = NotebookClient(
        nb, timeout=cell_timeout, kernel_name="python3", shutdown_kernel="immediate", allow_errors=False,
        interrupt_on_timeout=True, record_timing=False, resources={"metadata": {"path": str(wd)}},
        error_on_timeout={"ename": "CellTimeout", "evalue": f"cell ran longer than {cell_timeout:g} s",
                          "traceback": []},
    )
    with open(wd / "status.jsonl", "a", encoding="utf-8") as log, client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            role = cell.metadata.get("tcourse", {}).get("role", "")
            line = {"index": i, "id": cell.get("id", ""), "role": role, "status": "ok", "error": ""}
            try:
                client.execute_cell(cell, i)
            except CellTimeoutError as e:
                line.update(status="timeout", error=str(e)[-500:])
            except DeadKernelError as e:
                line.update(status="dead", error=str(e)[-500:])
            except CellExecutionError as e:
                timed_out = e.ename == "CellTimeout"
                line.update(status="timeout" if timed_out else "error",
                            error=f"{e.ename}: {e.evalue}"[-1500:])
            cell.outputs = []
            log.write(json.dumps(line) + "\n")
            log.flush()
            if line["status"] == "dead" or (line["status"] != "ok" and role in STOP_ON_ERROR):
                break
        _kill_kernel_children(client)
    return 0


def _kill_kernel_children(client: NotebookClient) -> None:
    """Processes the student's code started are killed with the kernel (a double-forked daemon escapes)."""
    pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
    if not pid:
        return
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for p in children:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2])))
