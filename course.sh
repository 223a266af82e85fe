#!/usr/bin/env bash
# One entry point for the course.
#   ./course.sh lab          set up .venv (first run only) and open the course in JupyterLab
#   ./course.sh test         set up .venv (+ test tools) and run the whole test suite
#   ./course.sh wheelhouse [DIR] [--kernel-only]   wheels for an offline GPU node (Python 3.12, Linux x86-64)
#   ./course.sh install-offline DIR                install the course from such a wheelhouse, no network
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}

link_repo() {  # make `import tcourse` / `python -m grader` work anywhere for this interpreter
  "$1" - "$PWD" <<'PY'
import sys, sysconfig, pathlib
pathlib.Path(sysconfig.get_paths()["purelib"], "triton-course.pth").write_text(sys.argv[1] + "\n")
PY
}

setup() {  # $1: extra requirement files
  local stamp="$VENV/.tcourse-stamp" want base
  want=$(cat requirements.txt requirements-lock.txt "$@" | sha256sum | cut -c1-16)
  base=$(cat requirements.txt requirements-lock.txt | sha256sum | cut -c1-16)
  # a clone moved or copied elsewhere keeps its .venv: the link follows the folder this command runs in
  if [[ -f $stamp ]] && grep -qx "$want" "$stamp"; then link_repo "$VENV/bin/python"; return; fi
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "Python >= 3.10 needed (found $("$PY" -V))"; exit 1; }
  [[ -x $VENV/bin/python ]] || "$PY" -m venv "$VENV"
  local reqs=(-r requirements.txt) f
  for f in "$@"; do reqs+=(-r "$f"); done
  # requirements.txt holds the tested ranges; requirements-lock.txt pins the versions CI ran.
  # triton is not pinned there: torch's Linux CUDA wheels pin their own triton (inside our range).
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "${reqs[@]}" -c requirements-lock.txt
  link_repo "$VENV/bin/python"
  printf '%s\n' "$want" "$base" > "$stamp"  # extras installed on top: the plain `lab` set is there too
}

case "${1:-}" in
  lab)
    setup
    root=(); [[ $(id -u) == 0 ]] && root=(--allow-root)  # containers and cloud GPU boxes often run as root
    # The course's JupyterLab settings (no news pop-up, no update check), namespaced in overrides.d.
    install -D -m 644 jupyter/overrides.json "$VENV/share/jupyter/lab/settings/overrides.d/triton-course.json"
    venv=$(cd "$VENV" && pwd)  # VENV may be given relative or absolute
    export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"  # JupyterLab's terminals use the course's python
    # Rooted at the repository (chapters link ../diagrams, ../exercises), opening chapter 0; notebooks
    # open unmodified (tcourse/labserver.py).
    exec "$VENV/bin/python" -m jupyterlab "${root[@]}" --ServerApp.root_dir="$PWD" \
      --ServerApp.contents_manager_class=tcourse.labserver.CourseContentsManager \
      --LabApp.default_url=/lab/tree/notebooks/00_roadmap_and_setup.ipynb "${@:2}" ;;
  test)
    setup requirements-dev.txt
    exec "$VENV/bin/python" -m pytest -n 2 "${@:2}" ;;
  wheelhouse)
    exec bash scripts/wheelhouse.sh "${@:2}" ;;
  install-offline)
    [[ -n ${2:-} ]] || { echo "usage: ./course.sh install-offline WHEELHOUSE_DIR"; exit 2; }
    "$PY" -m pip install --no-index --find-links "$2" -r "$2/requirements.txt"
    link_repo "$PY" ;;
  *)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
