"""Run every reference-kernel benchmark on a GPU; write results/h200/bench_suite.json and plots.

    python -m bench                     # all families, results under results/h200/
    python -m bench --only matmul,axpy  # some families
    python -m bench --variants          # also the alternatives behind the public functions
    python -m bench --only softmax --match 4096x1000,4096x1024   # cases whose name contains one of these
    python -m bench --out DIR           # somewhere else

Each case: fresh random inputs, our kernel checked against a float64 (or fp32) torch reference
(relative Frobenius error; output memory poisoned with NaN first), then ours and each torch baseline
timed interleaved in one process with ``tcourse.bench.compare`` (do_bench medians, p20/p80; targets
are judged on these), and again with ``timer="gpu_time"`` (the same L2 clearing, calls queued behind
a GPU sleep so host launch time is not counted: a large gap between the two ratios is host overhead).
Memory-bound cases also get GB/s with L2 emptied by a read instead of do_bench's memset (``clean_l2``).
Then host microseconds per call of each kernel and of torch's (``bench.host``), since a launch
path slower than the GPU work shows up in the timings of small problems. Last, every case once more with
``timer="kernel"``: the kernels' own durations from the profiler, without the ~3 µs of event and launch work
that both event timers count (``tcourse.kernel_time``); last because the profiler slows the launches that
follow it for a while (``results/h200/issue18/mm1024u.json``).
Refuses to run under the interpreter or without a GPU.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import traceback
from pathlib import Path

from .targets import meets

DEFAULT_FAMILIES = ["axpy", "softmax", "matmul", "attention", "fp8", "attention_bwd", "other"]
HOST_TARGET = 1.5  # our host microseconds per call at most this many times torch's (issue 18)
GPU_TIME_ROUNDS = 2  # rounds of the second, host-free timing (tcourse.bench.gpu_samples) per case
KERNEL_TIME_ROUNDS = 2  # rounds of the third timing, kernel durations from the profiler (tcourse.kernel_time)


def _poison_allocator(nbytes: int) -> None:
    """Leave a NaN-filled block in torch's caching allocator: an output allocated next (same size)
    most likely reuses it, so elements a kernel never writes show up as NaN in the check."""
    import torch

    torch.empty(nbytes // 4 + 1, dtype=torch.float32, device="cuda").fill_(float("nan"))


def check(case, d) -> dict:
    import torch

    for _ in range(2):  # autotuning, then the first launch of the chosen config: the timed calls are later ones
        case.ours(d)
    _poison_allocator(4 * 2**20)
    ref = case.reference(d)
    _poison_allocator(ref.numel() * 4)
    out = case.ours(d)  # the kernels' direct launch path (tcourse.kernels._launch.Launcher)
    torch.cuda.synchronize()
    nan = bool(torch.isnan(out).any())
    diff = float(torch.linalg.vector_norm((out.double() - ref.double()).flatten()))
    rel = diff / max(float(torch.linalg.vector_norm(ref.double().flatten())), 1e-30)
    ok = (not nan) and out.shape == ref.shape and rel <= max(case.tol, 1e-12)
    return {"rel_error": rel, "tol": case.tol, "nan": nan, "ok": ok}


def tuned_choices() -> dict:
    """Config per kernel, per key (what the suite's shapes selected), and whether it was pinned or autotuned."""
    from tcourse.kernels import (attention_kernels, axpy_kernels, matmul_kernels, softmax_kernels)

    tuners = {
        "axpy": axpy_kernels.axpy_tuned, "softmax_rows": softmax_kernels.softmax_rows_tuned,
        "softmax_chunk_stats": softmax_kernels.softmax_chunk_stats_tuned,
        "softmax_chunk_write": softmax_kernels.softmax_chunk_write_tuned,
        "matmul_blocked": matmul_kernels.matmul_blocked_tuned, "matmul_tma": matmul_kernels.matmul_tma_tuned,
        "attention_ptr": attention_kernels.attention_ptr_tuned, "attention_tma": attention_kernels.attention_tma_tuned,
    }
    return {name: {str(k): f"{t.how[k]}: {v}" for k, v in t.best.items()} for name, t in tuners.items() if t.best}


def clean_l2_rates(case, d) -> dict:
    """GB/s of ours and of the main baseline when L2 is emptied by reading 256 MB (clean lines) instead
    of do_bench's 256 MB memset, whose dirty lines the timed kernel has to write back to HBM; GPU time
    only (``tcourse.bench.gpu_samples``). Shows how much of a memory-bound kernel's distance to the
    HBM peak is that write-back rather than the kernel."""
    from tcourse.bench import compare

    base = next(iter(case.baselines.values()))
    c = compare(lambda: case.ours(d), lambda: base(d), nbytes=case.nbytes, rounds=1, timer="gpu_time_clean_l2")
    return {"ours_gbs": c.rate(c.ours), "torch_gbs": c.rate(c.torch)}


def run_case(case, rounds: int, ceiling_gbs: float) -> dict:
    import torch

    from tcourse.bench import compare

    rec = {"family": case.family, "name": case.name, "nbytes": case.nbytes, "flops": case.flops, "targets": case.targets}
    d = case.make()
    try:
        rec["check"] = check(case, d)
        rec["vs"], rec["vs_gpu_time"] = {}, {}
        for bname, base in case.baselines.items():
            c = compare(lambda: case.ours(d), lambda base=base: base(d), nbytes=case.nbytes, flops=case.flops,
                        ceiling=ceiling_gbs if case.nbytes else None, rounds=rounds)
            rec["vs"][bname] = c.as_dict()
            g = compare(lambda: case.ours(d), lambda base=base: base(d), nbytes=case.nbytes, flops=case.flops,
                        rounds=GPU_TIME_ROUNDS, timer="gpu_time")
            rec["vs_gpu_time"][bname] = g.as_dict()
        if case.nbytes:
            rec["clean_l2"] = clean_l2_rates(case, d)
    except Exception as e:  # keep going: one broken case must not hide the others
        rec["error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        del d
        torch.cuda.empty_cache()
    return rec


def add_kernel_times(case, rec: dict) -> None:
    """``rec["vs_kernel_time"]``: ours against each baseline by the kernels' own durations (fresh inputs)."""
    import torch

    from tcourse.bench import compare

    if "error" in rec:
        return
    d = case.make()
    try:
        rec["vs_kernel_time"] = {
            bname: compare(lambda: case.ours(d), lambda base=base: base(d), nbytes=case.nbytes, flops=case.flops,
                           rounds=KERNEL_TIME_ROUNDS, timer="kernel").as_dict()
            for bname, base in case.baselines.items()}
    except Exception as e:  # noqa: BLE001 - the case's event timings stand without it
        rec["kernel_time_error"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        del d
        torch.cuda.empty_cache()


def summary_rows(records: list[dict]) -> list[dict]:
    rows = []
    for r in records:
        for bname, c in r.get("vs", {}).items():
            target = r["targets"].get(bname)
            rows.append({"family": r["family"], "case": r["name"], "baseline": bname, "unit": c["unit"],
                         "ours": c.get("ours_rate", c["ours"]["median_ms"]),
                         "torch": c.get("torch_rate", c["torch"]["median_ms"]),
                         "ours_ms": c["ours"]["median_ms"], "torch_ms": c["torch"]["median_ms"],
                         "speedup": c["speedup"], "target": target,
                         "gpu_time_speedup": r.get("vs_gpu_time", {}).get(bname, {}).get("speedup"),
                         "kernel_time_speedup": r.get("vs_kernel_time", {}).get(bname, {}).get("speedup"),
                         "met": None if target is None else bool(meets(r["family"], r["name"], bname, c, target)
                                                                   and r["check"]["ok"]),
                         "of_ceiling": c.get("ours_of_ceiling"), "correct": r["check"]["ok"]})
        if "error" in r:
            rows.append({"family": r["family"], "case": r["name"], "baseline": "-", "error": r["error"]})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\n{'family':<15}{'case':<44}{'baseline':<15}{'ours':>9}{'torch':>9} {'unit':<8}{'ratio':>6}"
          f"{'target':>7}  met  err  gpu-time  kernel-time ratio")
    for r in rows:
        if "error" in r:
            print(f"{r['family']:<15}{r['case']:<44}ERROR {r['error'][:90]}")
            continue
        tgt = f"{r['target']:.2f}" if r["target"] is not None else "-"
        met = "-" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(f"{r['family']:<15}{r['case']:<44}{r['baseline']:<15}{r['ours']:9.1f}{r['torch']:9.1f} {r['unit']:<8}"
              f"{r['speedup']:6.2f}{tgt:>7}  {met:<4} {'ok' if r['correct'] else 'WRONG':<5}"
              f"{r['gpu_time_speedup'] or float('nan'):6.2f}{r.get('kernel_time_speedup') or float('nan'):10.2f}")


def host_rows(host_us: dict) -> list[dict]:
    """Per public kernel: our host us, torch's, their ratio and whether it is within ``HOST_TARGET``."""
    return [{"kernel": name, "ours_us": v["ours"], "torch_us": v["torch"], "ratio": v["ours"] / v["torch"],
             "target": HOST_TARGET, "met": v["ours"] <= HOST_TARGET * v["torch"]}
            for name, v in host_us.items() if isinstance(v, dict)]


def print_host_table(host_us: dict) -> None:
    print(f"\nhost microseconds per call, no synchronisation (bench.host)\n"
          f"{'kernel':<30}{'ours':>8}{'torch':>8}{'ratio':>7}  met (<= {HOST_TARGET}x)")
    for r in host_rows(host_us):
        print(f"{r['kernel']:<30}{r['ours_us']:8.1f}{r['torch_us']:8.1f}{r['ratio']:7.2f}  {'yes' if r['met'] else 'NO'}")
    for name, v in host_us.items():
        if not isinstance(v, dict):
            print(f"{name:<30}{v:8.1f}")


def build_result(rt, families, ceiling, rounds, seconds, records, host_us=None) -> dict:
    g = rt.gpu_info
    return {
        "device": g.name, "capability": list(g.capability), "sm_count": g.sm_count, "driver": g.driver,
        "versions": rt.versions, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hbm_copy_ceiling_gbs": ceiling, "rounds": rounds,
        "method": "tcourse.bench.compare: do_bench (L2 cleared per call) medians and p20/p80 over interleaved "
                  "rounds of ours and torch in one process; speedup = torch median / our median. "
                  "vs_gpu_time / gpu_time_speedup: the same comparison with tcourse.bench.gpu_samples (same "
                  "L2 clearing, calls queued behind a GPU sleep so host launch time is not counted). "
                  "vs_kernel_time / kernel_time_speedup: the kernels' own durations read from the profiler "
                  "(tcourse.kernel_time: L2 cleared before each call, no event or launch time), measured after "
                  "everything else",
        "families": families, "seconds": seconds,
        "host_us_per_call": host_us, "host_summary": host_rows(host_us) if host_us else None,
        "host_method": "bench.host: fewest host us per call over 10 batches of 100 calls issued without "
                       "synchronising (GPU work runs behind); 'triton kernel[grid] (bare)' is a trivial kernel "
                       "launched the plain way",
        "summary": summary_rows(records), "cases": records, "autotune": tuned_choices(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated families: " + ",".join(DEFAULT_FAMILIES + ["variant"]))
    ap.add_argument("--variants", action="store_true", help="also time the alternative kernels")
    ap.add_argument("--match", help="comma-separated substrings: only cases whose name contains one")
    ap.add_argument("--no-host", action="store_true", help="skip the host-microseconds-per-call measurement")
    ap.add_argument("--no-kernel-time", action="store_true", help="skip the kernel durations from the profiler")
    ap.add_argument("--out", default="results/h200", help="folder for bench_suite.json and bench_*.png")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of ours/torch per case")
    args = ap.parse_args(argv)

    from tcourse.bench import refuse_reason

    why = refuse_reason()
    if why:
        print(f"python -m bench refuses to run: {why.split('. Showing')[0]}.", file=sys.stderr)
        return 2
    import tcourse
    from tcourse.bench import hbm_ceiling_gbs

    rt = tcourse.setup(quiet=True)
    import bench.cases as cases
    import bench.host as host
    import bench.plots as plots

    families = args.only.split(",") if args.only else list(DEFAULT_FAMILIES)
    if args.variants and "variant" not in families:
        families.append("variant")
    t0 = time.time()
    ceiling = hbm_ceiling_gbs()
    print(rt.label(), f"| HBM copy ceiling {ceiling:.0f} GB/s", flush=True)
    host_us = None
    records = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    subset = args.match.split(",") if args.match else None
    name = "bench_suite.json" if set(families) >= set(DEFAULT_FAMILIES) and not subset else \
        f"bench_suite_{'_'.join(families)}{'_subset' if subset else ''}.json"
    timed = []
    for fam in families:
        for case in cases.FAMILIES[fam]():
            if subset and not any(m in case.name for m in subset):
                continue
            t = time.time()
            rec = run_case(case, args.rounds, ceiling)
            rec["seconds"] = time.time() - t
            records.append(rec)
            timed.append((case, rec))
            for row in summary_rows([rec]):
                if "error" in row:
                    print(f"[{rec['seconds']:5.1f}s] {fam} {case.name}: ERROR {row['error']}", flush=True)
                else:
                    print(f"[{rec['seconds']:5.1f}s] {fam} {case.name} vs {row['baseline']}: {row['speedup']:.3f}x "
                          f"({row['ours']:.1f} vs {row['torch']:.1f} {row['unit']}) err {rec['check']['rel_error']:.1e}",
                          flush=True)
            partial = build_result(rt, families, ceiling, args.rounds, time.time() - t0, records, host_us)
            (out / name).write_text(json.dumps(partial, indent=1))  # a killed run still leaves its data
    host_us = None if args.no_host else host.measure()
    for case, rec in [] if args.no_kernel_time else timed:
        add_kernel_times(case, rec)
        ratios = ", ".join(f"{b} {c['speedup']:.3f}x" for b, c in rec.get("vs_kernel_time", {}).items())
        print(f"kernel time: {case.family} {case.name}: {ratios or rec.get('kernel_time_error', 'skipped')}", flush=True)
        (out / name).write_text(json.dumps(build_result(rt, families, ceiling, args.rounds, time.time() - t0, records,
                                                        host_us), indent=1))
    result = build_result(rt, families, ceiling, args.rounds, time.time() - t0, records, host_us)
    (out / name).write_text(json.dumps(result, indent=1))
    written = [out / name] + plots.write_plots(result, out)
    print_table(result["summary"])
    if host_us:
        print_host_table(host_us)
    print(f"\nwrote {', '.join(str(p) for p in written)} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
