"""The benchmark suite's bookkeeping (bench/run.py), on CPU: no kernel runs here."""
from bench.run import host_rows, print_host_table, print_table, summary_rows


def _vs(speedup):
    return {"torch.matmul": {"speedup": speedup, "unit": "TFLOP/s", "ours_rate": 100.0, "torch_rate": 100.0 * speedup,
                             "ours": {"median_ms": 1.0}, "torch": {"median_ms": speedup}}}


def test_summary_judges_targets_on_do_bench_and_carries_the_gpu_time_ratio(capsys):
    rec = {"family": "matmul", "name": "fp16 1024x1024x1024", "targets": {"torch.matmul": 0.8},
           "check": {"ok": True}, "vs": _vs(0.5), "vs_gpu_time": _vs(0.9)}
    old = {"family": "matmul", "name": "fp16 4096^3", "targets": {"torch.matmul": 1.0},  # recorded before vs_gpu_time
           "check": {"ok": False}, "vs": _vs(1.1)}
    rows = summary_rows([rec, old])
    assert [(r["met"], r["speedup"], r["gpu_time_speedup"]) for r in rows] == [(False, 0.5, 0.9), (False, 1.1, None)]
    print_table(rows)
    out = capsys.readouterr().out
    assert "0.50   0.80  NO   ok     0.90" in out and "WRONG" in out


def test_host_rows_judge_each_kernel_against_one_and_a_half_times_torch(capsys):
    host = {"triton kernel[grid] (bare)": 17.8, "axpy 2^20": {"ours": 16.0, "torch": 11.0},
            "softmax 4096x1024": {"ours": 17.0, "torch": 11.0}}
    rows = host_rows(host)
    assert [(r["kernel"], r["met"]) for r in rows] == [("axpy 2^20", True), ("softmax 4096x1024", False)]
    print_host_table(host)
    out = capsys.readouterr().out
    assert "1.45  yes" in out and "1.55  NO" in out and "kernel[grid] (bare)" in out
