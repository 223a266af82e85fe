#!/usr/bin/env bash
# Wheels for a GPU node without internet (Python 3.12, Linux x86-64), such as a university cluster
# node or the course's H200: such nodes usually have torch + triton (matching their CUDA) but none
# of the Jupyter stack (nbclient, ipykernel, ipywidgets, pyzmq, tornado, ...).
#
#   ./course.sh wheelhouse [DIR] [--kernel-only]    # here, with internet: download into DIR (default wheelhouse/)
#   ./course.sh install-offline DIR                 # there: pip --no-index from DIR, then link the repo
#
# --kernel-only: only what executing notebooks and grading needs (no JupyterLab server): ~20 MB.
# torch and triton are never included: take the node's own builds (they must match its CUDA driver).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=wheelhouse KERNEL_ONLY=0 PYV=${PYV:-3.12}
for a in "$@"; do
  case $a in
    --kernel-only) KERNEL_ONLY=1 ;;
    -*) echo "unknown option $a"; exit 2 ;;
    *) DIR=$a ;;
  esac
done
mkdir -p "$DIR"
if ((KERNEL_ONLY)); then
  grep -E '^(nbformat|nbclient|ipykernel|ipywidgets|pyyaml|psutil)\b' requirements.txt > "$DIR/requirements.txt"
else
  grep -v -E '^(torch|triton)\b' requirements.txt > "$DIR/requirements.txt"
fi
plat=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  plat+=(--platform "$p")
done
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --implementation cp \
  --python-version "$PYV" "${plat[@]}" -d "$DIR" -r "$DIR/requirements.txt" -c requirements-lock.txt
echo "$(ls "$DIR"/*.whl | wc -l) wheels, $(du -sh "$DIR" | cut -f1) in $DIR (for Python $PYV, Linux x86-64)"
echo "On the node: ./course.sh install-offline $DIR"
