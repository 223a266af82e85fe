#!/usr/bin/env bash
# Everything the course records on a GPU node without internet (the H200), in one go.
#
#   here:   ./course.sh wheelhouse .gpu/wheels --kernel-only
#           (cd .gpu && apt-get download bubblewrap libcap2 libselinux1 libpcre2-8-0)
#   there:  bash scripts/gpu_session.sh STEP... [--out DIR]
#
# Steps (each recording step stops itself in time for the tarball; record:NOTEBOOK re-records one chapter): grader (GPU grader tests + every solution graded on cuda, in a bubblewrap sandbox with the
# NVIDIA device files bound in), chapters (scripts/record_gpu.py: every chapter re-recorded in place; chapters-a: 00-04, chapters-b: 05-07, chapters-c: 08-10),
# frontier (scripts/record_frontier_gpu.py, chapters 8-10), isolation (the grader without bubblewrap:
# throwaway users), extras (
# Nsight Compute and Proton excerpts, scripts/record_extras_gpu.py). Logs go to results/h200/logs; with --out DIR, a tarball of every
# file the session changed or added under notebooks/ and results/ (logs included) is written to DIR.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=results/h200/logs TAR_DIR="" steps=()
while (($#)); do
  case $1 in
    --out) TAR_DIR=$2; shift ;;
    *) steps+=("$1") ;;
  esac
  shift
done
mkdir -p "$LOGS"
touch /tmp/gpu-session-start
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
if ! python3 -c 'import nbclient' 2>/dev/null; then
  ./course.sh install-offline .gpu/wheels > "$LOGS/install.log" 2>&1 || { tail -20 "$LOGS/install.log"; exit 1; }
fi
if ! command -v bwrap >/dev/null && compgen -G ".gpu/*.deb" >/dev/null; then
  mkdir -p /tmp/bw && for f in .gpu/*.deb; do dpkg -x "$f" /tmp/bw; done
  export PATH=/tmp/bw/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/bw/usr/lib/x86_64-linux-gnu:/tmp/bw/lib/x86_64-linux-gnu
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$LOGS/gpu.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$LOGS/gpu.txt" 2>&1

run() {  # name, command...: time it, keep its log, never stop the session
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name"
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - t0)) s"; tail -4 "$LOGS/$name.log"
  return $rc
}

bwd_test() { run kernel_tests_gpu_backward timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py -k backward_gpu; }

for step in "${steps[@]}"; do
  case $step in
    grader)  # the GPU grader tests and every solution graded on the GPU, side by side
      run grader_sandbox python3 -c 'from grader import sandbox; print(sandbox.choose().describe())'
      rm -rf results/h200/grader_solutions
      run grader_gpu_tests python3 -m pytest -q -p no:cacheprovider tests/test_grader_gpu.py &
      run grade_solutions python3 -m grader grade solutions/ --out results/h200/grader_solutions --device cuda --workers 4
      wait
      rm -rf results/h200/grader_solutions/.cache ;;
    isolation)  # the throwaway-user isolation (no bubblewrap), on a machine whose Python other users can run
      run isolation_uid env TCOURSE_GRADER_SANDBOX=uid python3 -m pytest -q -p no:cacheprovider tests/test_grader_rigor.py -k uid
      run isolation_uid_cuda env TCOURSE_GRADER_SANDBOX=uid python3 -m grader check solutions/ex01_axpy.ipynb --device cuda \
        --json results/h200/grader_uid_ex01_axpy.json ;;
    chapters) run record_chapters timeout 520 python3 scripts/record_gpu.py ;;
    chapters-a) run record_chapters_a timeout 480 python3 scripts/record_gpu.py notebooks/0[0-4]_*.ipynb ;;
    chapters-b) run record_chapters_b timeout 400 python3 scripts/record_gpu.py notebooks/0[5-7]_*.ipynb ;;
    chapters-c) run record_chapters_c timeout 480 python3 scripts/record_gpu.py notebooks/0[89]_*.ipynb notebooks/1[0-9]_*.ipynb ;;
    frontier) [[ -f scripts/record_frontier_gpu.py ]] && run record_frontier python3 scripts/record_frontier_gpu.py ;;
    extras) [[ -f scripts/record_extras_gpu.py ]] && run record_extras python3 scripts/record_extras_gpu.py ;;
    fwd2)  # the pipelined Gluon attention: correctness first, in a time limit (hand-written barriers can hang)
      run probe_fwd2check timeout 120 python3 scripts/probe_issue18.py fwd2check
      grep -q "'ok': False" results/h200/logs/probe_fwd2check.log || run probe_fwd2 timeout 420 python3 scripts/probe_issue18.py fwd2 ;;
    fwd4)  # the pipelined Gluon attention's tile orders: correctness first, time-limited, then timing
      run probe_fwd4check timeout 150 python3 scripts/probe_issue18.py fwd4check
      grep -q "'ok': False" results/h200/logs/probe_fwd4check.log || run probe_fwd4 timeout 300 python3 scripts/probe_issue18.py fwd4 ;;
    fwd4-again)  # the tile orders timed once more (results/h200/issue18/fwd4_run2.json)
      run probe_fwd4_run2 timeout 200 python3 scripts/probe_issue18.py fwd4 && mv results/h200/issue18/fwd4.json results/h200/issue18/fwd4_run2.json ;;
    ncu-bwd)  # Nsight Compute on the D=128 backward at S=4096: the Gluon kernel causal and not, the Triton pair causal
      ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
      sections=(--clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
                --section SchedulerStats --section WarpStateStats --section LaunchStats --section Occupancy)
      run ncu_gluon_bwd_D128_causal timeout 150 "$ncu" "${sections[@]}" --kernel-name attention_bwd_kernel --launch-skip 2 \
        --launch-count 1 python3 scripts/profile_gbwd.py 128 gluon causal
      run ncu_gluon_bwd_D128_v2 timeout 150 "$ncu" "${sections[@]}" --kernel-name attention_bwd_kernel --launch-skip 2 \
        --launch-count 1 python3 scripts/profile_gbwd.py 128 gluon
      run ncu_triton_bwd_D128_causal timeout 150 "$ncu" "${sections[@]}" --kernel-name "regex:attention_bwd_(dkdv|dq)_kernel" \
        --launch-skip 4 --launch-count 2 python3 scripts/profile_gbwd.py 128 triton causal ;;
    gbwd4)  # the Gluon backward's peeled diagonal: correctness, then timing, the suite's backward family
      # (results/h200/bench_suite_attention_bwd.json, which the appendix reads; kept as issue18/..._run1), its GPU test
      run probe_gbwdcheck timeout 180 python3 scripts/probe_issue18.py gbwdcheck
      if ! grep -q "'ok': False" results/h200/logs/probe_gbwdcheck.log; then
        run probe_gbwd4 timeout 200 python3 scripts/probe_issue18.py gbwd4
        run bench_suite_bwd timeout 120 python3 -m bench --only attention_bwd --rounds 5 --no-host
        bwd_test
      fi ;;
    gbwd5)  # the non-causal Gluon backward's first pair peeled too: its GPU test, timing, the suite's backward family
      bwd_test
      if grep -q " passed" results/h200/logs/kernel_tests_gpu_backward.log && ! grep -q "failed" results/h200/logs/kernel_tests_gpu_backward.log; then
        run probe_gbwd5 timeout 100 python3 scripts/probe_issue18.py gbwd5
        run bench_suite_bwd timeout 100 python3 -m bench --only attention_bwd --rounds 5 --no-host
      fi ;;
    fwd6) run probe_fwd6 timeout 420 python3 scripts/probe_issue18.py fwd6 ;;  # the forward's row sums by the tensor cores, per config
    mm8192)  # matmul 8192^3 configs by do_bench and GPU time, the SM clock and power sampled every 200 ms beside
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$LOGS/mm8192_clocks.csv" &
      smi=$!
      run probe_mm8192 timeout 300 python3 scripts/probe_issue18.py mm8192
      kill $smi ;;
    fwd7) run probe_fwd7 timeout 300 python3 scripts/probe_issue18.py fwd7 ;;  # a persistent, flattened Triton forward
    mm1024b) run probe_mm1024b timeout 200 python3 scripts/probe_issue18.py mm1024b ;;  # C from registers; K steps of 32
    fwd8) run probe_fwd8 timeout 200 python3 scripts/probe_issue18.py fwd8 ;;  # S1024 D64 configs for more programs per SM
    fwd9) run probe_fwd9 timeout 300 python3 scripts/probe_issue18.py fwd9 ;;  # the Gluon forward, two programs per SM at D=64
    mm1024t) run probe_mm1024t timeout 300 python3 scripts/probe_issue18.py mm1024t ;;  # 1024^3 timers, round by round
    mm1024u)  # 1024^3: stock do_bench against one kept flush buffer, addresses, kernel durations; SM clock every 50 ms beside
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 50 > "$LOGS/mm1024u_clocks.csv" &
      smi=$!
      run probe_mm1024u timeout 300 python3 scripts/probe_issue18.py mm1024u
      kill $smi ;;
    mm1024s)  # 1024^3 with the K loop split between two MMA warpgroups: checked first (hand-written barriers), then timed
      run probe_mm1024scheck timeout 150 python3 scripts/probe_issue18.py mm1024scheck
      grep -q "all ok: True" results/h200/logs/probe_mm1024scheck.log && run probe_mm1024s timeout 330 python3 scripts/probe_issue18.py mm1024s ;;
    mm1024k)  # 1024^3 with K split between two programs (flags in global memory): checked first, then timed; 64x64 tiles
      run probe_mm1024kcheck timeout 200 python3 scripts/probe_issue18.py mm1024kcheck
      grep -q "all ok: True" results/h200/logs/probe_mm1024kcheck.log && run probe_mm1024k timeout 240 python3 scripts/probe_issue18.py mm1024k ;;
    smv) run probe_smv timeout 300 python3 scripts/probe_issue18.py smv ;;  # softmax: its loads with and without evict_first
    smh) run probe_smh timeout 300 python3 scripts/probe_issue18.py smh ;;  # the one-block softmax: load and store hints around 32 MiB
    hints2) run probe_hints2 timeout 240 python3 scripts/probe_issue18.py hints2 ;;  # each cache hint against no hint, interleaved
    hints3) run probe_hints3 timeout 200 python3 scripts/probe_issue18.py hints3 ;;  # online softmax: evict_last against no hint
    bench-memory) run bench_suite_memory timeout 200 python3 -m bench --only axpy,softmax --rounds 5 --no-host ;;  # after a change to AXPY or softmax only
    axpy-softmax-tests) run kernel_tests_gpu_axpy_softmax timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py -k "softmax or evict or axpy" ;;
    axpyv) run probe_axpyv timeout 240 python3 scripts/probe_issue18.py axpyv ;;  # AXPY configs and cache policies, dirty and clean L2
    mm1024n) run probe_mm1024n timeout 300 python3 scripts/probe_issue18.py mm1024n ;;  # 1024^3: a 9-stage ring
    l2p) run probe_l2p timeout 420 python3 scripts/probe_issue18.py l2p ;;  # the TMA maps' L2 promotion, 128B / 256B / none
    ncu-attn)  # Nsight Compute on the S1024 D64 forward: cuDNN's kernel, ours (Triton TMA) and the pipelined Gluon one
      ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
      run ncu_attention_S1024_D64 timeout 200 "$ncu" --clock-control none --section SpeedOfLight --section LaunchStats \
        --section Occupancy --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis --kernel-name regex:'sdpa|attention' --launch-count 6 python3 scripts/profile_attention.py ;;
    fwd11)  # the Gluon forward with its P V wait held after the softmax (PIN_WAIT): checked, time-limited, then timed
      run probe_fwd11check timeout 150 python3 scripts/probe_issue18.py fwd11check
      grep -q "all ok: True" results/h200/logs/probe_fwd11check.log && run probe_fwd11 timeout 400 python3 scripts/probe_issue18.py fwd11 ;;
    gbwd12)  # the Gluon backward with dP^T's wait held after the exponentials (PIN_WAIT): checked, time-limited, then timed
      run probe_gbwd12check timeout 200 python3 scripts/probe_issue18.py gbwd12check
      grep -q "'ok': False" results/h200/logs/probe_gbwd12check.log || run probe_gbwd12 timeout 300 python3 scripts/probe_issue18.py gbwd12 ;;
    fwd12)  # the forward with two or three in-order consumer warpgroups (gluon_attention_consumers): checked first (hand-written barriers), then timed
      run probe_fwd12check timeout 360 python3 scripts/probe_issue18.py fwd12check
      grep -q "all ok: True" results/h200/logs/probe_fwd12check.log && run probe_fwd12 timeout 400 python3 scripts/probe_issue18.py fwd12 ;;
    fwd12s) run probe_fwd12s timeout 150 python3 scripts/probe_issue18.py fwd12s ;;  # three consumers or two at S2048 and S8192 (D64)
    mmp)  # 4096^3 and 8192^3: a persistent warp-specialised Gluon matmul, checked first (hand-written barriers), then timed
      run probe_mmpcheck timeout 150 python3 scripts/probe_issue18.py mmpcheck
      grep -q "all ok: True" results/h200/logs/probe_mmpcheck.log && run probe_mmp timeout 300 python3 scripts/probe_issue18.py mmp ;;
    mmclock)  # 4096^3 back to back, 2 s per kernel (ours, cuBLAS, the persistent Gluon one); SM clock and power every 50 ms beside
      nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 50 > "$LOGS/mmclock_clocks.csv" &
      smi=$!
      run probe_mmclock timeout 200 python3 scripts/probe_issue18.py mmclock
      kill $smi ;;
    fwd10) run probe_fwd10 timeout 300 python3 scripts/probe_issue18.py fwd10 ;;  # 256-row programs, 16 warps, D=64
    fwd5) run probe_fwd5 timeout 240 python3 scripts/probe_issue18.py fwd5 ;;  # D=64 configs, each checked before timing
    consumers-test) run kernel_tests_gpu_consumers timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
      -k "consumers_gluon_attention_gpu or descriptor_kernels" ;;  # session 23: the in-order Gluon attention, the raw launch
    pipelined-test) run kernel_tests_gpu_pipelined timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py -k pipelined ;;
    attention-tests) run kernel_tests_gpu_attention timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "attention or pipelined or descriptor or repeated" ;;
    gbwd6)  # the D=64 backward configs (at fa4c118 also dQ's columns split): every config checked, time-limited, then timed
      run probe_gbwdcheck timeout 200 python3 scripts/probe_issue18.py gbwdcheck
      grep -q "'ok': False" results/h200/logs/probe_gbwdcheck.log || run probe_gbwd6 timeout 150 python3 scripts/probe_issue18.py gbwd6 ;;
    ncu-mm)  # Nsight Compute on 1024^3 matmuls: which kernel cuBLAS runs (tile, cluster), its grid and duration beside ours
      ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
      run ncu_matmul_1024 timeout 150 "$ncu" --clock-control none --section SpeedOfLight --section LaunchStats \
        --section Occupancy --section MemoryWorkloadAnalysis --launch-count 16 python3 scripts/profile_matmul.py ;;
    final-tests) run kernel_tests_gpu_final timeout 280 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "matmul or backward_gpu or bf16_gpu" ;;  # what issue 18's last changes touch: matmul's dispatch, the backward's
    gbwd7)  # the backward's program order (causal: heaviest key blocks first per group of heads; not causal: the programs
      # left after the last full wave split into query ranges): checked, time-limited, then profiled and timed
      run probe_gbwd7check timeout 200 python3 scripts/probe_issue18.py gbwd7check
      grep -q "'ok': False" results/h200/logs/probe_gbwd7check.log || run probe_gbwd7 timeout 330 python3 scripts/probe_issue18.py gbwd7 ;;
    gbwd8)  # D=64: dQ by one consumer in turn (DQ_ALT): checked, time-limited, then timed
      run probe_gbwd8check timeout 200 python3 scripts/probe_issue18.py gbwd8check
      grep -q "'ok': False" results/h200/logs/probe_gbwd8check.log || run probe_gbwd8 timeout 200 python3 scripts/probe_issue18.py gbwd8 ;;
    gbwd11)  # the persistent backward: checked, time-limited, then profiled and timed against one tile per program
      run probe_gbwd11check timeout 240 python3 scripts/probe_issue18.py gbwd11check &&
        ! grep -q "'ok': False" results/h200/logs/probe_gbwd11check.log && run probe_gbwd11 timeout 300 python3 scripts/probe_issue18.py gbwd11 ;;
    bench-bwd) run bench_suite_bwd timeout 120 python3 -m bench --only attention_bwd --rounds 5 --no-host ;;  # after a backward-only change
    mm1024) run probe_mm1024 timeout 200 python3 scripts/probe_issue18.py mm1024 ;;
    gmmhost)  # the Gluon matmul's host path at 1024^3, piece by piece, and the public matmul on it; then its GPU tests
      run probe_gmmhost timeout 150 python3 scripts/probe_issue18.py gmmhost
      run kernel_tests_gpu_gmm timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "matmul or descriptor_kernels or repeated" ;;
    gattnhost) run probe_gattnhost timeout 80 python3 scripts/probe_issue18.py gattnhost ;;  # its launch plan, host and do_bench
    gbwd)  # the Gluon backward: correctness first, time-limited (hand-written barriers can hang), then timing
      run probe_gbwdcheck timeout 150 python3 scripts/probe_issue18.py gbwdcheck
      grep -q "'ok': False" results/h200/logs/probe_gbwdcheck.log || run probe_gbwd timeout 300 python3 scripts/probe_issue18.py gbwd ;;
    probe) run probe_issue18 timeout 470 python3 scripts/probe_issue18.py host matmul fp8 bwd2 fwd ;;
    bwd-test) bwd_test ;;
    bwd2) bwd_test; run probe_bwd2 timeout 400 python3 scripts/probe_issue18.py bwd2 ;;  # its GPU test, then the config sweep
    bwd3) bwd_test; run probe_bwd3 timeout 400 python3 scripts/probe_issue18.py bwd3 ;;  # dQ by TMA reduce-add
    softmax-sweep) run probe_softmax timeout 150 python3 scripts/probe_issue18.py softmax ;;
    record-ex:*)  # one exercise's GPU recordings (results/h200/*.json), e.g. record-ex:solutions/ex01_axpy.ipynb; the notebook is not written back
      run "record_$(basename "${step#record-ex:}" .ipynb)" timeout 300 python3 scripts/record_gpu.py "${step#record-ex:}" --out /tmp/recorded_exercises ;;
    record:*)  # one chapter, e.g. record:notebooks/10_backward.ipynb
      run "record_$(basename "${step#record:}" .ipynb)" timeout 300 python3 scripts/record_gpu.py "${step#record:}" ;;
    tf32) run probe_tf32 timeout 120 python3 scripts/probe_tf32.py ;;  # what tl.dot does to float32 operands (tcourse.runtime copies it)
    bench) run bench_suite timeout 540 python3 -m bench --rounds 5 ;;  # the kernel-time pass at the end adds ~90 s
    bench-attention) run bench_suite_attention timeout 200 python3 -m bench --only attention --rounds 5 --no-host ;;  # after an attention-only change
    kernel-tests) run kernel_tests_gpu timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py ;;  # test_kernels_frontier.py is CPU-only (interpreter, CPU tensors)
    kernel-tests-rest)  # the GPU kernel tests that kernel-tests does not reach in its 240 s
      run kernel_tests_gpu_rest timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "bf16_gpu or direct_launch or repeated or pinned or raw_launch or descriptor or pipelined or backward_gpu or plan or axpy or softmax" ;;
    kernel-tests-unreached)  # the GPU kernel tests neither kernel-tests nor kernel-tests-rest reaches in its time
      run kernel_tests_gpu_unreached timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "consumers_gluon_attention_gpu or lean_launch or before_hopper" ;;
    lean)  # session 22: the lean C launch against Triton's, bench.host with it on and off, the launch tests
      run probe_lean timeout 300 python3 scripts/probe_issue18.py lean
      run kernel_tests_gpu_lean timeout 260 python3 -m pytest -q -p no:cacheprovider tests/test_kernels.py \
        -k "lean or direct_launch or repeated or raw_launch or descriptor or plan or axpy or softmax or pinned" ;;
    host) mkdir -p results/h200/issue18 && run host_final timeout 120 sh -c 'python3 -m bench.host > results/h200/issue18/host_final.json' ;;
    *) echo "unknown step $step" ;;
  esac
done
if [[ -n $TAR_DIR ]]; then
  find notebooks results -type f -newer /tmp/gpu-session-start > /tmp/changed.txt
  tar czf "$TAR_DIR/session.tgz" -T /tmp/changed.txt
  echo "changed files: $(wc -l < /tmp/changed.txt) -> $TAR_DIR/session.tgz"
fi
