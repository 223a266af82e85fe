#!/usr/bin/env bash
# Everything the course records on a GPU node without internet (the H200), in one go.
#
#   here:   ./course.sh wheelhouse .gpu/wheels --kernel-only
#           (cd .gpu && apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0)
#   there:  bash scripts/gpu_session.sh STEP... [--out DIR]
#
# Steps: grader (GPU grader tests + every solution graded on cuda, in a bubblewrap sandbox with the
# NVIDIA device files bound in), chapters (scripts/record_gpu.py: every chapter re-recorded in place),
# frontier (scripts/record_frontier_gpu.py, chapters 8-10), extras (scripts/record_extras_gpu.sh:
# Nsight Compute and Proton excerpts). Logs and a tarball of what changed go to DIR (default: results/h200/logs).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR=results/h200/logs steps=()
while (($#)); do
  case $1 in
    --out) OUT_DIR=$2; shift ;;
    *) steps+=("$1") ;;
  esac
  shift
done
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
if ! python3 -c 'import nbclient' 2>/dev/null; then
  ./course.sh install-offline .gpu/wheels > "$OUT_DIR/install.log" 2>&1 || { tail -20 "$OUT_DIR/install.log"; exit 1; }
fi
if ! command -v bwrap >/dev/null && compgen -G ".gpu/*.deb" >/dev/null; then
  mkdir -p /tmp/bw && for f in .gpu/*.deb; do dpkg -x "$f" /tmp/bw; done
  export PATH=/tmp/bw/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/bw/usr/lib/x86_64-linux-gnu:/tmp/bw/lib/x86_64-linux-gnu
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT_DIR/gpu.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$OUT_DIR/gpu.txt" 2>&1

run() {  # name, command...: time it, keep its log, never stop the session
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name"
  "$@" > "$OUT_DIR/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - t0)) s"; tail -4 "$OUT_DIR/$name.log"
}

for step in "${steps[@]}"; do
  case $step in
    grader)
      run grader_sandbox python3 -c 'from grader import sandbox; print(sandbox.choose().describe())'
      run grader_gpu_tests python3 -m pytest -q -p no:cacheprovider tests/test_grader_gpu.py
      mkdir -p results/h200/grader_solutions
      for nb in solutions/ex*.ipynb; do
        run "grade_$(basename "$nb" .ipynb)" python3 -m grader check "$nb" --device cuda \
          --json "results/h200/grader_solutions/$(basename "$nb" .ipynb).json"
      done ;;
    chapters) run record_chapters python3 scripts/record_gpu.py ;;
    frontier) [[ -f scripts/record_frontier_gpu.py ]] && run record_frontier python3 scripts/record_frontier_gpu.py ;;
    extras) [[ -f scripts/record_extras_gpu.sh ]] && run record_extras bash scripts/record_extras_gpu.sh ;;
    *) echo "unknown step $step" ;;
  esac
done
tar czf "$OUT_DIR/changed.tgz" $(git status --porcelain --untracked-files=all -- notebooks results | awk '{print $2}' \
  | grep -v "^$OUT_DIR") 2>/dev/null
echo "changed files: $(tar tzf "$OUT_DIR/changed.tgz" 2>/dev/null | wc -l)"
