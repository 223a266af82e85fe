"""Issue 18's measurements on the H200, one call: where host time goes, and which configs and kernels
close the gaps (matmul 1024^3, FP8, attention backward and forward). Each part writes
results/h200/issue18/<part>.json and prints a short table; a failing variant is recorded, not fatal.

    python scripts/probe_issue18.py host matmul fp8 bwd2 fwd
"""
from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl

import tcourse
from tcourse.kernels.attention_kernels import _online_softmax_step

OUT = Path("results/h200/issue18")
ROUNDS = 3
REP_MS = 40


def _meta() -> dict:
    import triton

    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def _save(name: str, data) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps({"meta": _meta(), "data": data}, indent=1, default=str))


def _cmp(ours, ref, flops=None, timer="gpu_time", rounds=ROUNDS, rep=REP_MS) -> dict:
    from tcourse.bench import compare

    c = compare(ours, ref, flops=flops, rounds=rounds, rep_ms=rep, timer=timer)
    return {"ours_us": c.ours.median_ms * 1e3, "ours_p20": c.ours.p20_ms * 1e3, "ours_p80": c.ours.p80_ms * 1e3,
            "torch_us": c.torch.median_ms * 1e3, "torch_p20": c.torch.p20_ms * 1e3, "torch_p80": c.torch.p80_ms * 1e3,
            "speedup": c.speedup}


def _rel(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def _guard(rows: list, label: dict, fn) -> None:
    t = time.time()
    try:
        r = fn()
        rows.append({**label, **r, "s": round(time.time() - t, 1)})
        sp = r.get("speedup")
        print(f"  {json.dumps(label)[:110]:<110} x{sp:.3f} err {r.get('err', 0):.1e}" if sp else f"  {label} {r}",
              flush=True)
    except Exception as e:  # noqa: BLE001 - one variant must not stop the others
        rows.append({**label, "error": f"{type(e).__name__}: {str(e)[:400]}"})
        print(f"  {label} ERROR {type(e).__name__}: {str(e)[:200]}", flush=True)


# -- host ---------------------------------------------------------------------------------------------
def host() -> dict:
    import subprocess

    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    from bench.host import host_us, measure

    out: dict = {}
    x = torch.randn(2**20, device="cuda")
    h = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    prim = {
        "torch.empty_like(2^20 fp32)": lambda: torch.empty_like(x),
        "torch.empty((4096, 1024))": lambda: torch.empty((4096, 1024), device=x.device),
        "x.data_ptr()": lambda: x.data_ptr(),
        "x.contiguous()": lambda: x.contiguous(),
        "torch.add(x, x, alpha=2)": lambda: torch.add(x, x, alpha=2.0),
        "TensorDescriptor(...)": lambda: TensorDescriptor(h, [1024, 1024], [1024, 1], [64, 64]),
        "driver.get_current_stream(0)": lambda: triton.runtime.driver.active.get_current_stream(0),
        "driver.get_current_device()": lambda: triton.runtime.driver.active.get_current_device(),
    }

    @triton.jit
    def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    y = torch.empty_like(x)
    grid = (1024,)
    ck = _copy[grid](x, y, x.numel(), BLOCK=1024)
    run = ck.run
    stream = triton.runtime.driver.active.get_current_stream(0)
    prim["bare _copy[grid](...)"] = lambda: _copy[grid](x, y, x.numel(), BLOCK=1024)
    prim["CompiledKernel.run(tensors)"] = lambda: run(1024, 1, 1, stream, ck.function, ck.packed_metadata, None, None,
                                                       None, x, y, x.numel(), 1024)
    c_launch = run.launch
    xp, yp = x.data_ptr(), y.data_ptr()
    lead = (ck.function, run.launch_cooperative_grid, run.launch_pdl, None, None, ck.packed_metadata, None, None, None)
    prim["C launch(tensors)"] = lambda: c_launch(1024, 1, 1, stream, *lead, x, y, x.numel(), 1024)
    prim["C launch(int pointers)"] = lambda: c_launch(1024, 1, 1, stream, *lead, xp, yp, x.numel(), 1024)
    fill = triton.runtime.driver.active.utils.fill_tma_descriptor
    prim["fill_tma_descriptor"] = lambda: fill(h.data_ptr(), 3, 2, 6, [64, 64], [1024, 1024], [1024, 1], 0)
    out["primitives_us"] = {}
    for name, fn in prim.items():
        try:
            out["primitives_us"][name] = host_us(fn)
        except Exception as e:  # noqa: BLE001
            out["primitives_us"][name] = f"{type(e).__name__}: {e}"
        print(f"  {name:<34} {out['primitives_us'][name]}", flush=True)
    out["checks"] = _public_checks()
    out["raw_launch"] = measure()
    print(json.dumps(out["raw_launch"], indent=0), flush=True)
    env = {**__import__("os").environ, "TCOURSE_RAW_LAUNCH": "0"}
    code = "import json, tcourse; tcourse.setup(quiet=True); from bench.host import measure; print(json.dumps(measure()))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    out["kernel_run_launch"] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else r.stderr[-2000:]
    print("TCOURSE_RAW_LAUNCH=0:", json.dumps(out["kernel_run_launch"], indent=0), flush=True)
    from bench.host import pairs, profile

    import tcourse.kernels as K

    out["profiles"] = {n: profile(K, n, calls=1000) for n in ("axpy", "softmax", "attention", "matmul fp16")
                       if any(n in k for k in pairs(K))}
    for n, p in out["profiles"].items():
        print(f"--- profile {n}\n" + "\n".join(p.splitlines()[:22]), flush=True)
    # small attention: pointer kernel (no descriptors) against the TMA kernel, end to end (do_bench) and GPU only
    from tcourse.kernels import attention_kernels as A

    out["attention_small"] = []
    for S in (128, 256, 512, 1024):
        q, k, v = (torch.randn(1, 8, S, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        for timer in ("do_bench", "gpu_time"):
            _guard(out["attention_small"], {"S": S, "timer": timer},
                   lambda: _cmp(lambda: A.attention_ptr(q, k, v), lambda: A.attention_tma(q, k, v), timer=timer))
    return out


def _public_checks() -> dict:
    """Each public function's third call (the raw C launch) against torch, fresh inputs each call."""
    import torch.nn.functional as F

    import tcourse.kernels as K

    def cases():
        v = torch.randn(2**20 + 3, device="cuda")
        yield "axpy", lambda: K.axpy(2.0, v, v), lambda: 3.0 * v.double()
        x = torch.randn(4096, 1000, device="cuda")
        yield "softmax", lambda: K.softmax(x), lambda: torch.softmax(x.double(), -1)
        a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
        yield "matmul 1024", lambda: K.matmul(a, a), lambda: a.double() @ a.double()
        a4 = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
        yield "matmul tma 2048", lambda: K.matmul(a4, a4), lambda: a4.double() @ a4.double()
        w, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        yield "layernorm", lambda: K.layernorm(x, w, b), lambda: F.layer_norm(x.double(), (1000,), w.double(), b.double())
        yield "transpose", lambda: K.transpose(x), lambda: x.T.double()
        q = torch.randn(2, 8, 512, 64, device="cuda", dtype=torch.float16)
        yield "attention", lambda: K.attention(q, q, q), lambda: F.scaled_dot_product_attention(q.double(), q.double(), q.double())
    out = {}
    for name, ours, ref in cases():
        errs = [_rel(ours(), ref()) for _ in range(4)]
        out[name] = errs
        print(f"  check {name:<16} {' '.join(f'{e:.1e}' for e in errs)}", flush=True)
    return out


# -- matmul 1024^3 -----------------------------------------------------------------------------------
def matmul() -> list:
    from tcourse.kernels import matmul_kernels as M

    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        a = torch.randn(1024, 1024, device="cuda", dtype=dt)
        b = torch.randn(1024, 1024, device="cuda", dtype=dt)
        ref = a.double() @ b.double()
        blocked = [(64, 128, 128, 3, 4), (64, 128, 64, 4, 4), (64, 64, 128, 3, 4), (64, 64, 64, 4, 4), (64, 64, 128, 4, 4),
                   (128, 64, 128, 3, 4), (128, 64, 64, 4, 4), (128, 128, 64, 3, 8), (128, 128, 128, 2, 8),
                   (64, 128, 128, 4, 4), (64, 256, 64, 3, 8), (128, 64, 128, 3, 8)]
        if dt == torch.bfloat16:
            blocked = blocked[:4]
        for bm, bn, bk, s, w in blocked:
            cfg = {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "num_stages": s, "num_warps": w}

            def one(cfg=cfg):
                err = _rel(M.matmul_blocked(a, b, cfg), ref)
                return {"err": err, **_cmp(lambda: M.matmul_blocked(a, b, cfg), lambda: a @ b, flops=2 * 1024**3)}
            _guard(rows, {"dtype": str(dt), "kernel": "blocked", **cfg}, one)
        tma = [(128, 128, 64, 4, 8, False), (64, 128, 64, 5, 4, False), (64, 128, 128, 3, 4, False),
               (64, 64, 128, 4, 4, False), (128, 64, 64, 4, 4, False), (128, 256, 64, 3, 8, False)]
        if dt == torch.bfloat16:
            tma = tma[:3]
        for bm, bn, bk, s, w, sp in tma:
            cfg = {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "SPLIT_EPILOGUE": sp, "FLATTEN": True,
                   "num_stages": s, "num_warps": w}

            def one(cfg=cfg):
                err = _rel(M.matmul_tma(a, b, cfg), ref)
                return {"err": err, **_cmp(lambda: M.matmul_tma(a, b, cfg), lambda: a @ b, flops=2 * 1024**3)}
            _guard(rows, {"dtype": str(dt), "kernel": "tma", **cfg}, one)
        _guard(rows, {"dtype": str(dt), "kernel": "public matmul", "timer": "do_bench"},
               lambda: {"err": _rel(M.matmul(a, b), ref),
                        **_cmp(lambda: M.matmul(a, b), lambda: a @ b, flops=2 * 1024**3, timer="do_bench")})
        _guard(rows, {"dtype": str(dt), "kernel": "public matmul", "timer": "gpu_time"},
               lambda: _cmp(lambda: M.matmul(a, b), lambda: a @ b, flops=2 * 1024**3))
    # 4096^3: the pinned config against its neighbours, 5 rounds (the last wave: 128x256 tiles -> 512 tiles on 132 SMs)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    for bm, bn, bk, s, w, sp in [(128, 256, 64, 4, 8, True), (128, 256, 64, 3, 8, False), (256, 128, 64, 3, 8, False),
                                 (128, 128, 64, 4, 8, False), (128, 192, 64, 4, 8, False)]:
        cfg = {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "SPLIT_EPILOGUE": sp, "FLATTEN": True,
               "num_stages": s, "num_warps": w}
        _guard(rows, {"dtype": "fp16 4096", "kernel": "tma", **cfg},
               lambda cfg=cfg: _cmp(lambda: M.matmul_tma(a, b, cfg), lambda: a @ b, flops=2 * 4096**3, rounds=5))
    try:
        from tcourse.kernels import gluon_matmul as G

        for cfg in ({"BN": 256, "num_warps": 8}, {"BN": 256, "num_warps": 8, "STAGES": 3}):
            _guard(rows, {"dtype": "fp16 4096", "kernel": "gluon_ws", **cfg},
                   lambda cfg=cfg: _cmp(lambda: G.matmul(a, b, cfg), lambda: a @ b, flops=2 * 4096**3, rounds=5))
    except Exception as e:  # noqa: BLE001
        rows.append({"kernel": "gluon_ws", "error": repr(e)[:300]})
    return rows


def mm8192() -> list:
    """Session 17: 8192^3 (bf16 at 0.99-1.01x cuBLAS by do_bench in runs 11-13 against 1.07-1.10x by GPU time): the
    autotuner's pick (128x256x64, 3 stages) against tile orders (GROUP_M) and its neighbours, each by do_bench (the
    targets' timer; 5 rounds) and by GPU time (2 rounds), fp16 and bf16; the SM clock and power are logged beside it
    (gpu_session.sh step mm8192)."""
    from tcourse.kernels import matmul_kernels as M

    rows: list = []
    n = 8192
    for dt in (torch.bfloat16, torch.float16):
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        ref = (a[:256].double() @ b.double())
        for bm, bn, s, sp, g in [(128, 256, 3, False, 8), (128, 256, 3, False, 4), (128, 256, 3, False, 16),
                                 (128, 256, 3, False, 32), (128, 256, 4, True, 8), (256, 128, 3, False, 8)]:
            cfg = {"BM": bm, "BN": bn, "BK": 64, "GROUP_M": g, "SPLIT_EPILOGUE": sp, "FLATTEN": True,
                   "num_stages": s, "num_warps": 8}

            def one(cfg=cfg):
                err = _rel(M.matmul_tma(a, b, cfg)[:256], ref)
                fn = lambda: M.matmul_tma(a, b, cfg)  # noqa: E731
                t0 = time.strftime("%H:%M:%S", time.gmtime())
                d = _cmp(fn, lambda: a @ b, flops=2 * n**3, timer="do_bench", rounds=5)
                g = _cmp(fn, lambda: a @ b, flops=2 * n**3, rounds=2)
                return {"err": err, "start": t0, **d, "gpu_time": g}
            _guard(rows, {"dtype": str(dt), **cfg}, one)
        del a, b
        torch.cuda.empty_cache()
    return rows


# -- FP8 ----------------------------------------------------------------------------------------------
def fp8() -> list:
    from tcourse.kernels import fp8_matmul as F8

    rows: list = []
    for size in (4096, 8192):
        a = torch.randn(size, size, device="cuda")
        b = torch.randn(size, size, device="cuda")
        qa, sa = F8.quantize_e4m3(a)
        qb, sb = F8.quantize_e4m3(b)
        qb_cm = qb.t().contiguous().t()
        ref = torch._scaled_mm(qa, qb_cm, scale_a=sa.reshape(()), scale_b=sb.reshape(()), out_dtype=torch.bfloat16)

        def theirs():
            return torch._scaled_mm(qa, qb_cm, scale_a=sa.reshape(()), scale_b=sb.reshape(()), out_dtype=torch.bfloat16)
        variants = {"blocked": (F8.fp8_matmul, [(128, 128, 128, 4, 8), (128, 256, 128, 3, 8), (128, 256, 64, 4, 8),
                                                (256, 128, 128, 3, 8), (128, 128, 256, 3, 8)]),
                    "tma_persistent": (F8.fp8_matmul_tma, [(128, 256, 128, 3, 8), (128, 256, 64, 4, 8),
                                                           (128, 128, 128, 4, 8), (256, 128, 128, 3, 8),
                                                           (128, 256, 128, 2, 8)])}
        for kernel, (fn, configs) in variants.items():  # an explicit config: fp8_matmul stays on the blocked kernel
            for bm, bn, bk, s, w in configs:
                cfg = {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "num_stages": s, "num_warps": w}
                _guard(rows, {"size": size, "kernel": kernel, **cfg},
                       lambda fn=fn, cfg=cfg: {"err": _rel(fn(qa, qb_cm, sa, sb, config=cfg), ref),
                                               **_cmp(lambda: fn(qa, qb_cm, sa, sb, config=cfg), theirs,
                                                      flops=2 * size**3)})
        del a, b
        torch.cuda.empty_cache()
    return rows


# -- attention backward ------------------------------------------------------------------------------
# Run 1 (bwd2_run1.json, pointer loads, an earlier version of this part): 8 dK/dV and 8 dQ configs per shape,
# and dQ by atomics. Run 2 (bwd2_run2.json): the five best of each with pointer loads and with tensor
# descriptors, then the best pair of each head to head.
def _cfgs(*rows):
    return [{"BLOCK_M": BM, "BLOCK_N": BN, "num_warps": w, "num_stages": st} for BM, BN, w, st in rows]


BWD_KV = {64: _cfgs((32, 128, 4, 4), (32, 128, 4, 3), (64, 64, 4, 3), (32, 64, 4, 4), (64, 128, 8, 3)),
          128: _cfgs((32, 64, 4, 3), (32, 64, 4, 4), (64, 128, 8, 3), (32, 128, 8, 3), (64, 128, 8, 2))}
BWD_Q = {64: _cfgs((128, 64, 4, 3), (64, 64, 4, 3), (128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 3)),
         128: _cfgs((128, 64, 8, 3), (64, 32, 4, 4), (128, 32, 8, 3), (64, 32, 4, 3), (128, 64, 8, 2))}


def _bwd_problems(shape=(4, 32, 4096), device="cuda"):
    """Per (D, causal) of the suite's backward shapes: ``(D, causal, timed)``, where ``timed(rows, label,
    rounds, rep, **kw)`` checks ``attention_bwd(..., **kw)`` against SDPA's gradients, times the two (GPU time,
    interleaved), appends a row labelled with D, causal, the variant and every config key, and returns our
    median in us (inf when it failed or erred)."""
    import torch.nn.functional as F

    from tcourse.kernels import attention_bwd_kernels as AB

    B, H, S = shape
    for D in (64, 128):
        for causal in (False, True):
            q, k, v, do = (torch.randn(B, H, S, D, device=device, dtype=torch.float16) for _ in range(4))
            qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
            o_ref = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
            o, lse = AB.attention_fwd(q, k, v, causal)
            flops = 2.5 * 4 * B * H * S * S * D / (2 if causal else 1)  # 5 matmuls of 2*S*S*D

            def torch_bwd():
                return torch.autograd.grad(o_ref, (qr, kr, vr), do, retain_graph=True)
            gref = torch_bwd()

            def timed(rows, label, rounds, rep, **kw):
                def one():
                    g = AB.attention_bwd(do, q, k, v, o, lse, causal, **kw)
                    err = max(_rel(x, y) for x, y in zip(g, gref))
                    return {"err": err, **_cmp(lambda: AB.attention_bwd(do, q, k, v, o, lse, causal, **kw), torch_bwd,
                                               flops=flops, rounds=rounds, rep=rep)}
                _guard(rows, {"D": D, "causal": causal, "variant": label, "tma": kw.get("tma"),
                              **{f"{n}_{key}": val for n in ("dkdv", "dq") for key, val in (kw.get(n) or {}).items()}},
                       one)
                r = rows[-1]
                return r.get("ours_us", float("inf")) if r.get("err", 1) < 1e-2 else float("inf")

            yield D, causal, timed
            del q, k, v, do, qr, kr, vr, o_ref, o, lse, gref, timed
            if device == "cuda":
                torch.cuda.empty_cache()


def bwd2() -> list:
    """The chapter 10 backward after the rewrite (transposed dK/dV step, exp2, masks on diagonal blocks only,
    a config per kernel): for pointer loads and for tensor descriptors, the dK/dV configs, then the dQ configs
    with the best dK/dV one; then the best of each, head to head over more rounds. GPU time, beside SDPA."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        best = {}
        for tma in (False, True):
            kv = min(BWD_KV[D], key=lambda c: timed(rows, "dkdv sweep", 2, 25, dkdv=c, tma=tma))
            best[tma] = (kv, min(BWD_Q[D], key=lambda c: timed(rows, "dq sweep", 2, 25, dkdv=kv, dq=c, tma=tma)))
        for tma in (False, True):
            timed(rows, "best, 4 rounds", 4, 40, dkdv=best[tma][0], dq=best[tma][1], tma=tma)
        rows.append({"D": D, "causal": causal, "best": {str(t): b for t, b in best.items()}})
    return rows


# Run 3 (bwd3.json): dQ by atomics again, now one TMA reduce-add (cp.reduce.async.bulk.tensor) per block
# instead of a scalar atomic per element: five matmuls per step in one kernel instead of seven in two.
BWD_ATOMIC_KV = {64: _cfgs((64, 128, 8, 2), (64, 64, 4, 2), (64, 64, 4, 3), (32, 128, 8, 3), (32, 64, 4, 4)),
                 128: _cfgs((32, 128, 8, 3), (16, 128, 8, 3), (32, 64, 4, 3), (16, 64, 4, 4), (32, 128, 8, 2))}


def bwd3() -> list:
    """The two-kernel default against dQ by TMA reduce-add, per dK/dV config; GPU time, beside SDPA."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        timed(rows, "default (two kernels, TMA)", 3, 30, gluon=False)
        for c in BWD_ATOMIC_KV[D]:
            timed(rows, "dq by TMA reduce", 3, 30, dkdv=c, dq_atomic=True)
        timed(rows, "default again", 3, 30, gluon=False)
    return rows


# Session 9: the one-kernel Gluon backward (gluon_attention_bwd): 2 consumer warpgroups x 64 keys, a TMA
# loader, dQ by TMA reduce-add (with DQ_SPLIT each consumer owns half of dQ's columns).
def _gbwd_cases():
    """(B, H, S, D, causal, dtype): one program per head, several key blocks, both head dims."""
    for dt in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            yield 1, 2, 128, 64, causal, dt
            yield 2, 3, 512, 128, causal, dt
            yield 1, 4, 1024, 64, causal, dt
            yield 1, 2, 2048, 128, causal, dt


# run 3 also timed AHEAD (block i+1's scores issued before block i's gradients are waited for; removed after it)
# session 11 also timed DQ_SPLIT at D=64 (K loaded a second time as two column halves; gbwd6, commit fa4c118, removed after it)
GBWD_ALT = {64: ({"STAGES": 3},), 128: ({"STAGES": 2}, {"DQ_SPLIT": False, "STAGES": 2})}


def _gluon_bwd_check(cases, variants, triton: bool = False) -> list:
    """Gradients of the Gluon backward in each ``(label, config)`` of ``variants(D)`` against fp32 SDPA's, on each
    of ``cases`` (hand-written barriers: run first, time-limited); with ``triton``, the two Triton kernels' errors
    beside them."""
    import torch.nn.functional as F

    from tcourse.kernels import attention_bwd_kernels as AB

    rows = []
    for B, H, S, D, causal, dt in cases:
        q, k, v, do = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(4))
        qr, kr, vr = (t.float().requires_grad_() for t in (q, k, v))
        ref = torch.autograd.grad(F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal), (qr, kr, vr),
                                  do.float())
        o, lse = AB.attention_fwd(q, k, v, causal)
        for label, cfg in variants(D):
            t = time.time()
            row = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "dtype": str(dt)[6:], "variant": label, "cfg": cfg}
            try:
                g = AB.attention_bwd(do, q, k, v, o, lse, causal, gluon=True, gluon_config=cfg)
                torch.cuda.synchronize()
                errs = [_rel(x, y) for x, y in zip(g, ref)]
                row.update({"rel_err_dq_dk_dv": errs, "ok": max(errs) < 2e-2})
                if triton:
                    tri = AB.attention_bwd(do, q, k, v, o, lse, causal)
                    row["triton_rel_err"] = [_rel(x, y) for x, y in zip(tri, ref)]
                row["s"] = round(time.time() - t, 1)
            except Exception as e:  # noqa: BLE001
                row.update({"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            rows.append(row)
            print(" ", row, flush=True)
    return rows


def gbwdcheck() -> list:
    """Gradients of the Gluon backward in each of its configs against fp32 SDPA's, the Triton kernels' beside."""
    return _gluon_bwd_check(_gbwd_cases(), lambda D: [(str(c), c) for c in (None, *GBWD_ALT[D])], triton=True)


def gbwd() -> list:
    """The Gluon backward (its config and the alternatives) against the two-kernel Triton default, beside
    SDPA's backward; GPU time, B4 H32 S4096 fp16."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        timed(rows, "triton (two kernels, TMA)", 3, 30, gluon=False)
        timed(rows, "gluon", 3, 30, gluon=True)
        for cfg in GBWD_ALT[D]:
            timed(rows, f"gluon {cfg}", 3, 30, gluon=True, gluon_config=cfg)
        timed(rows, "gluon again", 3, 30, gluon=True)
    return rows


def _gluon_against_triton(keep) -> list:
    """The Gluon backward (twice) against the two Triton kernels on the suite's backward shapes that
    ``keep(D, causal)`` accepts; GPU time, 5 rounds, B4 H32 S4096 fp16."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        if keep(D, causal):
            timed(rows, "triton (two kernels, TMA)", 5, 30, gluon=False)
            timed(rows, "gluon", 5, 30, gluon=True)
            timed(rows, "gluon again", 5, 30, gluon=True)
    return rows


def gbwd4() -> list:
    """Session 10: the causal Gluon backward with its two diagonal query blocks peeled out of the loop (sm_90
    spills at D128 344 -> 128 bytes), every shape."""
    return _gluon_against_triton(lambda D, causal: True)


def gbwd5() -> list:
    """Session 10: the non-causal D128 Gluon backward with its first pair of query blocks outside the loop too
    (sm_90 spills 216 -> 120 bytes)."""
    return _gluon_against_triton(lambda D, causal: D == 128 and not causal)


def gbwd6() -> list:
    """Session 11: the D=64 configs against the default (each consumer adds its keys' share of all of dQ) and the
    Triton kernels; GPU time, 5 rounds, B4 H32 S4096 fp16. Run at commit fa4c118, where GBWD_ALT[64] also held
    DQ_SPLIT with 2 and 3 stages (dQ's columns split between the consumers, K loaded again as two column halves)."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        if D == 64:
            timed(rows, "triton (two kernels, TMA)", 5, 30, gluon=False)
            timed(rows, "gluon", 5, 30, gluon=True)
            for cfg in GBWD_ALT[64]:
                timed(rows, f"gluon {cfg}", 5, 30, gluon=True, gluon_config=cfg)
            timed(rows, "gluon again", 5, 30, gluon=True)
    return rows


# Session 14: the backward's program order. Causal key block kb walks S/BM - 2 kb query blocks and the grid handed
# them out head by head, so the last programs to start included long ones (a list-scheduling model: 3.4 % of the
# kernel lost to the tail); not causal, 4096 equal programs on 132 SMs are 31 waves and 4 programs (3 % in that
# model). Run at commit a587dcd, which also had, and the runs also measured, the programs left after the last full
# wave split into query ranges with their dK/dV partial sums added by atomics (PIECES; "new order" not causal) and
# dV's multiply issued before the wait for dP^T (EARLY_DV, D=64): neither helped and both were removed.
OLD_ORDER = {"GROUP": 1}  # session 13's program order: one head after the other


def _each_dtype_and_dim(problems):
    """(B, H, S, D, causal, dtype) for each (B, H, S, causal) of ``problems``, fp16 and bf16, D 64 and 128."""
    for dt in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            for B, H, S, causal in problems:
                yield B, H, S, D, causal, dt


def _gbwd7_cases():
    """Not causal, fewer programs than SMs (8) and two waves and 56 (B2 H40 S512; at a587dcd, the tail pieces: all
    of them, and the 56 split in 2); causal, groups with a short last group (B2 H5 = 10 heads, GROUP 4) and fewer
    heads than a group (3)."""
    return _each_dtype_and_dim(((1, 2, 512, False), (2, 40, 512, False), (2, 5, 1024, True), (1, 3, 2048, True)))


def gbwd7check() -> list:
    """The backward in the new program order and the old one against fp32 SDPA's gradients."""
    return _gluon_bwd_check(_gbwd7_cases(), lambda D: [("default", None), ("old order", OLD_ORDER)])


def _kernel_times(fn, calls: int = 5) -> dict:
    """torch.profiler over ``calls`` calls of ``fn`` (after one warm-up): per kernel name its mean GPU time and its
    time per call in us, and the sum of all kernels per call."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels: dict = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name[:120], {"us": 0.0, "n": 0})
            k["us"] += e.time_range.elapsed_us()
            k["n"] += 1
    for k in kernels.values():
        k["us_per_call"] = round(k["us"] / calls, 1)
        k["us"] = round(k["us"] / k["n"], 1)
    return {"kernels": kernels, "sum_us_per_call": round(sum(k["us_per_call"] for k in kernels.values()), 1)}


def gbwd7() -> list:
    """Each backward shape of the suite: the kernels of ours and of SDPA's backward (profiler), then ours in the
    new order and the old one (causal: also 8 heads a group), beside SDPA; GPU time, 5 rounds, B4 H32 S4096 fp16."""
    from tcourse.kernels import attention_bwd_kernels as AB

    rows: list = []
    for D, causal, timed in _bwd_problems():
        def kernels_of(fn, label):
            _guard(rows, {"D": D, "causal": causal, "profile": label}, lambda: _kernel_times(fn))
        q, k, v, do = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(4))
        o, lse = AB.attention_fwd(q, k, v, causal)
        qr, kr, vr = (t.detach().requires_grad_() for t in (q, k, v))
        o_ref = torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
        kernels_of(lambda: AB.attention_bwd(do, q, k, v, o, lse, causal), "ours")
        kernels_of(lambda: torch.autograd.grad(o_ref, (qr, kr, vr), do, retain_graph=True), "sdpa")
        del q, k, v, do, o, lse, qr, kr, vr, o_ref
        timed(rows, "old order", 5, 30, gluon=True, gluon_config=OLD_ORDER)
        timed(rows, "new order", 5, 30, gluon=True)
        if causal:
            timed(rows, "new order, GROUP 8", 5, 30, gluon=True, gluon_config={"GROUP": 8})
        timed(rows, "old order again", 5, 30, gluon=True, gluon_config=OLD_ORDER)
        timed(rows, "new order again", 5, 30, gluon=True)
    return rows


# Session 14, second part: at D=64 each consumer adds its own keys' share of dQ_i (two reduce-adds of 64 x 64 fp32
# per query block and program, 8.6 GB of L2 read-modify-write per backward at B4 H32 S4096). DQ_ALT: consumer
# i % 2 multiplies all 128 keys of dS_i by K and adds dQ_i once, so the reduce traffic halves and the consumers
# take turns (the D=128 split by columns needs half rows of K, narrower than its swizzle at D=64: gbwd6).
# (the run's rows carry the configs as passed, without STAGES: CONFIGS[64] had 2 stages then)
GBWD8 = (("default (each consumer its keys)", {"DQ_ALT": False, "STAGES": 2}),
         ("DQ_ALT", {"DQ_ALT": True, "STAGES": 2}),
         ("DQ_ALT, 3 stages", {"DQ_ALT": True, "STAGES": 3}))


def gbwd8check() -> list:
    """D=64 with dQ_i by one consumer in turn (DQ_ALT), 2 and 3 stages, against fp32 SDPA's gradients."""
    return _gluon_bwd_check([c for c in _gbwd_cases() if c[3] == 64] + [c for c in _gbwd7_cases() if c[3] == 64],
                            lambda D: list(GBWD8))


def gbwd8() -> list:
    """DQ_ALT against the default at D=64 (each twice), beside SDPA; GPU time, 5 rounds, B4 H32 S4096 fp16."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        if D == 64:
            for label, cfg in (*GBWD8, *GBWD8[:2]):
                timed(rows, label, 5, 30, gluon=True, gluon_config=cfg)
    return rows


# Session 15: the order of a step's last multiplies (parts gbwd9 and gbwd10, each a check on the gbwd and gbwd7 cases,
# then the variants twice beside SDPA, GPU time, 5 rounds). gbwd9 timed DQ_FIRST: dV, dQ, dK, and dQ_i stored and sent
# while dK runs (before: dV, dK, dQ, all waited, then dQ_i out; Triton 3.6 ptxas: the same spills), and DQ_LAG (with
# that order): step i multiplies dS_{i-1} for dQ, so the wait for the other consumer's dS half is a step old (D128
# spills 176 / 192 bytes against 120 / 128). gbwd10 timed DQ_LAG again and PINGPONG (with DQ_LAG): the consumers took
# turns issuing their multiplies (0 scores, 1 grads, 0 grads, 1 scores), so that one's softmax would run beside the
# other's multiplies; 0.80-0.97x, the slowest. DQ_LAG was the fastest on every shape in both runs and is now how the
# kernel always runs when dQ reads all keys; the flag, the step without it, DQ_FIRST alone and PINGPONG were removed,
# and with them these two parts (commit 56986a9 has the flag and gbwd10, 4e61fe0 PINGPONG; the code gbwd9 ran, with
# DQ_FIRST as a flag, was not committed). Compiled, not run: block i+1's scores issued before dQ_i is stored (384 /
# 392 bytes of spills). Both runs label the step without the lag "default".


# Session 16: a persistent backward. Each program (one per SM) walks tiles pid, pid + P, ... (the same order of
# tiles as the one-tile programs): the loader brings the next tile's first query blocks while the consumers finish a
# tile, and its K and V as soon as both are done with the previous ones, so a tile's dK/dV stores and the program's
# start-up no longer sit between two tiles' multiplies. Triton 3.6 ptxas at D128: 112 / 128 bytes of spills (against
# 176 / 192 for the one-tile kernel).
PERSISTENT = {"PERSISTENT": True}


def _gbwd11_cases():
    """Several tiles per program (more tiles than SMs), causal tiles whose number of dS^T buffer uses is odd (S=384:
    6, 4 and 2 query blocks), fewer tiles than SMs (as in gbwd7)."""
    return _each_dtype_and_dim(((2, 40, 512, False), (2, 20, 1024, True), (4, 40, 384, True), (1, 3, 2048, True)))


def gbwd11check() -> list:
    """The persistent backward (default and the GPU test's configs) against fp32 SDPA's gradients."""
    def variants(D):
        alt = ({"DQ_SPLIT": False, "STAGES": 2}, {"DQ_SPLIT": False, "DQ_ALT": True, "STAGES": 2}) if D == 128 else \
            ({"DQ_ALT": False, "STAGES": 2},)
        return [("persistent", PERSISTENT), *((f"persistent {c}", {**PERSISTENT, **c}) for c in alt)]
    return _gluon_bwd_check(_gbwd11_cases(), variants) + \
        _gluon_bwd_check(_gbwd_cases(), lambda D: [("persistent", PERSISTENT)])


def gbwd11() -> list:
    """Persistent against one tile per program, each twice, beside SDPA (GPU time, 5 rounds, B4 H32 S4096 fp16);
    first the kernels of each (profiler, 5 calls)."""
    from tcourse.kernels import attention_bwd_kernels as AB

    rows: list = []
    for D, causal, timed in _bwd_problems():
        q, k, v, do = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(4))
        o, lse = AB.attention_fwd(q, k, v, causal)
        for label, cfg in (("one tile", None), ("persistent", PERSISTENT)):
            _guard(rows, {"D": D, "causal": causal, "profile": label},
                   lambda: _kernel_times(lambda: AB.attention_bwd(do, q, k, v, o, lse, causal, gluon=True,
                                                                  gluon_config=cfg)))
        del q, k, v, do, o, lse
        for label, cfg in (("one tile", None), ("persistent", PERSISTENT)) * 2:
            timed(rows, label, 5, 30, gluon=True, gluon_config=cfg)
    return rows


PIN = {"PIN_WAIT": True}


def gbwd12check() -> list:
    """Session 20: the Gluon backward with dP^T's wait held after the exponentials (``PIN_WAIT``: a shared-memory
    load per 4 values, its address depending on them) against fp32 SDPA's gradients, on the gbwd and gbwd11 cases.
    Runs at commit 49cacba, the only one with ``PIN_WAIT``."""
    return _gluon_bwd_check(list(_gbwd_cases()) + list(_gbwd11_cases()), lambda D: [("pin", PIN)])


def gbwd12() -> list:
    """``PIN_WAIT`` against the default, each twice, beside SDPA's backward (GPU time, 5 rounds, B4 H32 S4096 fp16)."""
    rows: list = []
    for D, causal, timed in _bwd_problems():
        for label, cfg in (("default", None), ("pin", PIN)) * 2:
            timed(rows, label, 5, 30, gluon=True, gluon_config=cfg)
    return rows


def mm1024() -> list:
    """Session 12: the Gluon warp-specialised matmul at 1024^3 in cuBLAS's shape (ncu, session 11: cuBLAS runs
    nvjet 128x64 tiles, K steps of 64, 8 stages, 3 warpgroups; ours 64x128x128, 1 warpgroup, 7.8 against 7.0 us),
    against the public matmul; fp16 and bf16, 5 rounds."""
    from tcourse.kernels import gluon_matmul as GM, matmul_kernels as M

    rows: list = []
    configs = [(128, 64, 64, 8, 8), (128, 64, 64, 6, 8), (128, 64, 128, 4, 8), (64, 128, 64, 8, 4),
               (64, 128, 128, 4, 4), (128, 128, 64, 4, 8)]
    for dt in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
        ref = a.double() @ b.double()
        _guard(rows, {"dtype": str(dt), "kernel": "public matmul"},
               lambda: {"err": _rel(M.matmul(a, b), ref), **_cmp(lambda: M.matmul(a, b), lambda: a @ b, rounds=5)})
        for bm, bn, bk, st, w in configs:
            cfg = {"BM": bm, "BN": bn, "BK": bk, "STAGES": st, "num_warps": w}
            _guard(rows, {"dtype": str(dt), "kernel": "gluon", **cfg},
                   lambda cfg=cfg: {"err": _rel(GM.matmul(a, b, cfg), ref),
                                    **_cmp(lambda: GM.matmul(a, b, cfg), lambda: a @ b, rounds=5)})
        _guard(rows, {"dtype": str(dt), "kernel": "public matmul again"},
               lambda: _cmp(lambda: M.matmul(a, b), lambda: a @ b, rounds=5))
    return rows


def mm1024b() -> list:
    """Session 17: the Gluon matmul at 1024^3 (the public one there: 64x128x64, 8 stages; GPU time 0.96x cuBLAS in
    runs 11-13) against shorter K steps (BK 32, 16 stages: the first wgmma waits for 12 KB instead of 24 KB); fp16
    and bf16, GPU time, 5 rounds. The recorded run also had C stored straight from the accumulator's registers
    (a copy of ``gluon_matmul.matmul_ws_kernel`` with masked global stores for its epilogue), alone and with the
    short K steps: slower, so that kernel was not kept here; it is in commit 9c74dd1."""
    from tcourse.kernels import gluon_matmul as GM, matmul_kernels as M

    rows: list = []
    base = {"BM": 64, "BN": 128, "BK": 64, "STAGES": 8, "num_warps": 4}
    short = {**base, "BK": 32, "STAGES": 16}
    for dt in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
        ref = a.double() @ b.double()
        variants = {"public matmul": lambda: M.matmul(a, b), "gluon BK32 x16": lambda: GM.matmul(a, b, short),
                    "public matmul again": lambda: M.matmul(a, b)}
        for name, fn in variants.items():
            _guard(rows, {"dtype": str(dt), "kernel": name},
                   lambda fn=fn: {"err": _rel(fn(), ref), **_cmp(fn, lambda: a @ b, rounds=5)})
    return rows


def mm1024t() -> list:
    """Session 17: why do_bench's ratio at 1024^3 swings between runs (fp16 0.92 / 1.01 / 0.93 in runs 11-13) while GPU
    time stays at 0.96: ten interleaved rounds of ours and torch, each round's do_bench samples and GPU-time samples
    summarised (median, p5, p20, p80, p95), for the public ``matmul``, for the same kernel replayed from a CUDA graph
    (no host work inside the timed interval), and for torch; fp16 and bf16."""
    import statistics

    import triton.testing

    from tcourse.bench import gpu_samples
    from tcourse.kernels import matmul_kernels as M

    def summary(xs):
        q = statistics.quantiles(sorted(xs), n=20, method="inclusive")
        return {"n": len(xs), "median_us": statistics.median(xs) * 1e3, "p5_us": q[0] * 1e3, "p20_us": q[3] * 1e3,
                "p80_us": q[15] * 1e3, "p95_us": q[18] * 1e3}

    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
        M.matmul(a, b)
        graph = torch.cuda.CUDAGraph()
        fns = {"ours": lambda: M.matmul(a, b), "torch": lambda: a @ b}
        try:
            with torch.cuda.graph(graph):
                M.matmul(a, b)
            fns["ours graph"] = graph.replay
        except Exception as e:  # noqa: BLE001 - the other two are still worth timing
            rows.append({"dtype": str(dt), "fn": "ours graph", "error": f"{type(e).__name__}: {str(e)[:300]}"})
        for rnd in range(10):
            for name, fn in fns.items():
                for timer in ("do_bench", "gpu_time"):
                    xs = (list(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all")) if timer == "do_bench"
                          else gpu_samples(fn))
                    rows.append({"dtype": str(dt), "round": rnd, "fn": name, "timer": timer, **summary(xs)})
            r = [x for x in rows if x.get("round") == rnd and x["dtype"] == str(dt)]
            cells = "  ".join(f"{x['fn']}/{x['timer']} {x['median_us']:.2f}" for x in r)
            print(f"  {dt} round {rnd}: {cells}", flush=True)
        del graph
    return rows


def mm1024u() -> list:
    """Session 18: what moves a whole do_bench call's distribution at 1024^3 by ~0.55 us (``mm1024t``). Twelve
    interleaved rounds of ours, torch and torch writing into one preallocated output (``out=``), each timed by the
    stock do_bench (which allocates its 256 MB flush buffer anew every call) and by the same do_bench with one flush
    buffer kept for all calls; the flush buffer's and the output's addresses and the wall-clock time recorded per
    call (an ``nvidia-smi`` clock log runs beside). Every fourth round also reads the timed kernel's own durations
    from the profiler (CUPTI) during a stock do_bench call: if those move with do_bench's median, the kernel itself
    runs slower in that call; if not, the events around it do."""
    import statistics

    import triton.runtime as rt
    import triton.testing

    from tcourse.kernels import matmul_kernels as M

    driver = rt.driver.active
    stock_cache = driver.get_empty_cache_for_benchmark
    fixed = stock_cache()
    seen: dict = {}

    def tracking_cache():
        buf = stock_cache()
        seen["cache_ptr"] = buf.data_ptr()
        return buf

    def summary(xs):
        q = statistics.quantiles(sorted(xs), n=10, method="inclusive")
        return {"n": len(xs), "median_us": statistics.median(xs) * 1e3, "p20_us": q[1] * 1e3, "p80_us": q[7] * 1e3}

    def bench(fn, cache_fn):
        driver.get_empty_cache_for_benchmark = cache_fn
        try:
            return list(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="all"))
        finally:
            driver.get_empty_cache_for_benchmark = stock_cache

    def kernel_us(fn, skip=("fill", "zero", "Fill")):
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            xs = bench(fn, tracking_cache)
        durs = [e.time_range.elapsed_us() for e in prof.events() if e.device_type.name == "CUDA"
                and not any(s in e.name for s in skip)]
        names = sorted({e.name[:60] for e in prof.events() if e.device_type.name == "CUDA"
                        and not any(s in e.name for s in skip)})
        return {"do_bench": summary(xs), "cupti_median_us": statistics.median(durs) if durs else None,
                "cupti_n": len(durs), "kernels": names[:4]}

    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
        c = torch.empty(1024, 1024, device="cuda", dtype=dt)
        last: dict = {}

        def keep(f):
            def g():
                out = f()
                last["out_ptr"] = out.data_ptr()
            return g

        fns = {"ours": keep(lambda: M.matmul(a, b)), "torch": keep(lambda: a @ b),
               "torch out=": keep(lambda: torch.matmul(a, b, out=c))}
        for rnd in range(12):
            for name, fn in fns.items():
                for flush in ("stock", "fixed"):
                    t0 = time.time()
                    xs = bench(fn, tracking_cache if flush == "stock" else (lambda: fixed))
                    rows.append({"dtype": str(dt), "round": rnd, "fn": name, "flush": flush, "t0": t0,
                                 "cache_ptr": seen.get("cache_ptr") if flush == "stock" else fixed.data_ptr(),
                                 "out_ptr": last.get("out_ptr"), **summary(xs)})
                if rnd % 4 == 3 and name != "torch out=":
                    rows.append({"dtype": str(dt), "round": rnd, "fn": name, "flush": "stock+profiler",
                                 **_guarded(lambda fn=fn: kernel_us(fn))})
            r = [x for x in rows if x.get("round") == rnd and x["dtype"] == str(dt) and "median_us" in x]
            print(f"  {dt} round {rnd}: " + "  ".join(f"{x['fn']}/{x['flush']} {x['median_us']:.2f}" for x in r),
                  flush=True)
    return rows


def _guarded(fn) -> dict:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - the timing rows matter more than the profiler's
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def gmmhost() -> dict:
    """Session 13: where the Gluon matmul's host time goes at 1024^3 (45.9 us a call in bench_suite_run9 against
    torch's 16.8) and what the launch plan keyed on the three addresses leaves of it; each step alone, a profile
    of the unplanned path; then the public matmul (Gluon at 1024^3 again) checked and timed by do_bench and by
    GPU time beside the blocked kernel, fp16 and bf16, 5 rounds."""
    import cProfile
    import io
    import pstats

    from bench.host import host_us
    from tcourse.kernels import _launch as L, gluon_matmul as GM, matmul_kernels as M

    out: dict = {"host_us": {}, "sync_us": {}, "checks": {}, "timing": []}
    cfg = M.GLUON_CONFIG
    a, b = (torch.randn(1024, 1024, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty_like(a)
    for _ in range(3):
        M.matmul(a, b)
    meta = {"BM": 64, "BN": 128, "BK": 64, "STAGES": 8, "MMA_WARPS": 4, "num_warps": 4}
    grid = (16, 8)
    descs = GM.descriptors(a, b, c, 64, 128, 64)
    GM._launch(grid, (*descs, 1024), meta)
    entries = list(GM._launch.compiled.values())
    out["launcher"] = {"entries": len(entries), "raw_c_launch": [e.c_launch is not None for e in entries],
                       "objects": [e.objects for e in entries], "plans": len(GM._PLANS)}
    plan = L.plan_of(GM._launch, grid, (*descs, 1024), meta)
    out["launcher"]["plan"] = plan is not None
    print("  launcher", out["launcher"], flush=True)

    def unplanned():
        GM._PLANS.clear()
        return GM.matmul(a, b, cfg)

    steps = {
        "torch a @ b": lambda: a @ b,
        "public matmul (Gluon, planned)": lambda: M.matmul(a, b),
        "gluon_matmul.matmul, plans cleared each call": unplanned,
        "matmul_blocked": lambda: M.matmul_blocked(a, b),
        "Launcher, descriptors built once": lambda: GM._launch(grid, (*descs, 1024), meta),
        "kernel[grid], descriptors built once": lambda: GM.matmul_ws_kernel[grid](*descs, 1024, **meta),
        "descriptors()": lambda: GM.descriptors(a, b, c, 64, 128, 64),
        "a.new_empty((1024, 1024))": lambda: a.new_empty((1024, 1024)),
    }
    if plan is not None:
        steps["plan() alone"] = plan
    for name, fn in steps.items():
        try:
            out["host_us"][name] = host_us(fn)
            t = []
            for _ in range(200):  # one call and a synchronize: launch latency plus GPU time
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                t.append(time.perf_counter() - t0)
            out["sync_us"][name] = sorted(t)[100] * 1e6
        except Exception as e:  # noqa: BLE001
            out["host_us"][name] = f"{type(e).__name__}: {e}"
        print(f"  {name:<48} host {out['host_us'][name]}  sync {out['sync_us'].get(name)}", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(1000):
        unplanned()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
    out["profile_unplanned"] = buf.getvalue()
    print("\n".join(out["profile_unplanned"].splitlines()[:40]), flush=True)
    for dt in (torch.float16, torch.bfloat16):
        errs = []
        for seed in range(4):  # fresh inputs (new addresses), then the same ones again (the plan)
            torch.manual_seed(seed)
            x, y = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
            ref = x.double() @ y.double()
            errs += [_rel(M.matmul(x, y), ref) for _ in range(3)]
        out["checks"][str(dt)] = errs
        print(f"  check {dt} max rel err {max(errs):.2e}", flush=True)
        x, y = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
        for timer in ("do_bench", "gpu_time"):
            for kernel, fn in (("public matmul (Gluon)", lambda: M.matmul(x, y)),
                               ("matmul_blocked", lambda: M.matmul_blocked(x, y))):
                _guard(out["timing"], {"dtype": str(dt), "timer": timer, "kernel": kernel},
                       lambda fn=fn, timer=timer: _cmp(fn, lambda: x @ y, timer=timer, rounds=5))
    return out


def gattnhost() -> dict:
    """Session 13: the pipelined Gluon attention's host time with and without its launch plan (four descriptors a
    call; B1 H2 S1024 D64 causal fp16, a few us of GPU time), then the suite's short causal shape (B4 H32 S1024 D64,
    where do_bench read 0.80x against 1.02x of GPU time in the 07:40 suite) by do_bench and GPU time, 5 rounds."""
    import torch.nn.functional as F

    from bench.host import host_us
    import tcourse.kernels as K
    from tcourse.kernels import gluon_attention_pipelined as P

    out: dict = {"host_us": {}, "timing": []}
    q, k, v = (torch.randn(1, 2, 1024, 64, device="cuda", dtype=torch.float16) for _ in range(3))

    def unplanned():
        P._PLANS.clear()
        return P.attention(q, k, v, True)

    for name, fn in (("torch sdpa", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                     ("gluon pipelined, planned", lambda: P.attention(q, k, v, True)),
                     ("gluon pipelined, plans cleared each call", unplanned)):
        out["host_us"][name] = host_us(fn)
        print(f"  {name:<44} host {out['host_us'][name]:.1f} us", flush=True)
    for dt in (torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(4, 32, 1024, 64, device="cuda", dtype=dt) for _ in range(3))
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        for timer in ("do_bench", "gpu_time"):
            _guard(out["timing"], {"dtype": str(dt), "timer": timer},
                   lambda timer=timer: {"err": _rel(K.attention(q, k, v, causal=True), ref),
                                        **_cmp(lambda: K.attention(q, k, v, causal=True),
                                               lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                               timer=timer, rounds=5)})
    return out


# -- softmax 4096 x 1024 -----------------------------------------------------------------------------
def softmax() -> list:
    """Every (ROWS, num_warps) of the one-block kernel at 4096 x 1024 fp32 (the suite's 1.18-1.21x case)."""
    import triton

    from tcourse.kernels import softmax_kernels as SK

    rows: list = []
    x = torch.randn(4096, 1024, device="cuda")
    ref = torch.softmax(x.double(), dim=1)
    # softmax_run1.json. Run 2 (softmax_run2.json) timed a persistent version of the kernel (a strided loop over
    # row blocks with tl.range(num_stages=2-3), 4-16 programs per SM): 0.83-1.17x against 1.18-1.20x for these
    # one-block-per-program launches in the same run, so the kernel stayed as it is
    for r in (1, 2, 4, 8, 16):
        for w in (1, 2, 4, 8, 16):
            def one(r=r, w=w):
                out = torch.empty_like(x)
                grid = (triton.cdiv(4096, r),)

                def run():
                    SK.softmax_rows_kernel[grid](x, out, 4096, 1024 // 4, 1024 // 4, 1024 // 4, BLOCK_N=1024, ROWS=r,
                                                 VEC=4, EVICT="evict_first", num_warps=w)
                run()
                return {"err": _rel(out, ref), **_cmp(run, lambda: torch.softmax(x, dim=1), rounds=3)}
            _guard(rows, {"ROWS": r, "num_warps": w}, one)
    return rows


# -- attention forward --------------------------------------------------------------------------------
def fwd() -> list:
    import torch.nn.functional as F

    from tcourse.kernels import attention_kernels as A

    rows: list = []
    try:
        from tcourse.kernels import gluon_attention as GA
    except Exception:  # noqa: BLE001
        GA = None
    for S in (1024, 4096):
        for D in (64, 128):
            q, k, v = (torch.randn(4, 32, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
            ref = F.scaled_dot_product_attention(q, k, v)
            flops = 4 * 4 * 32 * S * S * D
            if GA is not None:
                for cfg in ({"BM": 64, "BN": 128, "STAGES": 2}, {"BM": 64, "BN": 64, "STAGES": 3},
                            {"BM": 64, "BN": 128, "STAGES": 3}, {"BM": 64, "BN": 64, "STAGES": 2}):
                    _guard(rows, {"S": S, "D": D, "kernel": "gluon_ws", **cfg},
                           lambda cfg=cfg: {"err": _rel(GA.attention(q, k, v, config=cfg), ref),
                                            **_cmp(lambda: GA.attention(q, k, v, config=cfg),
                                                   lambda: F.scaled_dot_product_attention(q, k, v), flops=flops)})
            for cfg in ({"BM": 128, "BN": 128, "num_stages": 2, "num_warps": 8},
                        {"BM": 128, "BN": 64, "num_stages": 2, "num_warps": 8}):
                _guard(rows, {"S": S, "D": D, "kernel": "triton_tma", **cfg},
                       lambda cfg=cfg: {"err": _rel(A.attention_tma(q, k, v, config=cfg), ref),
                                        **_cmp(lambda: A.attention_tma(q, k, v, config=cfg),
                                               lambda: F.scaled_dot_product_attention(q, k, v), flops=flops)})
            del q, k, v, ref
            torch.cuda.empty_cache()
    return rows


def _pipelined_cases():
    """(B, H, S, D, causal, dtype): fewer tiles than SMs, several tiles per program, both head dims."""
    for dt in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            yield 1, 2, 256, 64, causal, dt
            yield 2, 3, 1024, 128, causal, dt
            yield 3, 50, 512, 64, causal, dt
            yield 1, 4, 4096, 128, causal, dt


def fwd2check() -> list:
    """Correctness of the pipelined Gluon attention (hand-written barriers: run first, with a time limit)."""
    import torch.nn.functional as F

    from tcourse.kernels import gluon_attention_pipelined as P

    rows = []
    for B, H, S, D, causal, dt in _pipelined_cases():
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
        for cfg in (None, {"PINGPONG": True}, {"PINGPONG": False}):
            if not P.supports(q, causal, cfg):
                continue
            t = time.time()
            try:
                out = P.attention(q, k, v, causal=causal, config=cfg)
                torch.cuda.synchronize()
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                err = float((out.float() - ref).abs().max())
                rows.append({"B": B, "H": H, "S": S, "D": D, "causal": causal, "dtype": str(dt), "cfg": cfg,
                             "max_abs_err": err, "ok": err < 2e-2, "s": round(time.time() - t, 1)})
            except Exception as e:  # noqa: BLE001
                rows.append({"B": B, "H": H, "S": S, "D": D, "causal": causal, "cfg": cfg, "error": str(e)[:300]})
            print(" ", rows[-1], flush=True)
    return rows


def fwd2() -> list:
    """The pipelined Gluon attention (its config, and with ping-pong switched), the Triton TMA kernel and
    the public ``attention`` against cuDNN (SDPA's default): 8 shapes, fp16 then bf16."""
    import torch.nn.functional as F

    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        for S in (1024, 4096):
            for D in (64, 128):
                q, k, v = (torch.randn(4, 32, S, D, device="cuda", dtype=dt) for _ in range(3))
                for causal in (False, True):
                    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    flops = 4 * 4 * 32 * S * S * D // (2 if causal else 1)
                    label = {"S": S, "D": D, "causal": causal, "dtype": str(dt)[6:]}
                    variants = {"pipelined": lambda: P.attention(q, k, v, causal),
                                "pipelined_alt": lambda: P.attention(q, k, v, causal, config={
                                    "PINGPONG": not P.CONFIGS[D]["PINGPONG"]}),
                                "triton_tma": lambda: A.attention_tma(q, k, v, causal),
                                "public": lambda: A.attention(q, k, v, causal)}
                    for name, fn in variants.items():
                        _guard(rows, {**label, "kernel": name},
                               lambda fn=fn: {"err": _rel(fn(), ref),
                                              **_cmp(fn, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                                     flops=flops)})
                del q, k, v, ref
                torch.cuda.empty_cache()
    return rows


def _fwd_against_cudnn(shapes, variants, rounds: int = ROUNDS, gate: float | None = None) -> list:
    """Per (S, D, causal) of fp16 B4 H32: each of ``variants(q, k, v, causal)`` (name -> call) checked against
    SDPA and timed against cuDNN (SDPA's default), GPU time, interleaved; with ``gate``, a variant whose
    relative error is not below it is recorded and not timed."""
    import torch.nn.functional as F

    rows: list = []
    for S, D, causal in shapes:
        q, k, v = (torch.randn(4, 32, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        flops = 4 * 4 * 32 * S * S * D // (2 if causal else 1)

        def one(fn):
            err = _rel(fn(), ref)
            if gate is not None and not err < gate:
                return {"err": err, "ok": False}
            return {"err": err, **_cmp(fn, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                       flops=flops, rounds=rounds)}
        for name, fn in variants(q, k, v, causal).items():
            _guard(rows, {"S": S, "D": D, "causal": causal, "kernel": name}, lambda fn=fn: one(fn))
        del q, k, v, ref
        torch.cuda.empty_cache()
    return rows


def fwd3() -> list:
    """The pipelined Gluon attention after the tile order change (a head's tiles adjacent), on the shapes the
    public ``attention`` sends to it, beside the Triton TMA kernel; GPU time against cuDNN, fp16."""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    return _fwd_against_cudnn(((1024, 64, True), (1024, 128, False), (1024, 128, True), (4096, 128, False),
                               (4096, 128, True)),
                              lambda q, k, v, causal: {"pipelined": lambda: P.attention(q, k, v, causal),
                                                       "triton_tma": lambda: A.attention_tma(q, k, v, causal)})


FWD_SHAPES = [(S, D, causal) for S in (1024, 4096) for D in (64, 128) for causal in (False, True)]


def fwd4check() -> list:
    """The pipelined Gluon attention in every tile order (:data:`ORDERS`) against fp32 SDPA: partial last
    rounds (even and odd), one round, several tiles per program; hand-written barriers: run first, time-limited."""
    import torch.nn.functional as F

    from tcourse.kernels import gluon_attention_pipelined as P

    rows = []
    for B, H, S, D in ((1, 2, 256, 64), (1, 50, 512, 64), (3, 50, 512, 64), (2, 3, 1024, 128), (1, 70, 768, 128),
                       (1, 4, 4096, 128), (2, 64, 1024, 64)):
        for causal in (False, True):
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16) for _ in range(3))
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            for order in P.ORDERS:
                label = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "order": order}
                t = time.time()
                try:
                    out = P.attention(q, k, v, causal=causal, order=order)
                    torch.cuda.synchronize()
                    err = float((out.float() - ref).abs().max())
                    rows.append({**label, "max_abs_err": err, "ok": err < 2e-2, "s": round(time.time() - t, 1)})
                except Exception as e:  # noqa: BLE001
                    rows.append({**label, "ok": False, "error": str(e)[:300]})
                print(" ", rows[-1], flush=True)
    return rows


def fwd4() -> list:
    """Each tile order of the pipelined Gluon attention (and ping-pong switched, in rounds) beside the Triton
    TMA kernel, on the suite's 8 fp16 shapes; GPU time against cuDNN, 5 interleaved rounds."""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    def variants(q, k, v, causal):
        alt = {"PINGPONG": not P.CONFIGS[q.shape[3]]["PINGPONG"]}
        return {**{order: lambda order=order: P.attention(q, k, v, causal, order=order) for order in P.ORDERS},
                "rounds_alt": lambda: P.attention(q, k, v, causal, config=alt, order="rounds"),
                "triton_tma": lambda: A.attention_tma(q, k, v, causal)}
    return _fwd_against_cudnn(FWD_SHAPES, variants, rounds=5)


D64_CONFIGS = ({"BN": 256, "STAGES": 2, "PINGPONG": False}, {"BN": 256, "STAGES": 2, "PINGPONG": True},
               {"STAGES": 4}, {"STAGES": 4, "PINGPONG": True}, {"STAGES": 2, "PINGPONG": True})


def fwd5() -> list:
    """D=64, where the Triton kernel still serves: larger key blocks (BN=256, not causal: fewer rescales and
    reductions per key) and deeper rings in the pipelined Gluon kernel, each checked against SDPA first, beside
    the Triton TMA kernel; GPU time against cuDNN, 5 interleaved rounds."""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    def variants(q, k, v, causal):
        return {**{json.dumps(cfg): lambda cfg=cfg: P.attention(q, k, v, causal, config=cfg)
                   for cfg in D64_CONFIGS if P.supports(q, causal, cfg)},
                "default": lambda: P.attention(q, k, v, causal),
                "triton_tma": lambda: A.attention_tma(q, k, v, causal)}
    return _fwd_against_cudnn(((1024, 64, False), (4096, 64, False), (4096, 64, True)), variants, rounds=5,
                              gate=1e-3)


FWD6_CONFIGS = {"128x64 s3 w8": {"BM": 128, "BN": 64, "num_stages": 3, "num_warps": 8},
                "128x64 s4 w8": {"BM": 128, "BN": 64, "num_stages": 4, "num_warps": 8},
                "128x128 s2 w8 r128": {"BM": 128, "BN": 128, "num_stages": 2, "num_warps": 8, "maxnreg": 128},
                "64x64 s3 w4": {"BM": 64, "BN": 64, "num_stages": 3, "num_warps": 4},
                "64x128 s2 w4": {"BM": 64, "BN": 128, "num_stages": 2, "num_warps": 4}}


def fwd6() -> list:
    """Session 17: the Triton TMA forward with each block's row sums taken by the tensor cores (``ROWSUM_MMA``:
    p @ ones, BM x 8 by mma.sync or BM x 16 by wgmma, instead of 32 FADDs and two shuffle rounds per thread in
    the sm_90 loop: 306 -> 276 / 281 instructions at 128x64) against the reduction, per config, on the D=64
    shapes; checked against SDPA first, GPU time against cuDNN, 5 interleaved rounds, fp16 B4 H32. Slower, so
    ``ROWSUM_MMA`` was taken out again: this part runs at commit 9c74dd1, where the kernel has it."""
    from tcourse.kernels import attention_kernels as A

    def variants(q, k, v, causal):
        out = {}
        for name, cfg in FWD6_CONFIGS.items():
            if causal and cfg["BN"] > cfg["BM"]:
                continue
            for rs in ((0, 8, 16) if name == "128x64 s3 w8" else (0, 8)):
                out[f"{name} rowsum {rs or 'reduce'}"] = \
                    lambda cfg=cfg, rs=rs: A.attention_tma(q, k, v, causal, config={**cfg, "ROWSUM_MMA": rs})
        out["public"] = lambda: A.attention(q, k, v, causal)
        return out
    return _fwd_against_cudnn(((1024, 64, False), (4096, 64, False), (4096, 64, True), (1024, 64, True)), variants,
                              rounds=5, gate=1e-3)


@triton.jit
def attention_fwd_persistent_kernel(q_ptr, k_desc, v_desc, o_desc, S, qk_scale, n_tiles, D: tl.constexpr,
                                    BM: tl.constexpr, BN: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                                    FLATTEN: tl.constexpr):
    """Session 17's trial kernel (here, not in tcourse: it is measured, not used): the Triton TMA forward with one
    program looping over query tiles (a head's tiles adjacent), the loop flattened (``tl.range(..., flatten=True)``)
    so that the pipeliner can issue the next tile's K/V loads during this tile's last blocks. Q comes by pointer
    loads: with Q through a descriptor, Triton 3.6 fails in TMA lowering once flattened ('scf.if' op ... memdesc
    ... mutable)."""
    n_m = S // BM
    offs_d = tl.arange(0, D)
    for tile in tl.range(tl.program_id(0), n_tiles, NUM_PROGRAMS, flatten=FLATTEN):
        row0 = (tile // n_m) * S
        start_m = tile % n_m
        rows = row0 + start_m * BM + tl.arange(0, BM)
        q = tl.load(q_ptr + rows[:, None].to(tl.int64) * D + offs_d[None, :])
        m_i = tl.full((BM,), -float("inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for start_n in range(0, S, BN):
            k = k_desc.load([row0 + start_n, 0])
            qk = tl.dot(q, tl.trans(k))
            v = v_desc.load([row0 + start_n, 0])
            acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, qk, v, qk_scale)
        o_desc.store([row0 + start_m * BM, 0], (acc / l_i[:, None]).to(o_desc.dtype))


# name -> (BM, BN, stages, warps, flatten, programs per SM)
FWD7_VARIANTS = {"128x64 s3 w8 flat P264": (128, 64, 3, 8, True, 2), "128x64 s3 w8 flat P132": (128, 64, 3, 8, True, 1),
                 "128x64 s3 w8 loop P264": (128, 64, 3, 8, False, 2), "64x64 s3 w4 flat P264": (64, 64, 3, 4, True, 2),
                 "64x128 s2 w4 flat P264": (64, 128, 2, 4, True, 2),
                 "128x128 s2 w8 r128 flat P264": (128, 128, 2, 8, True, 2)}


def fwd7() -> list:
    """Session 17: the persistent, flattened Triton forward (:func:`attention_fwd_persistent_kernel`) per config and
    program count (P: programs; 132 SMs) against the public ``attention`` (one program per tile), not causal D=64;
    checked against SDPA first, GPU time against cuDNN, 5 interleaved rounds, fp16 B4 H32."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from tcourse.kernels import attention_kernels as A

    def run(q, k, v, bm, bn, stages, warps, flatten, per_sm):
        B, H, S, D = q.shape
        o = torch.empty_like(q)
        kd, vd = (TensorDescriptor(t, [B * H * S, D], [D, 1], [bn, D]) for t in (k, v))
        od = TensorDescriptor(o, [B * H * S, D], [D, 1], [bm, D])
        n_tiles = B * H * S // bm
        programs = min(n_tiles, per_sm * 132)
        extra = {"maxnreg": 128} if bn == 128 and bm == 128 else {}
        attention_fwd_persistent_kernel[(programs,)](q, kd, vd, od, S, D ** -0.5 * 1.4426950408889634, n_tiles, D=D,
                                                     BM=bm, BN=bn, NUM_PROGRAMS=programs, FLATTEN=flatten,
                                                     num_stages=stages, num_warps=warps, **extra)
        return o

    def variants(q, k, v, causal):
        return {"public": lambda: A.attention(q, k, v, causal),
                **{name: lambda c=c: run(q, k, v, *c) for name, c in FWD7_VARIANTS.items()}}
    return _fwd_against_cudnn(((1024, 64, False), (4096, 64, False)), variants, rounds=5, gate=1e-3)


FWD8_CONFIGS = {"64x64 s2 w4": {"BM": 64, "BN": 64, "num_stages": 2, "num_warps": 4},
                "64x64 s2 w4 r96": {"BM": 64, "BN": 64, "num_stages": 2, "num_warps": 4, "maxnreg": 96},
                "64x64 s3 w4 r96": {"BM": 64, "BN": 64, "num_stages": 3, "num_warps": 4, "maxnreg": 96},
                "128x64 s2 w8": {"BM": 128, "BN": 64, "num_stages": 2, "num_warps": 8},
                "128x64 s3 w4": {"BM": 128, "BN": 64, "num_stages": 3, "num_warps": 4},
                "128x32 s4 w8": {"BM": 128, "BN": 32, "num_stages": 4, "num_warps": 8},
                "128x64 s3 w8 (pinned)": {"BM": 128, "BN": 64, "num_stages": 3, "num_warps": 8}}


def fwd8() -> list:
    """Session 17: S1024 D64, not causal (0.93x cuDNN): configs of the Triton TMA forward not in its list, aimed at
    more programs per SM (64x64 with 2 stages, or capped at 96 registers: four 128-thread programs per SM) so that
    one program's start and end overlap another's loop, and at the pinned config's neighbours; checked against SDPA
    first, GPU time against cuDNN, 5 interleaved rounds, fp16 B4 H32."""
    from tcourse.kernels import attention_kernels as A

    def variants(q, k, v, causal):
        return {name: lambda cfg=cfg: A.attention_tma(q, k, v, causal, config=cfg)
                for name, cfg in FWD8_CONFIGS.items()}
    return _fwd_against_cudnn(((1024, 64, False),), variants, rounds=5, gate=1e-3)


FWD9_CONFIGS = {"BN64 s3 r120 x2": {"BN": 64, "STAGES": 3, "CONSUMER_REGS": 120, "maxnreg": 112, "PER_SM": 2},
                "BN64 s4 r120 x2": {"BN": 64, "STAGES": 4, "CONSUMER_REGS": 120, "maxnreg": 112, "PER_SM": 2},
                "BN64 s2 r112 x2": {"BN": 64, "STAGES": 2, "CONSUMER_REGS": 112, "maxnreg": 104, "PER_SM": 2},
                "BN64 s3 r120 x1": {"BN": 64, "STAGES": 3, "CONSUMER_REGS": 120, "maxnreg": 112, "PER_SM": 1},
                "BN64 s3 x1": {"BN": 64, "STAGES": 3}}


def fwd9() -> list:
    """Session 17: the pipelined Gluon forward at D=64 with two programs per SM, as the Triton kernel runs there: key
    blocks of 64, each consumer warpgroup capped at 120 registers and the launch at 112 (2 x 288 threads fit the SM's
    64K; Triton 3.6 ptxas, offline: no spills, 82 KB of shared memory at 3 stages), the grid twice the SMs; against
    its default (BN 128, 240 registers, one program per SM) and the public ``attention``; checked against SDPA first
    (hand-written barriers: run under a time limit), GPU time against cuDNN, 5 interleaved rounds, fp16 B4 H32.
    Slower, so the kernel's CONSUMER_REGS, PER_SM and maxnreg settings were taken out again: this part runs at
    commit 39072fa."""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    def variants(q, k, v, causal):
        out = {"gluon default": lambda: P.attention(q, k, v, causal), "public": lambda: A.attention(q, k, v, causal)}
        for name, cfg in FWD9_CONFIGS.items():
            if causal and cfg["BN"] != 2 * P.CONFIGS[64]["BM"]:
                continue
            out[name] = lambda cfg=cfg: P.attention(q, k, v, causal, config=cfg)
        return out
    return _fwd_against_cudnn(((1024, 64, False), (4096, 64, False)), variants, rounds=5, gate=1e-3)


def fwd11check() -> list:
    """Session 20: the pipelined Gluon forward with the P V wait held after the softmax (``PIN_WAIT`` 1: a fence, 2: a
    dependent shared-memory load), with and without ping-pong, against fp32 SDPA on the fwd2check cases
    (hand-written barriers: run first, with a time limit). Runs at commit 49cacba, the only one with ``PIN_WAIT``
    (run 1, ``fwd11_run1.json``, at a state before it with only the fence, as ``PIN_WAIT=True``)."""
    import torch.nn.functional as F

    from tcourse.kernels import gluon_attention_pipelined as P

    rows = []
    for B, H, S, D, causal, dt in _pipelined_cases():
        q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for cfg in ({"PIN_WAIT": 1}, {"PIN_WAIT": 2}, {"PIN_WAIT": 2, "PINGPONG": True},
                    {"PIN_WAIT": 2, "PINGPONG": False}):
            label = {"B": B, "H": H, "S": S, "D": D, "causal": causal, "dtype": str(dt), "cfg": cfg}
            try:
                out = P.attention(q, k, v, causal=causal, config=cfg)
                torch.cuda.synchronize()
                err = float((out.float() - ref).abs().max())
                rows.append({**label, "max_abs_err": err, "rel_err": _rel(out, ref), "ok": err < 2e-2})
            except Exception as e:  # noqa: BLE001
                rows.append({**label, "ok": False, "error": str(e)[:300]})
            print(" ", rows[-1], flush=True)
    print("all ok:", all(r["ok"] for r in rows), flush=True)
    return rows


def fwd11() -> list:
    """Session 20: ``PIN_WAIT`` (above) on the suite's 8 fp16 shapes: the Gluon kernel's default, the wait held by a
    fence, by a load, by a load with ping-pong switched, the Triton TMA kernel and the public ``attention``; checked
    against SDPA (gate 1e-3), GPU time against cuDNN, 5 interleaved rounds."""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    def variants(q, k, v, causal):
        pp = P.CONFIGS[q.shape[3]]["PINGPONG"]
        return {"gluon": lambda: P.attention(q, k, v, causal),
                "gluon fence": lambda: P.attention(q, k, v, causal, config={"PIN_WAIT": 1}),
                "gluon load": lambda: P.attention(q, k, v, causal, config={"PIN_WAIT": 2}),
                "gluon load alt": lambda: P.attention(q, k, v, causal, config={"PIN_WAIT": 2, "PINGPONG": not pp}),
                "triton_tma": lambda: A.attention_tma(q, k, v, causal),
                "public": lambda: A.attention(q, k, v, causal)}
    return _fwd_against_cudnn(FWD_SHAPES, variants, rounds=5, gate=1e-3)


FWD10_CONFIGS = {"256x64 s3 w16": {"BM": 256, "BN": 64, "num_stages": 3, "num_warps": 16},
                 "256x64 s2 w16": {"BM": 256, "BN": 64, "num_stages": 2, "num_warps": 16},
                 "256x64 s4 w16": {"BM": 256, "BN": 64, "num_stages": 4, "num_warps": 16},
                 "256x128 s2 w16": {"BM": 256, "BN": 128, "num_stages": 2, "num_warps": 16},
                 "256x32 s4 w16": {"BM": 256, "BN": 32, "num_stages": 4, "num_warps": 16}}


def fwd10() -> list:
    """Session 17: the Triton TMA forward with 256 query rows per program and 16 warps (four warpgroups share each K/V
    block: half the K/V loads of two 128-row programs, one program per SM at 108 registers), beside the public
    ``attention``; D=64, checked against SDPA first, GPU time against cuDNN, 5 interleaved rounds, fp16 B4 H32."""
    from tcourse.kernels import attention_kernels as A

    def variants(q, k, v, causal):
        return {"public": lambda: A.attention(q, k, v, causal),
                **{name: lambda cfg=cfg: A.attention_tma(q, k, v, causal, config=cfg)
                   for name, cfg in FWD10_CONFIGS.items() if not (causal and cfg["BN"] > cfg["BM"])}}
    return _fwd_against_cudnn(((1024, 64, False), (4096, 64, False), (4096, 64, True)), variants, rounds=5, gate=1e-3)


# -- session 19: the 1024^3 matmul with its K loop split between two MMA warpgroups ----------------------------------

from triton.experimental import gluon  # noqa: E402 - the session-19 kernel below is Gluon
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
    warpgroup_mma_wait  # noqa: E402

from tcourse.kernels._launch import Launcher  # noqa: E402
from tcourse.kernels.gluon_matmul import LOADER_REGS, LOADER_WARPS, _mma, _tma_load, _tma_store  # noqa: E402

# matmul_splitk_kernel: a copy of ``gluon_matmul.matmul_ws_kernel`` whose K loop is shared by two MMA warpgroups:
# warpgroup 0 (the default partition) multiplies the even K steps, warpgroup 1 (a worker) the odd ones, each from its
# own ring of STAGES buffers that the 1-warp loader fills alternately; warpgroup 1 leaves its fp32 partial sum in
# shared memory and warpgroup 0 adds it before the epilogue. At 1024^3 each SM holds one 64x128 tile whose 16 K steps
# one warpgroup runs one after the other; split, each chain is 8 steps long. Needs an even number of K steps.


@gluon.jit
def _loader_split(a_desc, b_desc, a0, b0, a1, b1, ready0, empty0, ready1, empty1, off_m, off_n, k_tiles):
    BK: gl.constexpr = a0.shape[2]
    STAGES: gl.constexpr = a0.shape[0]
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
    for i in range(k_tiles // 2):
        s = i % STAGES
        phase = ((i // STAGES) & 1) ^ 1
        mbarrier.wait(empty0.index(s), phase)
        mbarrier.expect(ready0.index(s), nbytes)
        _tma_load(a_desc, [off_m, 2 * i * BK], ready0.index(s), a0.index(s))
        _tma_load(b_desc, [2 * i * BK, off_n], ready0.index(s), b0.index(s))
        mbarrier.wait(empty1.index(s), phase)
        mbarrier.expect(ready1.index(s), nbytes)
        _tma_load(a_desc, [off_m, (2 * i + 1) * BK], ready1.index(s), a1.index(s))
        _tma_load(b_desc, [(2 * i + 1) * BK, off_n], ready1.index(s), b1.index(s))


@gluon.jit
def _mma_sum(a_bufs, b_bufs, ready, empty, k_half, acc, red, red_bar):
    acc = _mma(a_bufs, b_bufs, ready, empty, k_half, acc)[0]
    mbarrier.wait(red_bar, 0)
    acc = acc + red.load(acc.type.layout)
    return (acc,)


@gluon.jit
def _mma_part(a_bufs, b_bufs, ready, empty, k_half, red, red_bar):
    BM: gl.constexpr = red.shape[0]
    BN: gl.constexpr = red.shape[1]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                     instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, layout)
    acc = _mma(a_bufs, b_bufs, ready, empty, k_half, acc)[0]
    red.store(acc)
    gl.thread_barrier()  # all four warps' stores before the one arrival
    mbarrier.arrive(red_bar, count=1)


@gluon.jit
def matmul_splitk_kernel(a_desc, b_desc, c_desc, K, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr,
                         STAGES: gl.constexpr, PART_REGS: gl.constexpr):
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    k_tiles = gl.cdiv(K, BK)
    dtype: gl.constexpr = a_desc.dtype
    a0 = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b0 = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    a1 = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b1 = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    red_layout: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    red = gl.allocate_shared_memory(gl.float32, [BM, BN], red_layout)
    ready0 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty0 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready1 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty1 = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    red_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready0.index(s), count=1)
        mbarrier.init(empty0.index(s), count=1)
        mbarrier.init(ready1.index(s), count=1)
        mbarrier.init(empty1.index(s), count=1)
    mbarrier.init(red_bar, count=1)
    fence_async_shared()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma_layout)
    k_half = k_tiles // 2
    acc = gl.warp_specialize([(_mma_sum, (a0, b0, ready0, empty0, k_half, acc, red, red_bar)),
                              (_mma_part, (a1, b1, ready1, empty1, k_half, red, red_bar)),
                              (_loader_split, (a_desc, b_desc, a0, b0, a1, b1, ready0, empty0, ready1, empty1,
                                               off_m, off_n, k_tiles))],
                             [4, LOADER_WARPS], [PART_REGS, LOADER_REGS])[0]
    c_smem = gl.allocate_shared_memory(dtype, [BM, BN], c_desc.layout)
    c_smem.store(acc.to(dtype))
    fence_async_shared()
    _tma_store(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(0)


SPLITK_CONFIGS = {"splitk BK64 2x4": {"BK": 64, "STAGES": 4}, "splitk BK64 2x3": {"BK": 64, "STAGES": 3},
                  "splitk BK128 2x2": {"BK": 128, "STAGES": 2}, "splitk BK32 2x8": {"BK": 32, "STAGES": 8}}


_SPLITK_LAUNCH = Launcher(matmul_splitk_kernel)


def _splitk_fn(a, b, cfg):
    """A call of the split-K kernel on ``a @ b`` (64x128 tiles) into one output, with its descriptors built once:
    the returned function launches through ``_launch.Launcher`` as the public Gluon matmul does."""
    from tcourse.kernels import gluon_matmul as GM

    (M, K), N = a.shape, b.shape[1]
    c = a.new_empty((M, N))
    args = (*GM.descriptors(a, b, c, 64, 128, cfg["BK"]), K)
    meta = {"BM": 64, "BN": 128, "BK": cfg["BK"], "STAGES": cfg["STAGES"], "PART_REGS": 168, "num_warps": 4}
    grid = (M // 64, N // 128)

    def call():
        _SPLITK_LAUNCH(grid, args, meta)
        return c
    return call


def _check_matmuls(shapes, variants: dict, trials: int = 2) -> list:
    """Each matmul of ``variants`` (name -> fn(a, b) returning C) against fp64, fresh fp16 and bf16 inputs for every
    shape and trial; prints "all ok:" and whether every result was finite and within 2e-2."""
    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        for M, N, K in shapes:
            for name, fn in variants.items():
                for trial in range(trials):
                    a, b = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)

                    def one(a=a, b=b, fn=fn):
                        out = fn(a, b)
                        torch.cuda.synchronize()
                        err = _rel(out, a.double() @ b.double())
                        return {"err": err, "ok": bool(err < 2e-2 and torch.isfinite(out).all())}
                    _guard(rows, {"dtype": str(dt), "mnk": [M, N, K], "kernel": name, "trial": trial}, one)
    print("all ok:", all(r.get("ok") for r in rows), flush=True)
    return rows


def mm1024scheck() -> list:
    """Session 19: the split-K Gluon matmul (``matmul_splitk_kernel``) in each config against fp64, fresh inputs each
    case (1024^3, 1024x1024x2048, 2048x1024x512, 1024x2048x256; fp16 and bf16); hand-written barriers, so the
    session step runs it under a time limit before ``mm1024s``."""
    return _check_matmuls(((1024, 1024, 1024), (1024, 1024, 2048), (2048, 1024, 512), (1024, 2048, 256)),
                          {n: (lambda a, b, c=c: _splitk_fn(a, b, c)()) for n, c in SPLITK_CONFIGS.items()})


def mm1024s() -> list:
    """Session 19: 1024^3, the split-K Gluon matmul in each config beside the public ``matmul`` (the one-warpgroup
    Gluon kernel, 64x128x64, 8 stages) and torch; do_bench, then GPU time, then kernel time (the profiler last, as in
    the suite: it disturbs event timings for seconds); 5, 5 and 3 interleaved rounds; fp16 and bf16."""
    from tcourse.kernels import matmul_kernels as M

    rows: list = []
    for timer, rounds in (("do_bench", 5), ("gpu_time", 5), ("kernel", 3)):
        for dt in (torch.float16, torch.bfloat16):
            a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
            variants = {"public matmul": lambda: M.matmul(a, b),
                        **{name: _splitk_fn(a, b, cfg) for name, cfg in SPLITK_CONFIGS.items()}}
            for name, fn in variants.items():
                _guard(rows, {"timer": timer, "dtype": str(dt), "kernel": name},
                       lambda fn=fn: _cmp(fn, lambda: a @ b, timer=timer, rounds=rounds))
    return rows


def mm1024n() -> list:
    """Session 19, after ``mm1024s``: there the time fell as the ring held more bytes (split K, 2 x 3 stages of 24 KB:
    7.6 us; 2 x 4: 6.9 us), so the public Gluon kernel's 8 stages (192 KB, half of K) may be too few. 9 stages of
    64x128x64 (216 KB; C's staging buffer already shares the ring's memory: 221 KB in all, Triton 3.6 offline) beside
    the public ``matmul`` (8 stages): checked against fp64 on fresh inputs (1024^3 and K = 2048, 4096, where the
    ring wraps unevenly), then do_bench, GPU time and kernel time, 5, 5 and 3 interleaved rounds, fp16 and bf16."""
    from tcourse.kernels import gluon_matmul as GM, matmul_kernels as M

    nine = {**M.GLUON_CONFIG, "STAGES": 9}
    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        for K in (1024, 2048, 4096):
            a, b = torch.randn(1024, K, device="cuda", dtype=dt), torch.randn(K, 1024, device="cuda", dtype=dt)
            _guard(rows, {"check": "9 stages", "dtype": str(dt), "K": K},
                   lambda a=a, b=b: {"err": _rel(GM.matmul(a, b, nine), a.double() @ b.double())})
    for timer, rounds in (("do_bench", 5), ("gpu_time", 5), ("kernel", 3)):
        for dt in (torch.float16, torch.bfloat16):
            a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
            variants = {"public matmul (8 stages)": lambda: M.matmul(a, b), "9 stages": lambda: GM.matmul(a, b, nine),
                        "public matmul again": lambda: M.matmul(a, b)}
            for name, fn in variants.items():
                _guard(rows, {"timer": timer, "dtype": str(dt), "kernel": name},
                       lambda fn=fn: _cmp(fn, lambda: a @ b, timer=timer, rounds=rounds))
    return rows


class _L2Promotion:
    """Triton 3.6 builds every CUtensorMap with ``CU_TENSOR_MAP_L2_PROMOTION_L2_128B`` (``fill_tma_descriptor`` in
    its driver.c). This wraps that function: while ``value`` is set, each map Triton builds is encoded again
    (``cuTensorMapEncodeTiled`` from libcuda through ctypes, into a scratch buffer) with that promotion and copied
    over the map in the Python object (at offset 128). Before that it encodes the map with Triton's own parameters
    and checks that those bytes are the ones at that offset, which checks the offset and the argument order."""

    def __init__(self):
        import ctypes

        self.ct = ctypes
        self.utils = triton.runtime.driver.active.utils
        self.triton_fill = self.utils.fill_tma_descriptor
        self.encode_tiled = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled
        self.scratch = ctypes.create_string_buffer(256)  # a CUtensorMap is 128 bytes, 64-byte aligned
        self.at = (ctypes.addressof(self.scratch) + 127) // 128 * 128
        self.value = None
        self.maps = 0
        self.utils.fill_tma_descriptor = self.fill

    def _encode(self, promotion, addr, swizzle, elem_size, elem_type, block, shape, strides, padding) -> bytes:
        """The map Triton's driver.c would encode, with ``promotion``, built in a scratch buffer."""
        ct, rank = self.ct, len(block)
        box = (ct.c_uint32 * 5)(*[block[rank - 1 - i] for i in range(rank)])
        dims = (ct.c_uint64 * 5)(*[shape[rank - 1 - i] for i in range(rank)])
        byte_strides = (ct.c_uint64 * 5)(*[elem_size * strides[rank - 2 - i] for i in range(rank - 1)])
        ones = (ct.c_uint32 * 5)(1, 1, 1, 1, 1)
        res = self.encode_tiled(ct.c_void_p(self.at), ct.c_int(elem_type), ct.c_uint32(rank), ct.c_void_p(addr),
                                dims, byte_strides, box, ones, ct.c_int(0), ct.c_int(swizzle), ct.c_int(promotion),
                                ct.c_int(1 if padding == 1 else 0))
        if res != 0:
            raise RuntimeError(f"cuTensorMapEncodeTiled returned {res}")
        return ct.string_at(self.at, 128)

    def fill(self, *args):
        obj = self.triton_fill(*args)
        if self.value is None:
            return obj
        # CU_TENSOR_MAP_L2_PROMOTION_L2_128B, as Triton encodes it: must be the bytes at the offset we write to
        if self._encode(2, *args) != self.ct.string_at(id(obj) + 128, 128):
            raise RuntimeError("encoding with Triton's parameters gave other bytes: offset or arguments wrong")
        self.ct.memmove(id(obj) + 128, self._encode(self.value, *args), 128)
        self.maps += 1
        return obj


L2_PROMOTIONS = {"L2 128B (Triton's)": None, "L2 256B": 3, "no promotion": 0}


def l2p() -> list:
    """Session 19: the TMA descriptors' L2 promotion. A 64x64 fp16 tile of a row-major A is 64 rows of 128 bytes;
    promoted to 256 bytes, each DRAM fetch also brings the next K step's half row into L2 (libraries built on CUTLASS
    often encode 256B). The public ``matmul`` (1024^3: the Gluon kernel; 4096^3: the persistent TMA kernel) and
    ``attention`` (the Triton TMA kernel at D=64) with their maps encoded each way (``_L2Promotion``), each on inputs
    of its own so that each keeps its maps; checked, then do_bench, GPU time and kernel time (5, 5 and 3 interleaved
    rounds) against torch."""
    import torch.nn.functional as F

    from tcourse.kernels import attention_kernels as A, matmul_kernels as M

    promo = _L2Promotion()

    def built(make, value):
        promo.value = value
        try:
            fn = make()
            fn()  # the first call builds (and caches) this variant's maps
            torch.cuda.synchronize()
        finally:
            promo.value = None
        return fn

    problems = []
    for n, dt in ((1024, torch.float16), (1024, torch.bfloat16), (4096, torch.float16), (4096, torch.bfloat16)):
        a, b = (torch.randn(n, n, device="cuda", dtype=dt) for _ in range(2))
        ref = (a.double() @ b.double()).float()

        def make(a=a, b=b):
            a2, b2 = a.clone(), b.clone()
            return lambda: M.matmul(a2, b2)
        problems.append(({"problem": f"matmul {n}^3", "dtype": str(dt)}, make, ref, lambda a=a, b=b: a @ b))
    for S, causal in ((1024, False), (4096, True)):
        q, k, v = (torch.randn(4, 32, S, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def make(q=q, k=k, v=v, causal=causal):
            q2, k2, v2 = q.clone(), k.clone(), v.clone()
            return lambda: A.attention(q2, k2, v2, causal)
        problems.append(({"problem": f"attention S{S} D64" + (" causal" if causal else ""), "dtype": "torch.float16"},
                         make, ref, lambda q=q, k=k, v=v, causal=causal: F.scaled_dot_product_attention(
                             q, k, v, is_causal=causal)))
    rows: list = []
    fns = {}
    for label, make, ref, theirs in problems:
        for name, value in L2_PROMOTIONS.items():
            before = promo.maps
            fn = built(make, value)
            fns[(label["problem"], label["dtype"], name)] = (fn, theirs)
            rows.append({**label, "variant": name, "check_err": _rel(fn(), ref), "maps_encoded": promo.maps - before})
            print(f"  {label} {name}: err {rows[-1]['check_err']:.1e}, maps re-encoded {rows[-1]['maps_encoded']}",
                  flush=True)
    for timer, rounds in (("do_bench", 5), ("gpu_time", 5), ("kernel", 3)):
        for (problem, dtype, name), (fn, theirs) in fns.items():
            _guard(rows, {"timer": timer, "problem": problem, "dtype": dtype, "variant": name},
                   lambda fn=fn, theirs=theirs: _cmp(fn, theirs, timer=timer, rounds=rounds))
    return rows


# matmul_persistent_kernel (session 21): a persistent, warp-specialised Gluon matmul for the sizes the Triton persistent
# kernel serves (4096^3: 0.99x cuBLAS with the spread below 1 in every suite run). One program per SM walks BM x BN
# tiles in GROUP_M order; a 1-warp loader fills one ring of STAGES buffers across tile boundaries (the next tile's
# first K steps load while the consumers finish and store the current one); two consumer warpgroups each own BM/2
# rows of the tile (64 x 256 fp32: 128 registers a thread) and release a stage together (empty barriers count 2);
# each stores its rows through its own staging buffer and an asynchronous TMA store, waited for only before reuse.


@gluon.jit
def _pm_tile(t, num_m, num_n, GROUP_M: gl.constexpr):
    per_group = GROUP_M * num_n
    first_m = (t // per_group) * GROUP_M
    rows_here = gl.minimum(num_m - first_m, GROUP_M)
    return first_m + (t % per_group) % rows_here, (t % per_group) // rows_here


@gluon.jit
def _pm_loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_m, num_n, k_tiles, GROUP_M: gl.constexpr):
    HM: gl.constexpr = a_bufs.shape[1]
    BK: gl.constexpr = a_bufs.shape[2]
    BN: gl.constexpr = b_bufs.shape[2]
    STAGES: gl.constexpr = b_bufs.shape[0]
    nbytes: gl.constexpr = 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes
    it = 0
    for t in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        pm, pn = _pm_tile(t, num_m, num_n, GROUP_M)
        for k in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            _tma_load(a_desc, [pm * 2 * HM, k * BK], ready.index(s), a_bufs.index(2 * s))
            _tma_load(a_desc, [pm * 2 * HM + HM, k * BK], ready.index(s), a_bufs.index(2 * s + 1))
            _tma_load(b_desc, [k * BK, pn * BN], ready.index(s), b_bufs.index(s))
            it += 1


@gluon.jit
def _pm_consumer(a_bufs, b_bufs, ready, empty, c_desc, c_tile, half, num_m, num_n, k_tiles, GROUP_M: gl.constexpr):
    HM: gl.constexpr = c_tile.shape[0]
    BN: gl.constexpr = c_tile.shape[1]
    STAGES: gl.constexpr = b_bufs.shape[0]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    it = 0
    for t in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        pm, pn = _pm_tile(t, num_m, num_n, GROUP_M)
        acc = gl.zeros((HM, BN), gl.float32, layout)
        for k in range(k_tiles):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            a, b = a_bufs.index(2 * s + half), b_bufs.index(s)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            acc, a, b = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a, b))
            if k > 0:
                mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it - 1) % STAGES), count=1)
        tma.store_wait(0)  # this consumer's previous store has read c_tile
        c_tile.store(acc.to(c_tile.dtype))
        fence_async_shared()
        _tma_store(c_desc, [pm * 2 * HM + half * HM, pn * BN], c_tile)
    tma.store_wait(0)
    return (it,)  # a tuple: Triton 3.6 flattens the default partition's results as a sequence


@gluon.jit
def matmul_persistent_kernel(a_desc, b_desc, c_desc, M, N, K, BN: gl.constexpr, BK: gl.constexpr,
                             STAGES: gl.constexpr, GROUP_M: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    HM: gl.constexpr = c_desc.block_type.shape[0]
    dtype: gl.constexpr = a_desc.dtype
    num_m = gl.cdiv(M, 2 * HM)
    num_n = gl.cdiv(N, BN)
    k_tiles = gl.cdiv(K, BK)
    a_bufs = gl.allocate_shared_memory(dtype, [2 * STAGES, HM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    c_tiles = gl.allocate_shared_memory(dtype, [2, HM, BN], c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)  # both consumers release each stage
    fence_async_shared()
    first = (a_bufs, b_bufs, ready, empty, c_desc, c_tiles.index(0), 0, num_m, num_n, k_tiles, GROUP_M)
    second = (a_bufs, b_bufs, ready, empty, c_desc, c_tiles.index(1), 1, num_m, num_n, k_tiles, GROUP_M)
    loads = (a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_m, num_n, k_tiles, GROUP_M)
    gl.warp_specialize([(_pm_consumer, first), (_pm_consumer, second), (_pm_loader, loads)],
                       [4, LOADER_WARPS], [CONSUMER_REGS, LOADER_REGS])


PERSISTENT_CONFIGS = {"persistent 128x256x64 3st": {"BM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP_M": 8},
                      "persistent 128x256x32 6st": {"BM": 128, "BN": 256, "BK": 32, "STAGES": 6, "GROUP_M": 8},
                      "persistent 128x128x64 5st": {"BM": 128, "BN": 128, "BK": 64, "STAGES": 5, "GROUP_M": 8}}
_PERSISTENT_LAUNCH = Launcher(matmul_persistent_kernel)


def _persistent_args(a, b, c, cfg):
    from tcourse.kernels import gluon_matmul as GM
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    (M, K), N = a.shape, b.shape[1]
    hm, bn, bk = cfg["BM"] // 2, cfg["BN"], cfg["BK"]
    descs = tuple(TensorDescriptor.from_tensor(t, blk, GM._layout(blk, t.dtype))
                  for t, blk in ((a, [hm, bk]), (b, [bk, bn]), (c, [hm, bn])))
    meta = {"BN": bn, "BK": bk, "STAGES": cfg["STAGES"], "GROUP_M": cfg["GROUP_M"], "CONSUMER_REGS": 232,
            "num_warps": 4}
    return (*descs, M, N, K), meta


def _persistent_fn(a, b, cfg, sms: int = 132):
    """A call of ``matmul_persistent_kernel`` on ``a @ b`` into one output, descriptors built once (as ``_splitk_fn``)."""
    (M, K), N = a.shape, b.shape[1]
    c = a.new_empty((M, N))
    args, meta = _persistent_args(a, b, c, cfg)
    grid = (min(sms, -(-M // cfg["BM"]) * -(-N // cfg["BN"])),)

    def call():
        _PERSISTENT_LAUNCH(grid, args, meta)
        return c
    return call


def mmpcheck() -> list:
    """Session 21: ``matmul_persistent_kernel`` in each config against fp64, fresh inputs each case (square sizes, ragged
    edges in M, N and K, fewer tiles than SMs, many tiles a program); hand-written barriers, so the session step runs it
    under a time limit before ``mmp``. Row strides are multiples of 16 bytes, as TMA needs."""
    rows: list = []
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for dt in (torch.float16, torch.bfloat16):
        for M, N, K in ((4096, 4096, 4096), (1000, 1000, 1000), (4000, 4104, 1000), (256, 512, 4096),
                        (3000, 2000, 720), (8192, 8192, 1024)):
            for name, cfg in PERSISTENT_CONFIGS.items():
                a, b = torch.randn(M, K, device="cuda", dtype=dt), torch.randn(K, N, device="cuda", dtype=dt)
                def one(a=a, b=b, cfg=cfg):
                    out = _persistent_fn(a, b, cfg, sms)()
                    torch.cuda.synchronize()
                    err = _rel(out, a.double() @ b.double())
                    return {"err": err, "ok": bool(err < 2e-2 and torch.isfinite(out).all())}
                _guard(rows, {"dtype": str(dt), "mnk": [M, N, K], "kernel": name}, one)
    print("all ok:", all(r.get("ok") for r in rows), flush=True)
    return rows


def mmp() -> list:
    """Session 21: 4096^3 and 8192^3, the persistent Gluon matmul in each config beside the public ``matmul`` (Triton's
    persistent TMA kernel, pinned 128x256x64, 4 stages, at 4096^3) and torch; GPU time, do_bench, then kernel time
    (the profiler last); 5, 5 and 3 interleaved rounds; fp16 and bf16."""
    from tcourse.kernels import matmul_kernels as MK

    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("do_bench", 5), ("kernel", 3)):
        for n in (4096, 8192):
            for dt in (torch.float16, torch.bfloat16):
                if n == 8192 and timer != "gpu_time":
                    continue
                a, b = (torch.randn(n, n, device="cuda", dtype=dt) for _ in range(2))
                variants = {"public matmul": lambda: MK.matmul(a, b),
                            **{name: _persistent_fn(a, b, cfg) for name, cfg in PERSISTENT_CONFIGS.items()}}
                for name, fn in variants.items():
                    _guard(rows, {"timer": timer, "n": n, "dtype": str(dt), "kernel": name},
                           lambda fn=fn: _cmp(fn, lambda: a @ b, timer=timer, rounds=rounds))
    return rows


def _clock_windows(make_variants) -> list:
    """Each variant of ``make_variants(a, b)`` multiplies 4096^3 back to back for 2 s (no L2 flush), after 1 s idle, two
    rounds, fp16 and bf16, while the session step logs the SM clock and board power every 50 ms; each window's start and
    end (epoch seconds, and the host's local time as nvidia-smi prints it), its calls and its TFLOP/s from CUDA events
    around the whole window."""
    rows: list = []
    n = 4096
    for dt in (torch.float16, torch.bfloat16):
        a, b = (torch.randn(n, n, device="cuda", dtype=dt) for _ in range(2))
        variants = make_variants(a, b)
        for rnd in range(2):
            for name, fn in variants.items():
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
                time.sleep(1.0)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.time()
                start.record()
                calls = 0
                while time.time() - t0 < 2.0:
                    fn()
                    calls += 1
                end.record()
                torch.cuda.synchronize()
                t1 = time.time()
                ms = start.elapsed_time(end)
                rows.append({"dtype": str(dt), "variant": name, "round": rnd, "t0": t0, "t1": t1,
                             "t0_local": time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t0)) + f".{int(t0 % 1 * 1000):03d}",
                             "t1_local": time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(t1)) + f".{int(t1 % 1 * 1000):03d}",
                             "calls": calls, "gpu_ms": ms, "tflops": 2 * n**3 * calls / (ms * 1e-3) / 1e12})
                print(f"  {str(dt):<15} {name:<28} round {rnd}: {calls} calls, {rows[-1]['tflops']:.0f} TFLOP/s", flush=True)
    return rows


def mmclock() -> list:
    """Session 21, after ``mmp`` (a tie at 4096^3): the public ``matmul``, cuBLAS and the persistent Gluon kernel in
    ``_clock_windows``."""
    from tcourse.kernels import matmul_kernels as MK

    return _clock_windows(lambda a, b: {
        "public matmul": lambda: MK.matmul(a, b), "cuBLAS": lambda: a @ b,
        "persistent Gluon 128x256x64": _persistent_fn(a, b, PERSISTENT_CONFIGS["persistent 128x256x64 3st"])})


CLUSTER_BUILD = Path(".gpu/cluster_matmul")  # scripts/cluster_matmul.py build, here with Triton 3.9


def _cluster_kernels() -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import cluster_matmul

    return cluster_matmul.load(CLUSTER_BUILD)


def mccheck() -> list:
    """Session 28: the 2-CTA multicast matmul (``scripts/cluster_matmul.py``, compiled by Triton 3.9, launched through
    this Triton's launcher) in each config against fp64, fresh inputs each case: square sizes, ragged edges in M, N and K,
    a cluster whose second CTA is wholly past M, fewer tiles than clusters, many tiles a cluster. Hand-written barriers
    between CTAs, so the session runs it under a time limit before ``mc``."""
    rows: list = []
    kernels = _cluster_kernels()
    for (name, dt), kern in kernels.items():
        rows.append({"kernel": name, "dtype": dt, "registers": kern.regs, "spills": kern.spills,
                     "max_active_clusters": kern.max_clusters})
        print(f"  {name} {dt}: {kern.regs} registers, {kern.spills} spills, {kern.max_clusters} clusters at once",
              flush=True)
    for (name, dt), kern in kernels.items():
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dt]
        for M, N, K in ((4096, 4096, 4096), (128, 256, 64), (1000, 1000, 1000), (4000, 4104, 1000), (256, 512, 4096),
                        (3000, 2000, 720), (8192, 8192, 1024)):
            a, b = torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)

            def one(a=a, b=b, kern=kern):
                out = kern.prepare(a, b)()
                torch.cuda.synchronize()
                err = _rel(out, a.double() @ b.double())
                return {"err": err, "ok": bool(err < 2e-2 and torch.isfinite(out).all())}
            _guard(rows, {"dtype": dt, "mnk": [M, N, K], "kernel": name}, one)
    print("all ok:", all(r.get("ok", True) for r in rows) and len(rows) > len(kernels), flush=True)
    return rows


def mc() -> list:
    """Session 28, after ``mccheck``: 4096^3 and 8192^3, each multicast config beside the public ``matmul`` (Triton's
    persistent TMA kernel) and the session-21 persistent Gluon kernel (no multicast), each against torch; do_bench and
    GPU time (5 interleaved rounds each), kernel time (3) at 4096^3; fp16 and bf16."""
    from tcourse.kernels import matmul_kernels as MK

    rows: list = []
    kernels = _cluster_kernels()
    for timer, rounds in (("do_bench", 5), ("gpu_time", 5), ("kernel", 3)):
        for n in (4096, 8192):
            for dt, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                if n == 8192 and timer == "kernel":
                    continue
                a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))
                variants = {"public matmul": lambda: MK.matmul(a, b),
                            "persistent Gluon 128x256x64 3st": _persistent_fn(
                                a, b, PERSISTENT_CONFIGS["persistent 128x256x64 3st"]),
                            **{name: kern.prepare(a, b) for (name, d), kern in kernels.items() if d == dt}}
                for name, fn in variants.items():
                    _guard(rows, {"timer": timer, "n": n, "dtype": dt, "kernel": name},
                           lambda fn=fn: _cmp(fn, lambda: a @ b, timer=timer, rounds=rounds))
    return rows


def mcclock() -> list:
    """Session 28, after ``mc`` (a tie again): does the multicast change the power or the clock at 4096^3? The public
    ``matmul``, cuBLAS and both multicast configs in ``_clock_windows``, the clock log beside."""
    from tcourse.kernels import matmul_kernels as MK

    kernels = _cluster_kernels()
    return _clock_windows(lambda a, b: {
        "public matmul": lambda: MK.matmul(a, b), "cuBLAS": lambda: a @ b,
        **{name: kern.prepare(a, b) for (name, dt), kern in kernels.items()
           if dt == {torch.float16: "fp16", torch.bfloat16: "bf16"}[a.dtype]}})


def mmone() -> dict:
    """Session 28, for Nsight Compute: five calls of one 4096^3 fp16 matmul, ``MMONE`` = public | cublas | cluster
    (the multicast kernel, 256x256x64, 3 stages), after the inputs are made; the session step profiles the last call."""
    import os

    from tcourse.kernels import matmul_kernels as MK

    which = os.environ.get("MMONE", "public")
    a, b = (torch.randn(4096, 4096, device="cuda", dtype=torch.float16) for _ in range(2))
    fn = (_cluster_kernels()[("cluster 256x256x64 3st", "fp16")].prepare(a, b) if which == "cluster" else
          {"public": lambda: MK.matmul(a, b), "cublas": lambda: a @ b}[which])
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    return {"variant": which}


def lean() -> dict:
    """Session 22: the lean C launch (``tcourse.kernels._lean_launch``) against Triton 3.6's own C launch of the
    same compiled AXPY kernel, in one process, interleaved over rounds (with the public ``axpy``, torch.add and
    empty_like beside them); then ``bench.host`` in fresh processes, alternating: this code, this code with
    TCOURSE_LEAN_LAUNCH=0, and the package as committed before the session (``.gpu/old/tcourse_head``)."""
    import os
    import subprocess

    import tcourse.kernels as K
    from bench.host import host_us
    from tcourse.kernels import _launch as L
    from tcourse.kernels import _lean_launch, axpy_kernels

    out: dict = {"lean_module": repr(_lean_launch.module())}
    n = 2**20
    x = torch.randn(n, device="cuda")
    for _ in range(3):
        K.axpy(2.0, x, x)
    torch.cuda.synchronize()
    entry = next(iter(axpy_kernels.axpy_tuned.launcher.compiled.values()))
    kernel = entry.kernel
    raw, launcher = L._raw_c_launch(kernel)
    tlead = (kernel.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
             kernel.packed_metadata, None, None, None)
    y = torch.empty_like(x)
    xp, yp = x.data_ptr(), y.data_ptr()
    stream = triton.runtime.driver.active.get_current_stream(0)
    g = (triton.cdiv(n, entry.tail[0]), 1, 1)
    out["entry"] = {"c_launch": repr(entry.c_launch), "lead": repr(entry.lead), "c_tail": repr(entry.c_tail),
                    "drop": entry.drop, "grid": g, "tail": repr(entry.tail)}
    print(json.dumps(out, indent=0), flush=True)
    calls = {
        "triton C launch (int pointers)": lambda: raw(g[0], g[1], g[2], stream, *tlead, xp, xp, yp, 2.0, n, *entry.tail),
        "lean C launch": lambda: entry.c_launch(g[0], g[1], g[2], stream, *entry.lead, xp, xp, yp, 2.0, n,
                                                *entry.c_tail),
        "K.axpy (public)": lambda: K.axpy(2.0, x, x),
        "torch.add(x, x, alpha=2)": lambda: torch.add(x, x, alpha=2.0),
        "torch.empty_like": lambda: torch.empty_like(x),
    }
    checks = {}
    for name in ("triton C launch (int pointers)", "lean C launch"):
        y.zero_()
        calls[name]()
        torch.cuda.synchronize()
        checks[name] = float((y - 3 * x).abs().max())
    out["checks_max_abs_err"] = checks
    rounds: dict = {k: [] for k in calls}
    for r in range(7):
        for name, fn in calls.items():
            rounds[name].append(host_us(fn))
        print(f"  round {r}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rounds.items()), flush=True)
    out["rounds_us"] = rounds
    out["median_us"] = {k: sorted(v)[len(v) // 2] for k, v in rounds.items()}
    code = ("import json, sys, tcourse; tcourse.setup(quiet=True); import importlib; from bench.host import measure; "
            "print(json.dumps(measure(importlib.import_module(sys.argv[1]))))")
    variants = {"this code": ("tcourse.kernels", {}), "this code, TCOURSE_LEAN_LAUNCH=0": ("tcourse.kernels",
                {"TCOURSE_LEAN_LAUNCH": "0"}), "before the session": ("tcourse_head.kernels", {})}
    ab: dict = {k: [] for k in variants}
    old_path = os.path.abspath(".gpu/old")
    for r in range(3):
        for name, (package, extra) in variants.items():
            env = {**os.environ, **extra, "PYTHONPATH": os.pathsep.join([os.getcwd(), old_path])}
            p = subprocess.run([sys.executable, "-c", code, package], env=env, capture_output=True, text=True,
                               timeout=240)
            got = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else p.stderr[-2000:]
            ab[name].append(got)
            print(f"  {name} round {r}: {json.dumps(got)}", flush=True)
    out["bench_host"] = ab
    return out



# -- session 23: two or three consumer warpgroups, each in order (``gluon_attention_consumers``) -----------------------

# name -> (NC, BN, STAGES, REGS per worker consumer) of ``gluon_attention_consumers`` (the kernel was written here first,
# as ``attention_mc_kernel``, and moved to the module unchanged; run 1 of both parts below ran that first version)
MC_CONFIGS = {64: {"mc2 bn128 s3": (2, 128, 3, 240), "mc3 bn128 s2": (3, 128, 2, 160), "mc3 bn128 s3": (3, 128, 3, 160)},
              128: {"mc2 bn128 s2": (2, 128, 2, 240), "mc2 bn64 s3": (2, 64, 3, 240), "mc3 bn64 s2": (3, 64, 2, 160)}}


def _mc_fn(q, k, v, cfg: tuple, causal: bool = False):
    from tcourse.kernels import gluon_attention_consumers as C

    return lambda: C.attention(q, k, v, causal, config=cfg)


def fwd12check() -> list:
    """Session 23: ``gluon_attention_consumers`` in each config against fp32 SDPA, fresh inputs each case, causal or not: S a
    multiple of 64 (192-row tiles with a partial last one), fewer tiles than SMs, many tiles a program, fp16 and bf16,
    D 64 and 128; hand-written barriers, so the session step runs it under a time limit before ``fwd12``. (Run 1,
    ``fwd12check_run1.json``: D=64 not causal only, at a state with a fourth consumer and no causal mask.)"""
    import torch.nn.functional as F

    rows: list = []
    for dt in (torch.float16, torch.bfloat16):
        for D in (64, 128):
            for B, H, S in ((1, 2, 256), (2, 3, 1024), (3, 50, 512), (1, 4, 4096), (2, 7, 640)):
                for causal in (False, True):
                    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dt) for _ in range(3))
                    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                    for name, cfg in MC_CONFIGS[D].items():
                        if S % cfg[1]:
                            continue
                        def one(cfg=cfg):
                            out = _mc_fn(q, k, v, cfg, causal)()
                            torch.cuda.synchronize()
                            err = float((out.float() - ref).abs().max())
                            return {"max_abs_err": err, "rel_err": _rel(out, ref), "ok": bool(err < 2e-2)}
                        _guard(rows, {"dtype": str(dt), "BHSD": [B, H, S, D], "causal": causal, "kernel": name}, one)
    print("all ok:", all(r.get("ok") for r in rows), flush=True)
    return rows


def fwd12() -> list:
    """Session 23: ``gluon_attention_consumers`` in each config beside the public ``attention`` and the pipelined Gluon kernel on
    the suite's 8 fp16 shapes (B4 H32); checked against SDPA (gate 1e-3), GPU time against cuDNN, 5 interleaved rounds.
    (Run 1, ``fwd12_run1.json``: D=64 not causal, S 1024 and 4096, with a fourth consumer (BN 64) and no causal mask.)"""
    from tcourse.kernels import attention_kernels as A
    from tcourse.kernels import gluon_attention_pipelined as P

    def variants(q, k, v, causal):
        return {"public": lambda: A.attention(q, k, v, causal), "gluon pipelined": lambda: P.attention(q, k, v, causal),
                **{name: _mc_fn(q, k, v, cfg, causal) for name, cfg in MC_CONFIGS[q.shape[3]].items()}}
    return _fwd_against_cudnn(FWD_SHAPES, variants, rounds=5, gate=1e-3)


def fwd12s() -> list:
    """Session 23, after the dispatch: ``config_for`` picks three consumers wherever the last 192-row tile pads S by at
    most 1/16, measured at S4096 only; here S2048 (3 % padding) and S8192 (1 %), two and three consumers, D=64 not
    causal, fp16 B4 H32, checked against SDPA, GPU time against cuDNN, 5 interleaved rounds."""
    from tcourse.kernels import gluon_attention_consumers as C

    def variants(q, k, v, causal):
        return {"two consumers": _mc_fn(q, k, v, C.TWO[64], causal), "three consumers": _mc_fn(q, k, v, C.THREE, causal)}
    return _fwd_against_cudnn(((2048, 64, False), (8192, 64, False)), variants, rounds=5, gate=1e-3)


# -- session 24: 1024^3 with K split between two programs (C's tile read from L2 a third less), 64x64 tiles, AXPY -----
@gluon.jit
def _loader_from(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k0, k_tiles):
    """``gluon_matmul._loader`` for K steps k0 .. k0 + k_tiles."""
    BK: gl.constexpr = a_bufs.shape[2]
    STAGES: gl.constexpr = a_bufs.shape[0]
    for k in range(k_tiles):
        s = k % STAGES
        mbarrier.wait(empty.index(s), ((k // STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        _tma_load(a_desc, [off_m, (k0 + k) * BK], ready.index(s), a_bufs.index(s))
        _tma_load(b_desc, [(k0 + k) * BK, off_n], ready.index(s), b_bufs.index(s))


@gluon.jit
def matmul_split2_kernel(a_desc, b_desc, c_desc, ws_ptr, flag_ptr, K, BM: gl.constexpr, BN: gl.constexpr,
                         BK: gl.constexpr, STAGES: gl.constexpr, MMA_WARPS: gl.constexpr):
    """Two programs per BM x BN tile of C, each half of K (grid axis 2). The first (axis 2 = 0) stores its fp32 sum to
    ``ws`` and raises the tile's flag (release); the second waits for the flag (acquire), adds, lowers the flag and
    stores C. The grid's axis 2 is its slowest, so every first half is handed out before any second half waits."""
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    kz = gl.program_id(2)
    k_tiles = gl.cdiv(K, BK) // 2
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    fence_async_shared()
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[MMA_WARPS, 1],
                                                         instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), gl.float32, mma_layout)
    acc = gl.warp_specialize([(_mma, (a_bufs, b_bufs, ready, empty, k_tiles, acc)),
                              (_loader_from, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, pid_m * BM, pid_n * BN,
                                              kz * k_tiles, k_tiles))], [LOADER_WARPS], [LOADER_REGS])[0]
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(ready.index(s))
        mbarrier.invalidate(empty.index(s))
    tile = pid_m * gl.num_programs(1) + pid_n
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, mma_layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, mma_layout))
    ptrs = ws_ptr + tile * (BM * BN) + rows[:, None] * BN + cols[None, :]
    c_smem = gl.allocate_shared_memory(dtype, [BM, BN], c_desc.layout)
    if kz == 0:
        gl.store(ptrs, acc)
        gl.thread_barrier()  # every warp's partial sum before the one release
        gl.atomic_xchg(flag_ptr + tile, 1, sem="release", scope="gpu")
    else:
        while gl.atomic_cas(flag_ptr + tile, 1, 0, sem="acquire", scope="gpu") != 1:
            pass
        gl.thread_barrier()
        acc = acc + gl.load(ptrs, cache_modifier=".cg")
        c_smem.store(acc.to(dtype))
        fence_async_shared()
        _tma_store(c_desc, [pid_m * BM, pid_n * BN], c_smem)
        tma.store_wait(0)


SPLIT2_CONFIGS = {"split2 128x128x64 s4 w8": (128, 128, 64, 4, 8), "split2 128x128x64 s6 w8": (128, 128, 64, 6, 8),
                  "split2 128x128x64 s4 w4": (128, 128, 64, 4, 4), "split2 128x128x128 s3 w8": (128, 128, 128, 3, 8)}
_SPLIT2_LAUNCH = Launcher(matmul_split2_kernel)
_SPLIT2_WS: dict = {}


def _split2_fn(a, b, cfg: tuple):
    """A call of ``matmul_split2_kernel`` on ``a @ b`` into one output, descriptors built once; fp32 slots and flags
    (zeroed once; each second half lowers its flag again) kept per tile count."""
    from tcourse.kernels import gluon_matmul as GM

    (M, K), N = a.shape, b.shape[1]
    bm, bn, bk, stages, warps = cfg
    if M % bm or N % bn or K % (2 * bk):
        raise ValueError(f"split2 needs M % {bm}, N % {bn}, K % {2 * bk} == 0")
    tiles = (M // bm) * (N // bn)
    key = (tiles, bm * bn, a.device)
    if key not in _SPLIT2_WS:
        _SPLIT2_WS[key] = (torch.empty(tiles * bm * bn, device=a.device, dtype=torch.float32),
                           torch.zeros(tiles, device=a.device, dtype=torch.int32))
    ws, flags = _SPLIT2_WS[key]
    c = a.new_empty((M, N))
    args = (*GM.descriptors(a, b, c, bm, bn, bk), ws, flags, K)
    meta = {"BM": bm, "BN": bn, "BK": bk, "STAGES": stages, "MMA_WARPS": warps, "num_warps": warps}
    grid = (M // bm, N // bn, 2)

    def call():
        _SPLIT2_LAUNCH(grid, args, meta)
        return c
    return call


SMALL_TILES = {"64x64x64 s6": {"BM": 64, "BN": 64, "BK": 64, "STAGES": 6, "num_warps": 4},
               "64x64x64 s4": {"BM": 64, "BN": 64, "BK": 64, "STAGES": 4, "num_warps": 4},
               "64x64x128 s3": {"BM": 64, "BN": 64, "BK": 128, "STAGES": 3, "num_warps": 4}}


def mm1024kcheck() -> list:
    """Session 24: ``matmul_split2_kernel`` in each config and the 64x64-tile configs of the public Gluon kernel against
    fp64, fresh inputs each case (1024^3, 2048x1024x512, 1024x2048x4096, 512x512x256; fp16 and bf16; the split kernel
    twice per case, its flags lowered again by each call); hand-written flags, so the session step runs it under a time
    limit before ``mm1024k``."""
    from tcourse.kernels import gluon_matmul as GM

    return _check_matmuls(((1024, 1024, 1024), (2048, 1024, 512), (1024, 2048, 4096), (512, 512, 256)),
                          {**{n: (lambda a, b, c=c: _split2_fn(a, b, c)()) for n, c in SPLIT2_CONFIGS.items()},
                           **{n: (lambda a, b, c=c: GM.matmul(a, b, c)) for n, c in SMALL_TILES.items()}})


def mm1024k() -> list:
    """Session 24: 1024^3, the split kernel's configs and the 64x64 tiles (256 programs, two an SM) beside the public
    ``matmul`` (64x128x64, 8 stages, one program an SM) and torch; GPU time (5 rounds) then kernel time (3; the profiler
    last, as in the suite); fp16 and bf16."""
    from tcourse.kernels import gluon_matmul as GM, matmul_kernels as M

    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("kernel", 3)):
        for dt in (torch.float16, torch.bfloat16):
            a, b = (torch.randn(1024, 1024, device="cuda", dtype=dt) for _ in range(2))
            variants = {"public matmul": lambda: M.matmul(a, b),
                        **{n: _split2_fn(a, b, c) for n, c in SPLIT2_CONFIGS.items()},
                        **{n: (lambda c=c: GM.matmul(a, b, c)) for n, c in SMALL_TILES.items()},
                        "public matmul again": lambda: M.matmul(a, b)}
            for name, fn in variants.items():
                _guard(rows, {"timer": timer, "dtype": str(dt), "kernel": name},
                       lambda fn=fn: _cmp(fn, lambda: a @ b, timer=timer, rounds=rounds))
    return rows


@triton.jit
def axpy_probe_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr, LOAD_EVICT: tl.constexpr,
                      STORE_EVICT: tl.constexpr, STORE_CACHE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy=LOAD_EVICT)
    y = tl.load(y_ptr + offs, mask=mask, eviction_policy=LOAD_EVICT)
    tl.store(out_ptr + offs, a * x + y, mask=mask, eviction_policy=STORE_EVICT, cache_modifier=STORE_CACHE)


AXPY_VARIANTS = {"1024 w4": (1024, 4, "", "", ""), "4096 w8": (4096, 8, "", "", ""),
                 "1024 w4 load evict_first": (1024, 4, "evict_first", "", ""),
                 "1024 w4 load+store evict_first": (1024, 4, "evict_first", "evict_first", ""),
                 "1024 w4 store .cs": (1024, 4, "", "", ".cs"),
                 "1024 w4 load evict_first store .cs": (1024, 4, "evict_first", "", ".cs"),
                 "16384 w8": (16384, 8, "", "", "")}


def axpyv() -> list:
    """Session 24: AXPY at 2^24 and 2^27 (fp32) in fixed configs and cache policies beside the public ``axpy`` (its
    autotuned pick) and ``torch.add``: checked, then GPU time with L2 cleared by do_bench's memset (dirty lines the
    kernel writes back) and by a read (clean), 5 rounds each, then kernel time (3)."""
    from tcourse.kernels import axpy_kernels as AX

    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("gpu_time_clean_l2", 5), ("kernel", 3)):
        for n in (2**24, 2**27):
            x, y = (torch.randn(n, device="cuda") for _ in range(2))
            out = torch.empty_like(x)
            ref = 1.7 * x.double() + y.double()

            def fixed(v):
                blk, w, le, se, sc = v
                return lambda: axpy_probe_kernel[(triton.cdiv(n, blk),)](x, y, out, 1.7, n, BLOCK=blk, LOAD_EVICT=le,
                                                                          STORE_EVICT=se, STORE_CACHE=sc, num_warps=w)
            variants = {"public axpy": lambda: AX.axpy(1.7, x, y), **{k: fixed(v) for k, v in AXPY_VARIANTS.items()}}
            for name, fn in variants.items():
                def one(fn=fn, name=name):
                    r = fn()
                    torch.cuda.synchronize()
                    err = _rel(r if name == "public axpy" else out, ref)
                    return {"err": err, **_cmp(fn, lambda: torch.add(y, x, alpha=1.7), timer=timer, rounds=rounds)}
                _guard(rows, {"timer": timer, "n": n, "kernel": name}, one)
    return rows


def smv() -> list:
    """Session 24, after ``axpyv`` (an eviction hint on AXPY's loads cost it 3-7 % of its bandwidth): the softmax kernels
    read x with ``evict_first`` (the one-block kernel, and the online kernel's second pass). Each kernel with that hint and
    with none (``EVICT=""``), each autotuned on its own over the same configs, beside the public ``softmax`` and
    ``torch.softmax``, fp32 4096 x n: checked, then GPU time (5 rounds) and kernel time (3). Run once (17:07 UTC) with the
    kernels of commit eaf8109, where the public ``softmax`` always read x with the hint and the hinted variant shared its
    tuner; the public ``softmax`` now gives the hint only up to ``softmax_kernels.EVICT_FIRST_MAX_BYTES``."""
    from tcourse.kernels import softmax_kernels as SK
    from tcourse.kernels._launch import Tuned, cdiv, next_power_of_2

    def rows_tuned(name):
        return Tuned(name, SK.softmax_rows_kernel, SK._ROW_CONFIGS, key=["n_cols_v", "BLOCK_N", "VEC"],
                     prune=SK._prune_rows)

    def write_tuned(name):
        return Tuned(name, SK.softmax_chunk_write_kernel, SK._WARPS, key=["n_cols_v", "CHUNK"])
    rows_hint, rows_plain = rows_tuned("softmax_rows_hint"), rows_tuned("softmax_rows_plain")
    write_hint, write_plain = write_tuned("softmax_chunk_write_hint"), write_tuned("softmax_chunk_write_plain")

    def one_block(x, tuned, evict):
        n_rows, n_cols = x.shape
        out, vec = torch.empty_like(x), SK._vec(n_cols, n_cols, elem_bytes=4)
        args = (x, out, n_rows, n_cols // vec, n_cols // vec, n_cols // vec)
        tuned.launch((n_rows, n_cols, vec, x.dtype), lambda m: (cdiv(n_rows, m["ROWS"]),), *args,
                     BLOCK_N=next_power_of_2(n_cols), VEC=vec, EVICT=evict)
        return out

    def online(x, tuned, evict):
        n_rows, n_cols = x.shape
        chunk = SK.ONLINE_CHUNK
        out, n_chunks, vec = torch.empty_like(x), cdiv(n_cols, chunk), SK._vec(n_cols, n_cols, elem_bytes=4)
        m, s = (torch.empty((n_rows, n_chunks), device=x.device) for _ in range(2))
        key, grid = (n_rows, n_cols, vec, chunk, x.dtype), lambda meta: (n_rows, n_chunks)
        SK.softmax_chunk_stats_tuned.launch(key, grid, x, m, s, n_cols // vec, n_cols // vec, n_chunks, CHUNK=chunk,
                                            VEC=vec)
        tuned.launch(key, grid, x, out, m, s, n_rows, n_cols // vec, n_cols // vec, n_cols // vec, n_chunks,
                     CHUNK=chunk, BLOCK_C=next_power_of_2(n_chunks), VEC=vec, EVICT=evict)
        return out

    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("kernel", 3)):
        for n in (1000, 1024, 4096, 8192, 16384, 65536, 262144):
            x = torch.randn(4096, n, device="cuda") * 4
            ref = torch.softmax(x.double(), dim=1)
            if n <= SK.MAX_BLOCK:
                variants = {"public softmax": lambda: SK.softmax(x),
                            "one block, evict_first": lambda: one_block(x, rows_hint, "evict_first"),
                            "one block, no hint": lambda: one_block(x, rows_plain, "")}
            else:
                variants = {"public softmax": lambda: SK.softmax(x),
                            "online, evict_first": lambda: online(x, write_hint, "evict_first"),
                            "online, no hint": lambda: online(x, write_plain, "")}
            for name, fn in variants.items():
                _guard(rows, {"timer": timer, "n": n, "kernel": name},
                       lambda fn=fn: {"err": _rel(fn(), ref),
                                      **_cmp(fn, lambda: torch.softmax(x, dim=1), timer=timer, rounds=rounds)})
    return rows


@triton.jit
def softmax_rows_hints_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
                              LOAD_EVICT: tl.constexpr, STORE_EVICT: tl.constexpr, STORE_CACHE: tl.constexpr):
    """``softmax_kernels.softmax_rows_kernel`` on a contiguous x (row stride n_cols, a multiple of 4 here: 16-byte
    rows) with the cache hints of the load and the store as parameters."""
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    n = tl.multiple_of(n_cols, 4)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n)
    x = tl.load(x_ptr + rows[:, None] * n + cols[None, :], mask=mask, other=-float("inf"),
                eviction_policy=LOAD_EVICT).to(tl.float32)
    e = tl.exp2((x - tl.max(x, axis=1)[:, None]) * 1.4426950408889634)
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    tl.store(out_ptr + rows[:, None] * n + cols[None, :], y, mask=mask, eviction_policy=STORE_EVICT,
             cache_modifier=STORE_CACHE)


SOFTMAX_HINTS = {"load evict_first": ("evict_first", "", ""), "no hints": ("", "", ""),
                 "load evict_last": ("evict_last", "", ""),
                 "load evict_first, store evict_first": ("evict_first", "evict_first", ""),
                 "load evict_first, store .cs": ("evict_first", "", ".cs"),
                 "store evict_first": ("", "evict_first", "")}


def smh() -> list:
    """Session 24, after ``smv`` (the load hint helped at 16 MB and hurt from 64 MB): the one-block softmax at the sizes
    around the rule's 32 MiB (fp32 4096 x 1000, 1024, 2048, 3072, 4096), with load and store hints in six combinations,
    each launched directly with the config the public ``softmax`` tuned for the shape (so only the hints differ), beside
    the public ``softmax`` and ``torch.softmax``: checked, then GPU time (5 rounds) and kernel time (3)."""
    from tcourse.kernels import softmax_kernels as SK
    from tcourse.kernels._launch import next_power_of_2

    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("kernel", 3)):
        for n in (1000, 1024, 2048, 3072, 4096):
            x = torch.randn(4096, n, device="cuda") * 4
            out = torch.empty_like(x)
            ref = torch.softmax(x.double(), dim=1)
            SK.softmax(x)
            cfg = SK.softmax_rows_tuned.best[(4096, n, SK._vec(n, n, elem_bytes=4), x.dtype)]
            r_, w_ = cfg.kwargs["ROWS"], cfg.num_warps

            def hinted(h, r_=r_, w_=w_, x=x, out=out, n=n):
                return lambda: softmax_rows_hints_kernel[(triton.cdiv(4096, r_),)](
                    x, out, 4096, n, BLOCK_N=next_power_of_2(n), ROWS=r_, LOAD_EVICT=h[0], STORE_EVICT=h[1],
                    STORE_CACHE=h[2], num_warps=w_)
            variants = {"public softmax": lambda: SK.softmax(x), **{k: hinted(h) for k, h in SOFTMAX_HINTS.items()}}
            for name, fn in variants.items():
                def one(fn=fn, name=name):
                    r = fn()
                    torch.cuda.synchronize()
                    err = _rel(r if name == "public softmax" else out, ref)
                    return {"err": err, "rows": r_, "warps": w_,
                            **_cmp(fn, lambda: torch.softmax(x, dim=1), timer=timer, rounds=rounds)}
                _guard(rows, {"timer": timer, "n": n, "kernel": name}, one)
    return rows


def hints2() -> list:
    """Session 24, after ``smh`` (where ``evict_last`` on the load or ``evict_first`` on the store read 2-4 % faster than no
    hint at 48-64 MB, within that run's between-variant noise): each hint against the same kernel with none, timed
    directly against it (interleaved; ratio = no-hint time / hinted time), so a shift of the whole machine between variants
    cancels. AXPY (``axpy_probe_kernel``, 1024 elements a program, 4 warps) at 2^24 and 2^27, and the one-block softmax
    (``softmax_rows_hints_kernel`` with the config the public ``softmax`` tuned) at fp32 4096 x 4096 and 4096 x 16384;
    checked, then GPU time (5 rounds) and kernel time (3)."""
    from tcourse.kernels import softmax_kernels as SK
    from tcourse.kernels._launch import next_power_of_2

    hints = {"load evict_last": ("evict_last", "", ""), "store evict_first": ("", "evict_first", ""),
             "load evict_last, store evict_first": ("evict_last", "evict_first", ""), "store .cs": ("", "", ".cs")}
    problems = []
    for n in (2**24, 2**27):
        x, y = (torch.randn(n, device="cuda") for _ in range(2))
        out = torch.empty_like(x)

        def axpy(h, x=x, y=y, out=out, n=n):
            return lambda: axpy_probe_kernel[(triton.cdiv(n, 1024),)](x, y, out, 1.7, n, BLOCK=1024, LOAD_EVICT=h[0],
                                                                       STORE_EVICT=h[1], STORE_CACHE=h[2], num_warps=4)
        problems.append((f"axpy 2^{n.bit_length() - 1}", axpy, out, 1.7 * x.double() + y.double()))
    for n in (4096, 16384):
        x = torch.randn(4096, n, device="cuda") * 4
        out = torch.empty_like(x)
        SK.softmax(x)
        cfg = SK.softmax_rows_tuned.best[(4096, n, SK._vec(n, n, elem_bytes=4), x.dtype)]

        def soft(h, x=x, out=out, n=n, r_=cfg.kwargs["ROWS"], w_=cfg.num_warps):
            return lambda: softmax_rows_hints_kernel[(triton.cdiv(4096, r_),)](
                x, out, 4096, n, BLOCK_N=next_power_of_2(n), ROWS=r_, LOAD_EVICT=h[0], STORE_EVICT=h[1],
                STORE_CACHE=h[2], num_warps=w_)
        problems.append((f"softmax 4096x{n}", soft, out, torch.softmax(x.double(), dim=1)))
    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("kernel", 3)):
        for name, make, out, ref in problems:
            base = make(("", "", ""))
            for hname, h in hints.items():
                fn = make(h)

                def one(fn=fn, base=base, out=out, ref=ref):
                    fn()
                    torch.cuda.synchronize()
                    return {"err": _rel(out, ref), **_cmp(fn, base, timer=timer, rounds=rounds)}
                _guard(rows, {"timer": timer, "problem": name, "hint": hname}, one)
    return rows


def hints3() -> list:
    """Session 24, after ``hints2`` (``evict_last`` on the load: one-block softmax 2.8 % faster at 4096 x 16384, level at
    4096 x 4096; AXPY 1.1 % faster), before adopting it above 16 MiB: the online softmax's second pass (its own tuner per
    hint, as the public ``softmax_online`` launches it) at fp32 4096 x 65536 and 4096 x 262144, and the one-block kernel at
    4096 x 8192 (the public config), each ``evict_last`` timed directly against no hint (interleaved; ratio = no-hint time
    / hinted time); checked, then GPU time (5 rounds) and kernel time (3)."""
    from tcourse.kernels import softmax_kernels as SK
    from tcourse.kernels._launch import Tuned, cdiv, next_power_of_2

    def online_fn(x, evict):
        n_rows, n_cols = x.shape
        chunk = SK.ONLINE_CHUNK
        out, n_chunks, vec = torch.empty_like(x), cdiv(n_cols, chunk), SK._vec(n_cols, n_cols, elem_bytes=4)
        m, s_ = (torch.empty((n_rows, n_chunks), device=x.device) for _ in range(2))
        key, grid = (n_rows, n_cols, vec, chunk, x.dtype), lambda meta: (n_rows, n_chunks)
        tuned = Tuned(f"softmax_chunk_write_{evict or 'none'}", SK.softmax_chunk_write_kernel, SK._WARPS,
                      key=["n_cols_v", "CHUNK"])

        def call():
            SK.softmax_chunk_stats_tuned.launch(key, grid, x, m, s_, n_cols // vec, n_cols // vec, n_chunks,
                                                CHUNK=chunk, VEC=vec)
            tuned.launch(key, grid, x, out, m, s_, n_rows, n_cols // vec, n_cols // vec, n_cols // vec, n_chunks,
                         CHUNK=chunk, BLOCK_C=next_power_of_2(n_chunks), VEC=vec, EVICT=evict)
            return out
        return call

    problems = []
    for n in (65536, 262144):
        x = torch.randn(4096, n, device="cuda") * 4
        problems.append((f"online softmax 4096x{n}", online_fn(x, "evict_last"), online_fn(x, ""),
                         torch.softmax(x.double(), dim=1)))
    x8 = torch.randn(4096, 8192, device="cuda") * 4
    out8 = torch.empty_like(x8)
    SK.softmax(x8)
    cfg = SK.softmax_rows_tuned.best[(4096, 8192, 4, x8.dtype)]

    def one_block(load):
        def call():
            softmax_rows_hints_kernel[(triton.cdiv(4096, cfg.kwargs["ROWS"]),)](
                x8, out8, 4096, 8192, BLOCK_N=8192, ROWS=cfg.kwargs["ROWS"], LOAD_EVICT=load, STORE_EVICT="",
                STORE_CACHE="", num_warps=cfg.num_warps)
            return out8
        return call
    problems.append(("softmax 4096x8192", one_block("evict_last"), one_block(""), torch.softmax(x8.double(), dim=1)))
    rows: list = []
    for timer, rounds in (("gpu_time", 5), ("kernel", 3)):
        for name, hinted, plain, ref in problems:
            _guard(rows, {"timer": timer, "problem": name, "hint": "load evict_last"},
                   lambda hinted=hinted, plain=plain, ref=ref: {"err": _rel(hinted(), ref),
                                                                 **_cmp(hinted, plain, timer=timer, rounds=rounds)})
    return rows


PARTS = {"host": host, "matmul": matmul, "fp8": fp8, "bwd2": bwd2, "bwd3": bwd3, "softmax": softmax, "fwd": fwd, "fwd2check": fwd2check, "fwd2": fwd2,
         "gbwdcheck": gbwdcheck, "gbwd": gbwd, "fwd3": fwd3,
         "fwd4check": fwd4check, "fwd4": fwd4, "fwd5": fwd5, "gbwd4": gbwd4, "gbwd5": gbwd5,
         "gbwd6": gbwd6, "mm1024": mm1024, "gmmhost": gmmhost, "gattnhost": gattnhost, "gbwd7check": gbwd7check,
         "gbwd7": gbwd7, "gbwd8check": gbwd8check, "gbwd8": gbwd8, "gbwd11check": gbwd11check,
         "gbwd11": gbwd11, "fwd6": fwd6, "mm8192": mm8192, "fwd7": fwd7, "mm1024b": mm1024b, "fwd8": fwd8, "fwd9": fwd9,
         "mm1024t": mm1024t, "fwd10": fwd10, "mm1024u": mm1024u,
         "mm1024scheck": mm1024scheck, "mm1024s": mm1024s, "mm1024n": mm1024n, "l2p": l2p,
         "fwd11check": fwd11check, "fwd11": fwd11, "gbwd12check": gbwd12check, "gbwd12": gbwd12,
         "mmpcheck": mmpcheck, "mmp": mmp, "mmclock": mmclock, "lean": lean,
         "fwd12check": fwd12check, "fwd12": fwd12, "fwd12s": fwd12s,
         "mm1024kcheck": mm1024kcheck, "mm1024k": mm1024k, "axpyv": axpyv, "smv": smv, "smh": smh, "hints2": hints2, "hints3": hints3,
         "mccheck": mccheck, "mc": mc, "mcclock": mcclock, "mmone": mmone}


def main(argv: list[str]) -> int:
    tcourse.setup(quiet=True)
    for part in argv or list(PARTS):
        t = time.time()
        print(f"== {part}", flush=True)
        try:
            _save(part, PARTS[part]())
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        print(f"== {part}: {time.time() - t:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
