"""Worker process: execute one rebuilt notebook with nbclient, cell by cell, and log each cell's fate.

    python -m grader.worker ROOT CELL_TIMEOUT_S DEVICE MEM_LIMIT_MB

Started by :mod:`grader.execute`, one process per submission. The kernel is the ``tcourse-grader``
kernelspec that :mod:`grader.sandbox` wrote under ``ROOT/ctl`` (bubblewrap when it works), talks over
ipc sockets in ``ROOT/rt`` (they work across the sandbox's network namespace) and runs in
``ROOT/work``. Writes ``ROOT/ctl/status.jsonl`` (out of the kernel's reach when sandboxed): one JSON
line per executed cell ``{"index", "id", "role", "status": ok|error|timeout|dead, "error"}``, flushed
as it goes.

- Outputs are never kept: every output message is dropped as it arrives; errors are read from the
  execute reply. The kernel publishes at most 1 Mi characters per stream and per message
  (:mod:`grader.kernel_io`): a flood would otherwise arrive as one message, parsed whole.
- A harness cell that kills the kernel, loses the CUDA context (``CudaContextLost``) or times out
  gets a fresh kernel for the next case: template and answer cells run again, then the remaining
  cases. Timeouts are per case and never cascade; the grader's whole-submission budget bounds the
  number of restarts. A timed-out kernel may not answer the interrupt at all (a GPU kernel that
  never ends, a long C call), so it is not reused.
- A watchdog kills the kernel when the resident memory of its process tree passes the limit.
- The worker is a child subreaper: whatever the student's code forks, even a double-forked daemon,
  stays its descendant and is killed with the kernel.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import threading
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from . import procs

STOP_ON_ERROR = ("setup", "given", "solution")  # nothing after them can work
PR_SET_CHILD_SUBREAPER = 36


class QuietClient(NotebookClient):
    """Drops every output; talks to the kernel over ipc sockets with this path prefix."""

    ipc_prefix = ""

    def output(self, outs, msg, display_id, cell_index):  # noqa: D102
        return None

    kernel_uid: int | None = None  # the uid isolation: the kernel must be able to read its connection file

    def create_kernel_manager(self):  # noqa: D102
        km = super().create_kernel_manager()
        km.transport, km.ip, km.connection_file = "ipc", self.ipc_prefix, self.ipc_prefix + ".json"
        uid = self.kernel_uid
        if uid is not None:
            write = km.write_connection_file

            def write_and_hand_over(**kw):
                write(**kw)
                os.chown(km.connection_file, uid, uid)
            km.write_connection_file = write_and_hand_over
        return km


def clip(text: str, n: int) -> str:
    """At most about ``n`` characters: the head (the exception's name) and the tail (where it happened)."""
    return text if len(text) <= n else f"{text[:n // 2]} … {text[-(n // 2):]}"


def own_peak_rss_mb() -> float:
    """This process's peak resident memory since it started Python (VmHWM).

    ``ru_maxrss`` would do on other systems, but on Linux it survives ``exec`` and so also counts the
    pages of the grader process that forked this worker."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def kill_descendants() -> None:
    """Kill every descendant of this process (the kernel, bwrap, and anything they forked)."""
    procs.kill_descendants(psutil.Process())


FILES_LIMIT_MB = 2048  # what the kernel's processes may write (outputs, caches): disk, or RAM on a tmpfs


def written_bytes(dirs: list[Path], uid: int | None, cap: int = 100_000) -> int:
    """Bytes of the files under ``dirs`` (only those owned by ``uid`` when given); past ``cap`` entries the
    count is reported as unlimited (a flood of empty files is an attack as well)."""
    total, seen, stack = 0, 0, [str(d) for d in dirs]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if uid is not None and st.st_uid != uid:
                    continue
                seen += 1
                if seen > cap:
                    return 1 << 62
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    total += st.st_blocks * 512
    return total


class Watchdog(threading.Thread):
    """Kills the process tree below this worker when its resident memory passes ``limit_mb``, or when the files
    it wrote (in the run's folders; with a throwaway user, also that user's files in the shared temporary
    folders, which may live in RAM) pass :data:`FILES_LIMIT_MB`."""

    def __init__(self, limit_mb: float, dirs: list[Path] = (), uid: int | None = None):
        super().__init__(daemon=True)
        self.limit, self.tripped, self.peak_mb = limit_mb * 2**20, False, 0.0
        self.dirs = list(dirs) + ([Path(d) for d in procs.SHARED_TMP] if uid is not None else [])
        self.uid, self.files_tripped = uid, False
        self._stop = threading.Event()

    def run(self):
        me = psutil.Process()
        tick = 0
        while not self._stop.wait(0.2):
            total = 0
            for p in me.children(recursive=True):
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)
            if total > self.limit:
                self.tripped = True
                kill_descendants()
            tick += 1
            if self.dirs and tick % 5 == 0 and written_bytes(self.dirs, self.uid) > FILES_LIMIT_MB * 2**20:
                self.tripped = self.files_tripped = True
                kill_descendants()

    def stop(self):
        self._stop.set()


def _session(nb, cells, root: Path, cell_timeout: float, log, record_prelude: bool, dog: Watchdog, n: int):
    """Run ``cells`` (indices) in a fresh kernel; return the harness cell index after which to restart, or None."""
    client = QuietClient(
        nb, timeout=cell_timeout, kernel_name="tcourse-grader", shutdown_kernel="immediate", allow_errors=False,
        interrupt_on_timeout=True, record_timing=False, resources={"metadata": {"path": str(root / "work")}},
        error_on_timeout={"ename": "CellTimeout", "evalue": f"cell ran longer than {cell_timeout:g} s", "traceback": []},
    )
    client.ipc_prefix = str(root / "rt" / f"k{n}")
    client.kernel_uid = json.loads((root / "ctl" / "isolation.json").read_text(encoding="utf-8")).get("uid")
    env = json.loads((root / "ctl" / "kernel_env.json").read_text(encoding="utf-8"))  # written by grader.sandbox
    try:
        with client.setup_kernel(env=env):
            for i in cells:
                cell = nb.cells[i]
                role = cell.metadata.get("tcourse", {}).get("role", "")
                line = {"index": i, "id": cell.get("id", ""), "role": role, "status": "ok", "error": ""}
                try:
                    client.execute_cell(cell, i)
                except CellTimeoutError as e:
                    line.update(status="timeout", error=str(e)[-500:])
                except DeadKernelError as e:
                    line.update(status="dead", error=str(e)[-500:])
                except CellExecutionError as e:
                    line.update(status="timeout" if e.ename == "CellTimeout" else "error",
                                error=clip(f"{e.ename}: {e.evalue}", 1500))
                    if e.ename == "CudaContextLost":
                        line["cuda_lost"] = True
                if line["status"] == "dead" and dog.files_tripped:
                    line["error"] = f"file limit: the kernel's processes wrote more than {FILES_LIMIT_MB} MiB of files"
                    line["files"] = True
                elif line["status"] == "dead" and dog.tripped:
                    line["error"] = f"memory limit: the kernel's resident memory passed {dog.limit / 2**20:.0f} MiB"
                    line["memory"] = True
                cell.outputs = []
                if not (role == "harness" or record_prelude) and line["status"] != "ok":
                    line["rerun"] = n  # a template/answer cell failed in a fresh kernel: the cases after it stop here
                if role == "harness" or record_prelude or "rerun" in line:
                    log.write(json.dumps(line) + "\n")
                    log.flush()
                if role == "harness" and (line["status"] in ("dead", "timeout") or line.get("cuda_lost")):
                    return i
                if line["status"] == "dead" or (line["status"] != "ok" and role in STOP_ON_ERROR):
                    return None
    finally:
        kill_descendants()
        dog.tripped = dog.files_tripped = False
    return None


def main(root: str, cell_timeout: float, device: str, mem_limit_mb: float) -> int:
    _subreaper()
    rootp = Path(root)
    nb = nbformat.read(rootp / "work" / "notebook.ipynb", as_version=4)
    prelude = [i for i, c in enumerate(nb.cells) if c.metadata.get("tcourse", {}).get("role") != "harness"]
    todo = [i for i in range(len(nb.cells)) if i not in prelude]
    uid = json.loads((rootp / "ctl" / "isolation.json").read_text(encoding="utf-8")).get("uid")
    dog = Watchdog(mem_limit_mb, [rootp / "work", rootp / "rt"], uid)
    dog.start()
    with open(rootp / "ctl" / "status.jsonl", "a", encoding="utf-8") as log:
        n = 0
        while todo:
            stop_at = _session(nb, prelude + todo, rootp, cell_timeout, log, n == 0, dog, n)
            if stop_at is None:
                break
            todo = [i for i in todo if i > stop_at]
            n += 1
    dog.stop()
    (rootp / "ctl" / "worker_peak.json").write_text(json.dumps({
        "kernel_peak_rss_mb": round(dog.peak_mb, 1),
        "worker_peak_rss_mb": round(own_peak_rss_mb(), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])))
