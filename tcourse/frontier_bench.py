"""GPU measurements of chapters 8-10, one function per recording (``results/h200/<name>.json``).

The chapters call them through ``rt.live_or_recorded(name, fn)``; ``scripts/record_frontier_gpu.py``
calls all of them in one process on the H200 and saves what they return. Every timing goes through
``tcourse.bench.compare`` (interleaved rounds, torch in the same run); every entry that fails records
its error instead of stopping the others.
"""
from __future__ import annotations

import traceback

import torch

ROUNDS = 3
REP_MS = 50
DEVICE = "cuda"
SIZES = (4096, 8192)           # matmul problem sizes (M = N = K)
SMALL_SIZE = 2048              # fewer tiles than SMs: persistence changes nothing
PRECISION_SIZE = 4096
REF_MAX = 4096                 # fp64 reference products only up to this size (8192^3 in fp64 is slow)
DTYPES = (torch.float16, torch.bfloat16)
LN_SHAPES = ((8192, 4096), (4096, 8192), (32768, 1024))
ATTN_SHAPES = ((4, 16, 2048, 64), (2, 16, 4096, 128))
GLUON_ATTN_SHAPES = ((4, 32, 4096, 64), (4, 32, 4096, 128))  # chapter 6.6's shapes
DROPOUT_N = 1 << 26
# the persistent-matmul config: 128 x 256 tiles (512 of them at 4096^2: 3.9 waves on 132 SMs)
TMA_CONFIG = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "SPLIT_EPILOGUE": True, "FLATTEN": True,
              "num_stages": 4, "num_warps": 8}
BLOCKED_CONFIG = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "num_stages": 3, "num_warps": 8}


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _err(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {str(e).strip()[-600:]}", "where": traceback.format_exc()[-800:]}


def guarded(fn, *args, **kw) -> dict:
    """``fn(*args, **kw)``, or ``{"error": ...}`` when it raises (one failing entry never stops a sweep)."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # recorded per entry, by design
        torch.cuda.empty_cache()
        return _err(e)


def _timed(ours, ref, flops=None, nbytes=None) -> dict:
    from .bench import compare

    return compare(ours, ref, flops=flops, nbytes=nbytes, rounds=ROUNDS, rep_ms=REP_MS).as_dict()


def _rel_err(c: torch.Tensor, ref: torch.Tensor) -> float:
    return float((c.double() - ref).norm() / ref.norm())


# -- chapter 8 -----------------------------------------------------------------------------------------
def tma_launch(a, b, programs: int | None, config: dict = TMA_CONFIG):
    """The reference persistent TMA kernel with ``programs`` programs (None: one per tile, i.e. not
    persistent). Same kernel and tile config either way: only the grid changes."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from .kernels import matmul_kernels as mk

    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    cfg = dict(config)
    bm, bn, bk = cfg["BM"], cfg["BN"], cfg["BK"]
    a_d = TensorDescriptor(a, [M, K], [a.stride(0), 1], [bm, bk])
    b_d = TensorDescriptor(b, [K, N], [b.stride(0), 1], [bk, bn])
    c_d = TensorDescriptor(c, [M, N], [c.stride(0), 1], [bm, bn // 2] if cfg["SPLIT_EPILOGUE"] else [bm, bn])
    tiles = mk.cdiv(M, bm) * mk.cdiv(N, bn)
    n_prog = tiles if programs is None else min(programs, tiles)

    def run():
        mk.matmul_tma_persistent_kernel[(n_prog,)](a_d, b_d, c_d, M, N, K, c.stride(0), NUM_PROGRAMS=n_prog,
                                                   C_DESC=True, **cfg)
        return c
    return run


def blocked_launch(a, b, config: dict = BLOCKED_CONFIG):
    from .kernels import matmul_kernels as mk

    return lambda: mk.matmul_blocked(a, b, config)


def persistent_vs_one_tile() -> list[dict]:
    """TFLOP/s of the persistent TMA kernel (132 programs), the same kernel with one program per tile,
    and chapter 4's pointer-based blocked kernel, each against cuBLAS in the same run."""
    sms = _sms()
    rows = []
    for size in (SMALL_SIZE, *SIZES):
        for dtype in DTYPES if size != SMALL_SIZE else (torch.float16,):
            a = torch.randn(size, size, device=DEVICE, dtype=dtype)
            b = torch.randn(size, size, device=DEVICE, dtype=dtype)
            ref = a.double() @ b.double() if size <= REF_MAX else None
            tiles = (size // TMA_CONFIG["BM"]) * (size // TMA_CONFIG["BN"])
            row = {"size": size, "dtype": _name(dtype), "tiles": tiles, "sms": sms, "waves": tiles / sms}
            for label, fn in (("persistent", tma_launch(a, b, sms)), ("one_tile_per_program", tma_launch(a, b, None)),
                              ("blocked_pointers", blocked_launch(a, b))):
                def one(fn=fn):
                    out = fn()
                    entry = _timed(fn, lambda: torch.matmul(a, b), flops=2 * size**3)
                    if ref is not None:
                        entry["rel_err"] = _rel_err(out, ref)
                    return entry
                row[label] = guarded(one)
            rows.append(row)
            del a, b, ref
            torch.cuda.empty_cache()
    return rows


def input_precision_table() -> list[dict]:
    """fp32 matmul with tl.dot's input_precision ieee / tf32 / tf32x3: error against fp64, TFLOP/s,
    against torch.matmul in fp32 (cuBLAS, TF32 off) in the same run."""
    import triton

    from .kernels import matmul_kernels as mk

    size = PRECISION_SIZE
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(size, size, device=DEVICE)
    b = torch.randn(size, size, device=DEVICE)
    ref = a.double() @ b.double()
    c = torch.empty_like(a)
    cfg = {"BM": 128, "BN": 128, "BK": 32, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
    grid = (triton.cdiv(size, 128) * triton.cdiv(size, 128),)
    rows = [{"precision": "torch fp32 (cuBLAS, allow_tf32=False)", "rel_err": _rel_err(a @ b, ref)}]
    for prec in ("ieee", "tf32", "tf32x3"):
        def run(prec=prec):
            mk.matmul_blocked_kernel[grid](a, b, c, size, size, size, size, 1, size, 1, size, 1, PRECISION=prec, **cfg)
            return c

        def one(run=run, prec=prec):
            entry = {"rel_err": _rel_err(run(), ref)}
            entry.update(_timed(run, lambda: a @ b, flops=2 * size**3))
            return entry
        rows.append({"precision": prec, **guarded(one)})
    return rows


def fp8_vs_scaled_mm() -> list[dict]:
    """The FP8 kernel (per-tensor and row-wise scales) against torch._scaled_mm with the same scales;
    bf16 torch.matmul of the unquantised inputs alongside as the speed and error baseline."""
    from .kernels.fp8_matmul import fp8_matmul, quantize_e4m3

    rows = []
    for size in SIZES:
        a = torch.randn(size, size, device=DEVICE)
        b = torch.randn(size, size, device=DEVICE)
        ref = (a.double() @ b.double()) if size <= REF_MAX else None
        a16, b16 = a.bfloat16(), b.bfloat16()
        per_tensor = {}
        for mode, dims in (("per_tensor", (None, None)), ("rowwise", (1, 0))):
            qa, sa = quantize_e4m3(a, dims[0])
            qb, sb = quantize_e4m3(b, dims[1])
            qb_cm = qb.t().contiguous().t()  # column-major B, as _scaled_mm requires
            if mode == "per_tensor":
                ts_a, ts_b = sa.reshape(()), sb.reshape(())
                per_tensor = {"qa": qa, "qb": qb_cm, "sa": ts_a, "sb": ts_b}
            else:
                ts_a, ts_b = sa.reshape(size, 1), sb.reshape(1, size)

            def ours():
                return fp8_matmul(qa, qb_cm, sa, sb, out_dtype=torch.bfloat16)

            def theirs():
                return torch._scaled_mm(qa, qb_cm, scale_a=ts_a, scale_b=ts_b, out_dtype=torch.bfloat16)

            def one():
                out = ours()
                entry = {"max_abs_diff_vs_scaled_mm": float((out.float() - theirs().float()).abs().max())}
                if ref is not None:
                    entry["rel_err"] = _rel_err(out, ref)
                entry.update(_timed(ours, theirs, flops=2 * size**3))
                return entry
            rows.append({"size": size, "mode": mode, **guarded(one)})
        rows.append({"size": size, "mode": "bf16 torch.matmul vs fp8 _scaled_mm (per-tensor)", **guarded(
            lambda: _timed(lambda: a16 @ b16, lambda: torch._scaled_mm(
                per_tensor["qa"], per_tensor["qb"], scale_a=per_tensor["sa"], scale_b=per_tensor["sb"],
                out_dtype=torch.bfloat16), flops=2 * size**3))})
        del a, b, ref, a16, b16
        torch.cuda.empty_cache()
    return rows


# -- chapter 9 -----------------------------------------------------------------------------------------
def gluon_vs_triton() -> list[dict]:
    """The warp-specialised Gluon matmul, the persistent Triton TMA kernel and the blocked Triton kernel,
    each against cuBLAS in the same run."""
    from .kernels import gluon_matmul
    from .kernels import matmul as triton_matmul

    sms = _sms()
    rows = []
    for size in SIZES:
        for dtype in DTYPES:
            a = torch.randn(size, size, device=DEVICE, dtype=dtype)
            b = torch.randn(size, size, device=DEVICE, dtype=dtype)
            ref = a.double() @ b.double() if size <= REF_MAX else None
            row = {"size": size, "dtype": _name(dtype)}
            for label, fn in (("gluon_ws", lambda: gluon_matmul.matmul(a, b)),
                              ("gluon_ws_128x256", lambda: gluon_matmul.matmul(a, b, {"BN": 256, "num_warps": 8})),
                              ("triton_persistent_tma", tma_launch(a, b, sms)),
                              ("triton_autotuned", lambda: triton_matmul(a, b))):
                def one(fn=fn):
                    out = fn()
                    entry = {"max_abs_diff_vs_cublas": float((out.float() - torch.matmul(a, b).float()).abs().max())}
                    if ref is not None:
                        entry["rel_err"] = _rel_err(out, ref)
                    entry.update(_timed(fn, lambda: torch.matmul(a, b), flops=2 * size**3))
                    return entry
                row[label] = guarded(one)
            rows.append(row)
            del a, b, ref
            torch.cuda.empty_cache()
    return rows


def gluon_attention_vs_triton() -> list[dict]:
    """Non-causal fp16 attention forward: the warp-specialised Gluon kernel (two softmax warpgroups, a TMA
    loader) and the reference Triton kernel, each against SDPA's default backend in the same run."""
    from .kernels import attention as triton_attention
    from .kernels import gluon_attention

    rows = []
    for (B, H, S, D) in GLUON_ATTN_SHAPES:
        q, k, v = (torch.randn(B, H, S, D, device=DEVICE, dtype=torch.float16) for _ in range(3))
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
        ref = sdpa()
        row = {"shape": [B, H, S, D]}
        for label, fn in (("gluon_ws", lambda: gluon_attention.attention(q, k, v)),
                          ("triton_reference", lambda: triton_attention(q, k, v))):
            def one(fn=fn):
                entry = {"max_abs_diff_vs_sdpa": float((fn().float() - ref.float()).abs().max())}
                entry.update(_timed(fn, sdpa, flops=4 * B * H * S * S * D))
                return entry
            row[label] = guarded(one)
        rows.append(row)
        del q, k, v, ref
        torch.cuda.empty_cache()
    return rows


# -- chapter 10 ----------------------------------------------------------------------------------------
def dropout_gpu() -> dict:
    """Same seed -> same mask on the GPU for two block sizes and as on the CPU interpreter (a checksum the
    chapter recomputes on CPU); bandwidth against torch's dropout (which stores no mask either, but draws
    new random numbers each call)."""
    from .kernels.dropout_kernels import dropout, keep_mask

    out = {}
    n, p, seed = 1_000_003, 0.3, 1234
    m1 = keep_mask(n, p, seed, DEVICE, BLOCK=256)
    m2 = keep_mask(n, p, seed, DEVICE, BLOCK=4096)
    out["same_mask_across_blocks"] = bool(torch.equal(m1, m2))
    out["checksum"] = {"n": n, "p": p, "seed": seed, "kept": int(m1.sum()),
                       "first_64": [int(v) for v in m1[:64].int().tolist()]}
    big = DROPOUT_N
    x = torch.randn(big, device=DEVICE, dtype=torch.float16)
    out["bandwidth_fp16_2^26"] = guarded(lambda: _timed(lambda: dropout(x, p, seed),
                                                        lambda: torch.nn.functional.dropout(x, p, training=True),
                                                        nbytes=2 * 2 * big))
    return out


def layernorm_backward() -> list[dict]:
    """dx, dw, db: partial sums + second reduction vs atomics, against torch autograd's LayerNorm backward."""
    from .kernels.layernorm_bwd_kernels import layernorm_bwd, layernorm_fwd

    rows = []
    for (M, N) in LN_SHAPES:
        for dtype in (torch.float16,):
            x = torch.randn(M, N, device=DEVICE, dtype=dtype, requires_grad=True)
            w = torch.randn(N, device=DEVICE, dtype=dtype, requires_grad=True)
            b = torch.randn(N, device=DEVICE, dtype=dtype, requires_grad=True)
            dy = torch.randn(M, N, device=DEVICE, dtype=dtype)
            y_ref = torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5)
            g_ref = torch.autograd.grad(y_ref, (x, w, b), dy, retain_graph=True)
            _, mean, rstd = layernorm_fwd(x.detach(), w.detach(), b.detach())
            row = {"shape": [M, N], "dtype": _name(dtype)}
            torch_bwd = lambda: torch.autograd.grad(y_ref, (x, w, b), dy, retain_graph=True)  # noqa: E731
            for strat in ("partial", "atomic"):
                def one(strat=strat):
                    fn = lambda: layernorm_bwd(dy, x.detach(), w.detach(), mean, rstd, strat)  # noqa: E731
                    got = fn()
                    entry = {f"max_abs_err_{n}": float((g.float() - r.float()).abs().max())
                             for n, g, r in zip(("dx", "dw", "db"), got, g_ref)}
                    if strat == "atomic":
                        entry["bitwise_repeatable_dw"] = bool(torch.equal(fn()[1], fn()[1]))
                    entry.update(_timed(fn, torch_bwd, nbytes=3 * M * N * x.element_size()))
                    return entry
                row[strat] = guarded(one)
            rows.append(row)
            del x, w, b, dy, y_ref, g_ref
            torch.cuda.empty_cache()
    return rows


def attention_backward() -> list[dict]:
    """Our FlashAttention-2 backward (from saved O and lse) against SDPA's backward, in the same run."""
    from .kernels.attention_bwd_kernels import attention_bwd, attention_fwd

    rows = []
    for (B, H, S, D) in ATTN_SHAPES:
        for causal in (False, True):
            shape = (B, H, S, D)
            q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.float16, requires_grad=True) for _ in range(3))
            do = torch.randn(shape, device=DEVICE, dtype=torch.float16)
            row = {"shape": list(shape), "causal": causal}

            def one():
                o_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                g_ref = torch.autograd.grad(o_ref, (q, k, v), do, retain_graph=True)
                o, lse = attention_fwd(q.detach(), k.detach(), v.detach(), causal)
                fn = lambda: attention_bwd(do, q.detach(), k.detach(), v.detach(), o, lse, causal)  # noqa: E731
                got = fn()
                entry = {f"max_abs_err_{n}": float((g.float() - r.float()).abs().max())
                         for n, g, r in zip(("dq", "dk", "dv"), got, g_ref)}
                flops = 10 * B * H * S * S * D // (2 if causal else 1)  # five S x S x D matmuls
                entry.update(_timed(fn, lambda: torch.autograd.grad(o_ref, (q, k, v), do, retain_graph=True),
                                    flops=flops))
                return entry
            row.update(guarded(one))
            rows.append(row)
            del q, k, v, do
            torch.cuda.empty_cache()
    return rows


def triton_op_compile() -> dict:
    """``tcourse::layernorm`` (triton_op + register_autograd) inside ``torch.compile(fullgraph=True)``:
    the graph-break count from ``torch._dynamo.explain``, and forward/backward against eager torch."""
    from .kernels.torch_ops import layernorm

    x = torch.randn(4096, 1024, device=DEVICE, requires_grad=True)
    w = torch.randn(1024, device=DEVICE, requires_grad=True)
    b = torch.randn(1024, device=DEVICE, requires_grad=True)

    def step(x, w, b):
        return (layernorm(x, w, b) * 2).relu().sum()

    ex = torch._dynamo.explain(step)(x, w, b)
    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    loss = compiled(x, w, b)
    grads = torch.autograd.grad(loss, (x, w, b))
    ref_loss = (torch.nn.functional.layer_norm(x, (1024,), w, b) * 2).relu().sum()
    ref_grads = torch.autograd.grad(ref_loss, (x, w, b))
    return {"graph_count": ex.graph_count, "graph_break_count": ex.graph_break_count,
            "break_reasons": [str(r.reason)[:200] for r in ex.break_reasons],
            "loss_rel_diff": float(((loss - ref_loss).abs() / ref_loss.abs()).detach()),
            "grad_max_abs_diff": [float((g - r).abs().max()) for g, r in zip(grads, ref_grads)]}


RECORDINGS = {
    "ch08_persistent": persistent_vs_one_tile,
    "ch08_input_precision": input_precision_table,
    "ch08_fp8": fp8_vs_scaled_mm,
    "ch09_gluon_matmul": gluon_vs_triton,
    "ch09_gluon_attention": gluon_attention_vs_triton,
    "ch10_dropout": dropout_gpu,
    "ch10_layernorm_bwd": layernorm_backward,
    "ch10_attention_bwd": attention_backward,
    "ch10_triton_op_compile": triton_op_compile,
}
