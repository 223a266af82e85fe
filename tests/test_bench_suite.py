"""The benchmark suite's bookkeeping (bench/run.py), on CPU: no kernel runs here."""
import pytest

from bench.run import host_rows, print_host_table, print_table, summary_rows


def _vs(speedup):
    return {"torch.matmul": {"speedup": speedup, "unit": "TFLOP/s", "ours_rate": 100.0, "torch_rate": 100.0 * speedup,
                             "ours": {"median_ms": 1.0}, "torch": {"median_ms": speedup}}}


def test_summary_judges_targets_on_do_bench_and_carries_the_other_timers_ratios(capsys):
    rec = {"family": "matmul", "name": "fp16 1024x1024x1024", "targets": {"torch.matmul": 0.8},
           "check": {"ok": True}, "vs": _vs(0.5), "vs_gpu_time": _vs(0.9), "vs_kernel_time": _vs(0.85)}
    old = {"family": "matmul", "name": "fp16 4096^3", "targets": {"torch.matmul": 1.0},  # recorded before vs_gpu_time
           "check": {"ok": False}, "vs": _vs(1.1)}
    rows = summary_rows([rec, old])
    assert [(r["met"], r["speedup"], r["gpu_time_speedup"], r["kernel_time_speedup"]) for r in rows] == \
        [(False, 0.5, 0.9, 0.85), (False, 1.1, None, None)]
    print_table(rows)
    out = capsys.readouterr().out
    assert "0.50   0.80  NO   ok     0.90      0.85" in out and "WRONG" in out


def test_host_rows_judge_each_kernel_against_one_and_a_half_times_torch(capsys):
    host = {"triton kernel[grid] (bare)": 17.8, "axpy 2^20": {"ours": 16.0, "torch": 11.0},
            "softmax 4096x1024": {"ours": 17.0, "torch": 11.0}}
    rows = host_rows(host)
    assert [(r["kernel"], r["met"]) for r in rows] == [("axpy 2^20", True), ("softmax 4096x1024", False)]
    print_host_table(host)
    out = capsys.readouterr().out
    assert "1.45  yes" in out and "1.55  NO" in out and "kernel[grid] (bare)" in out


def test_kernel_time_groups_the_trace_into_calls_at_each_marker():
    """tcourse.kernel_time reads a profiler trace: each marker kernel opens a call, a call's time is the sum of its
    activities' durations (gaps between them not counted), anything before the first marker is dropped."""
    from tcourse.kernel_time import MARKER, per_call_ms

    trace = [("warm-up kernel", 0.0, 5.0),
             (MARKER, 10.0, 80.0), ("attn_fwd", 81.0, 87.5),
             (MARKER, 100.0, 170.0), ("bwd_preprocess", 171.0, 172.0), ("Memset (Device)", 172.5, 173.0),
             ("bwd_main", 180.0, 190.0),
             (MARKER, 200.0, 270.0)]
    assert per_call_ms(list(reversed(trace))) == pytest.approx([0.0065, 0.0115])


def test_matmul_4096_needs_the_low_end_of_its_spread_above_the_target_other_rows_the_median():
    """Issue 18: 4096^3 >= 1.0 with the spread above 1.0 (bench/targets.py); a median of 1.01 with a +-3 % band is a
    tie with cuBLAS, not a win, and a record without percentiles cannot show its band."""
    from bench.targets import meets

    def cmp(speedup, width):  # both sides' p20-p80 as wide as ``width`` of their medians
        side = {"median_ms": 1.0, "p20_ms": 1.0 - width / 2, "p80_ms": 1.0 + width / 2}
        return {"speedup": speedup, "ours": side, "torch": side}

    band = ("matmul", "fp16 4096x4096x4096", "torch.matmul")
    assert not meets(*band, cmp(1.01, 0.06), 1.0) and meets(*band, cmp(1.01, 0.01), 1.0)
    assert not meets(*band, {"speedup": 1.05}, 1.0)
    assert meets("matmul", "fp16 8192x8192x8192", "torch.matmul", cmp(1.01, 0.06), 1.0)
    assert [r["met"] for r in summary_rows([{"family": "matmul", "name": "bf16 4096x4096x4096",
                                             "targets": {"torch.matmul": 1.0}, "check": {"ok": True},
                                             "vs": {"torch.matmul": {**cmp(1.009, 0.06), "unit": "TFLOP/s"}}}])] == [False]
