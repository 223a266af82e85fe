"""``./course.sh lab`` as a learner starts it: the server is rooted at the repository (so a chapter's
``../diagrams/*.svg`` loads), opens chapter 0, and the course's settings turn the news pop-up off.

The server listens on 127.0.0.1 only, with a random token, and is stopped by its pid.
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIAGRAM = "diagrams/02_triton_vector_add_softmax.svg"  # what chapter 2's first cell shows as ../diagrams/...


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture(scope="module")
def lab():
    if not (Path(sys.prefix) / "bin" / "jupyter-lab").exists():
        pytest.skip("jupyterlab is not installed in this interpreter's environment")
    port, token = free_port(), os.urandom(8).hex()
    env = dict(os.environ, VENV=sys.prefix)  # the environment running the tests: no second install
    proc = subprocess.Popen(
        ["bash", str(ROOT / "course.sh"), "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except (urllib.error.URLError, ConnectionError):
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                pytest.fail(f"the lab server did not come up:\n{proc.stdout.read()[-3000:]}")
            time.sleep(0.5)
    yield base, token
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def get(url: str, opener=None):
    with (opener or urllib.request.build_opener()).open(url, timeout=10) as r:
        return r.status, r.headers, r.read()


def test_a_chapter_diagram_loads_through_the_server(lab):
    base, token = lab
    status, headers, body = get(f"{base}/files/{DIAGRAM}?token={token}")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert body == (ROOT / DIAGRAM).read_bytes()


def test_the_file_browser_shows_exercises_and_solutions(lab):
    base, token = lab
    listing = json.loads(get(f"{base}/api/contents?token={token}")[2])
    names = {item["name"] for item in listing["content"]}
    assert {"notebooks", "exercises", "solutions", "diagrams"} <= names


def test_the_lab_opens_chapter_0(lab):
    base, token = lab
    try:
        get(f"{base}/?token={token}", urllib.request.build_opener(NoRedirect))
        location = None
    except urllib.error.HTTPError as e:
        location = e.headers["Location"]
    assert location and location.split("?")[0].endswith("/lab/tree/notebooks/00_roadmap_and_setup.ipynb")


def test_the_news_pop_up_is_off(lab):
    base, token = lab
    plugin = "@jupyterlab/apputils-extension:notification"
    schema = json.loads(get(f"{base}/lab/api/settings/{plugin}?token={token}")[2])["schema"]
    # overrides.d replaces the schema's defaults (a learner's own settings still win)
    assert schema["properties"]["fetchNews"]["default"] == "false"
    assert schema["properties"]["checkForUpdates"]["default"] is False


def test_a_notebook_opens_with_the_kernels_language_info(lab):
    """JupyterLab marks a notebook modified when the kernel's language_info differs from the stored one."""
    from tcourse.labserver import kernel_language_info

    base, token = lab
    model = json.loads(get(f"{base}/api/contents/notebooks/02_vector_add_axpy.ipynb?token={token}")[2])
    assert model["content"]["metadata"]["language_info"] == kernel_language_info()
    assert kernel_language_info()["version"] == sys.version.split()[0]  # the kernel is this Python


def test_saving_writes_the_normalized_language_info(tmp_path):
    import asyncio

    import nbformat

    from tcourse import nbtools
    from tcourse.labserver import CourseContentsManager, kernel_language_info

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# x", id="x-00")])
    nb.metadata["language_info"] = kernel_language_info()
    cm = CourseContentsManager(root_dir=str(tmp_path))
    asyncio.run(cm.save({"type": "notebook", "format": "json", "content": nb}, "x.ipynb"))
    saved = json.loads((tmp_path / "x.ipynb").read_text())
    assert saved["metadata"]["language_info"] == nbtools.LANGUAGE_INFO
    opened = asyncio.run(cm.get("x.ipynb"))
    assert opened["content"]["metadata"]["language_info"] == kernel_language_info()


def test_a_moved_clone_imports_tcourse_from_its_new_folder(tmp_path):
    """A clone copied or moved elsewhere keeps its .venv, whose link to the repository (``import tcourse`` in the
    lab's kernels) must follow the folder ``course.sh`` now runs in, not the one the venv was made in."""
    import hashlib

    moved = tmp_path / "moved"
    moved.mkdir()
    reqs = ["requirements.txt", "requirements-lock.txt", "requirements-dev.txt"]
    for f in ["course.sh"] + reqs:
        (moved / f).write_bytes((ROOT / f).read_bytes())
    venv = moved / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    stamp = [hashlib.sha256(b"".join((moved / f).read_bytes() for f in names)).hexdigest()[:16]
             for names in (reqs, reqs[:2])]
    (venv / ".tcourse-stamp").write_text("\n".join(stamp) + "\n")  # set up already: pip is not run again
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    link = Path(purelib) / "triton-course.pth"
    link.write_text("/where/the/clone/was\n")
    env = {k: v for k, v in os.environ.items() if k != "VENV"}
    r = subprocess.run(["bash", str(moved / "course.sh"), "test", "--version"], capture_output=True, text=True, env=env,
                       timeout=60)
    assert "No module named pytest" in r.stderr, r.stderr  # it got past setup to the venv's python
    assert link.read_text() == f"{moved}\n"
