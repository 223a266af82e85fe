"""Chapters 8-10's kernels on CPU: interpreter correctness on small odd shapes, float64 gradients against
torch autograd, and the Gluon matmul's real sm_90 compile (layouts, partitions, shared-memory budget)."""
import re

import pytest
import torch

import tcourse

tcourse.setup(quiet=True)

from tcourse.kernels import attention_bwd_kernels as ab  # noqa: E402
from tcourse.kernels import dropout_kernels as dk  # noqa: E402
from tcourse.kernels import fp8_matmul as f8  # noqa: E402
from tcourse.kernels import layernorm_bwd_kernels as lnb  # noqa: E402
from tcourse.kernels import matmul_kernels  # noqa: E402
from tcourse.kernels import torch_ops  # noqa: E402


def test_dropout_mask_is_independent_of_block_and_backward_reuses_it():
    x = torch.randn(3001)
    keep = dk.keep_mask(3001, 0.3, 77)
    assert torch.equal(dk.dropout(x, 0.3, 77, BLOCK=128), dk.dropout(x, 0.3, 77, BLOCK=2048))
    assert torch.equal(dk.dropout(x, 0.3, 77), torch.where(keep, x / 0.7, 0.0))
    assert not torch.equal(keep, dk.keep_mask(3001, 0.3, 78))
    assert abs(keep.float().mean().item() - 0.7) < 0.03
    xg = torch.randn(500, dtype=torch.float64, requires_grad=True)
    (dx,) = torch.autograd.grad(dk.Dropout.apply(xg, 0.3, 77), xg, torch.ones(500, dtype=torch.float64))
    torch.testing.assert_close(dx, torch.where(keep[:500], 1 / 0.7, 0.0).double(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("strategy", ["partial", "atomic"])
def test_layernorm_backward_matches_autograd_in_float64(strategy):
    x = torch.randn(13, 77, dtype=torch.float64, requires_grad=True)
    w = torch.randn(77, dtype=torch.float64, requires_grad=True)
    b = torch.randn(77, dtype=torch.float64, requires_grad=True)
    dy = torch.randn(13, 77, dtype=torch.float64)
    got = torch.autograd.grad(lnb.LayerNorm.apply(x, w, b, 1e-5, strategy), (x, w, b), dy)
    ref = torch.autograd.grad(torch.nn.functional.layer_norm(x, (77,), w, b, 1e-5), (x, w, b), dy)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, atol=1e-10, rtol=1e-10)


def test_layernorm_backward_fp32_groups_fewer_than_rows():
    x, w, dy = torch.randn(50, 33), torch.randn(33), torch.randn(50, 33)
    _, mean, rstd = lnb.layernorm_fwd(x, w, torch.zeros(33))
    dx, dw, db = lnb.layernorm_bwd(dy, x, w, mean, rstd, "partial", groups=3)
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_()
    bd = torch.zeros(33, dtype=torch.float64, requires_grad=True)
    ref = torch.autograd.grad(torch.nn.functional.layer_norm(xd, (33,), wd, bd), (xd, wd, bd), dy.double())
    for g, r in zip((dx, dw, db), ref):
        torch.testing.assert_close(g.double(), r, atol=1e-4, rtol=1e-4)


def test_triton_op_layernorm_forward_and_backward():
    x = torch.randn(5, 40, dtype=torch.float64, requires_grad=True)
    w = torch.randn(40, dtype=torch.float64, requires_grad=True)
    b = torch.randn(40, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch_ops.layernorm, (x, w, b), fast_mode=True)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_backward_matches_autograd_in_float64(causal):
    q, k, v = (torch.randn(1, 2, 37, 16, dtype=torch.float64, requires_grad=True) for _ in range(3))
    do = torch.randn(1, 2, 37, 16, dtype=torch.float64)
    o = ab.FlashAttention.apply(q, k, v, causal)
    o_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(o, o_ref, atol=1e-12, rtol=1e-12)
    for g, r in zip(torch.autograd.grad(o, (q, k, v), do), torch.autograd.grad(o_ref, (q, k, v), do)):
        torch.testing.assert_close(g, r, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kw", [{}, {"dkdv": {"BLOCK_M": 16, "BLOCK_N": 32}, "dq": {"BLOCK_M": 32, "BLOCK_N": 16}},
                                {"dq_atomic": True}, {"tma": True}], ids=["default", "blocks", "atomic", "tma"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_backward_whole_blocks(causal, kw):
    """S a multiple of every block: no bounds masks, the causal mask on the diagonal blocks only; also the
    taller blocks, dQ by atomics and the tensor-descriptor loads."""
    q, k, v, do = (torch.randn(1, 2, 64, 16, dtype=torch.float64) for _ in range(4))
    o, lse = ab.attention_fwd(q, k, v, causal)
    qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))
    ref = torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(qr, kr, vr, is_causal=causal),
                              (qr, kr, vr), do)
    for g, r in zip(ab.attention_bwd(do, q, k, v, o, lse, causal, **kw), ref):
        torch.testing.assert_close(g, r, atol=1e-12, rtol=1e-12)


def test_flash_attention_fp32_lse_is_log_sum_exp():
    q, k, v = (torch.randn(1, 1, 20, 16) for _ in range(3))
    _, lse = ab.attention_fwd(q, k, v)
    ref = torch.logsumexp(q.double() @ k.double().transpose(-1, -2) * 16 ** -0.5, dim=-1)
    torch.testing.assert_close(lse.double(), ref, atol=3e-3, rtol=3e-3)  # the scores' dot reads TF32, as on a GPU


@pytest.mark.parametrize("dims", [(None, None), (1, 0)], ids=["per_tensor", "rowwise"])
def test_fp8_matmul_equals_dequantised_product(dims):
    a, b = torch.randn(37, 72), torch.randn(72, 45)
    qa, sa = f8.quantize_e4m3(a, dims[0])
    qb, sb = f8.quantize_e4m3(b, dims[1])
    c = f8.fp8_matmul(qa, qb, sa, sb, out_dtype=torch.float32)
    ref = (qa.double() * sa.double()) @ (qb.double() * sb.double())
    torch.testing.assert_close(c.double(), ref, atol=1e-4, rtol=1e-4)


def test_fp8_rowwise_scales_must_match_shapes():
    qa, _ = f8.quantize_e4m3(torch.randn(8, 16))
    qb, _ = f8.quantize_e4m3(torch.randn(16, 8))
    with pytest.raises(ValueError):
        f8.fp8_matmul(qa, qb, torch.ones(3), torch.ones(8))


def test_gluon_matmul_compiles_for_sm90_with_two_partitions():
    gluon_matmul = pytest.importorskip("tcourse.kernels.gluon_matmul")
    rep = gluon_matmul.compile_sm90(1024)
    ttgir = rep.asm["ttgir"]
    assert "ttg.warp_specialize" in ttgir and "requestedRegisters = array<i32: 24>" in ttgir
    assert "#ttg.nvidia_mma<{versionMajor = 3" in ttgir and "nvmma_shared" in ttgir
    assert "cp.async.bulk.tensor" in rep.asm["ptx"]
    # 4 stages of a 128x64 and a 64x128 fp16 tile; the C staging tile reuses the ring once the K loop is done
    ring = 4 * (128 * 64 + 64 * 128) * 2
    assert ring <= rep.shared_bytes < ring + 128 * 128 * 2 and rep.fits_sm90
    assert "HGMMA" in rep.sass()


def test_gluon_matmul_config_of_the_1024_dispatch_compiles_without_spills():
    """matmul's Gluon config at 1024^3 (64x128 tiles, K steps of 64, 8 stages): the ring fits with C's tile."""
    gluon_matmul = pytest.importorskip("tcourse.kernels.gluon_matmul")
    from tcourse.kernels.matmul_kernels import GLUON_CONFIG

    for dtype in (torch.float16, torch.bfloat16):
        rep = gluon_matmul.compile_sm90(1024, dtype, GLUON_CONFIG)
        ring = GLUON_CONFIG["STAGES"] * (64 * 64 + 64 * 128) * 2
        assert ring <= rep.shared_bytes < ring + 64 * 128 * 2 and rep.fits_sm90 and rep.spills == 0


def test_attention_dispatches_to_the_in_order_gluon_kernel_with_its_measured_config():
    """Shape rules only (no GPU needed): D 64 and 128, causal or not, S a multiple of 128; three consumers only
    for D=64 without a mask where the last 192-row tile pads S by at most 1/16; never a shape the kernel cannot
    take."""
    C = pytest.importorskip("tcourse.kernels.gluon_attention_consumers")
    from tcourse.kernels import attention_kernels as A

    def picks(B, H, S, D, causal, dtype=torch.float16):
        return A._gluon_kernel(torch.empty(B, H, S, D, dtype=dtype), causal) is not None

    for S in (1024, 4096):
        for D in (64, 128):
            for causal in (False, True):
                assert picks(4, 32, S, D, causal) and picks(4, 32, S, D, causal, torch.bfloat16), (S, D, causal)
    assert not picks(4, 32, 1024, 32, True) and not picks(4, 32, 1024, 256, False)
    assert not picks(1, 8, 1000, 128, False) and not picks(1, 8, 1088, 64, False)  # S % 128: the Triton kernels
    assert not picks(4, 32, 1024, 64, False, torch.float32)
    assert C.config_for(4096, 64, False) == C.config_for(2048, 64, False) == C.THREE  # 4224 / 2112 rows in tiles
    assert C.config_for(1024, 64, False) == C.TWO[64]  # 1152 rows: an eighth past the end
    assert C.config_for(4096, 64, True) == C.TWO[64] and C.config_for(4096, 128, False) == C.TWO[128]


@pytest.mark.parametrize("S, D, causal", [(1024, 64, False), (4096, 64, False), (1024, 64, True), (4096, 128, True)])
def test_consumers_gluon_attention_compiles_for_sm90(S, D, causal):
    """NC worker partitions beside the default one (NC - 1 consumers and the loader), no spills, as much shared memory as ``supports`` counts, and three waits per consumer
    (the tile's first Q K^T, the loop's, the last P V): ptxas did not serialise the wgmmas for lack of registers."""
    C = pytest.importorskip("tcourse.kernels.gluon_attention_consumers")
    nc, bn, stages, _ = C.config_for(S, D, causal)
    rep = C.compile_sm90(S=S, D=D, causal=causal)
    assert sum(line.strip().startswith("partition") for line in rep.asm["ttgir"].splitlines()) == nc
    assert rep.fits_sm90 and rep.spills == 0
    smem = (3 * nc * C.BM + 2 * stages * bn) * D * 2
    assert smem <= rep.shared_bytes <= smem + 1024
    sass = rep.sass()
    assert sass.count("WARPGROUP.DEPBAR") == 3 * nc
    assert sass.count("HGMMA") == nc * 2 * (D // 16 + bn // 16)  # each Q K^T and P V written twice (prologue, loop)


def test_a_triton_without_gluon_keeps_the_public_functions_on_their_triton_kernels(monkeypatch):
    """gluon_module gives None for a module that does not import (as on a Triton without Gluon), once; the
    dispatchers then pick no Gluon kernel."""
    from tcourse.kernels import _launch, attention_kernels as A

    monkeypatch.setattr(_launch, "_GLUON_MODULES", {"gluon_attention_consumers": None, "gluon_attention_bwd": None,
                                                    "gluon_matmul": None})
    assert _launch.gluon_module("no_such_kernel_module") is None
    assert "no_such_kernel_module" in _launch._GLUON_MODULES
    assert A._gluon_kernel(torch.empty(4, 32, 1024, 128, dtype=torch.float16), False) is None
    monkeypatch.setattr(ab, "is_hopper", lambda q: True)
    assert not ab._gluon_measured_faster(torch.empty(1, 1, 4096, 128), False, None, None, False, None)
    monkeypatch.setattr(matmul_kernels, "tma_available", lambda a: True)
    assert matmul_kernels._gluon_matmul(torch.empty(1024, 1024), torch.empty(1024, 1024)) is None


def test_gluon_shared_layouts_are_computed_once_and_equal_the_default():
    """The host descriptors share one layout object per (block, dtype): the same value Gluon would pick."""
    M = pytest.importorskip("tcourse.kernels.gluon_matmul")
    from triton.experimental.gluon import language as gl

    for block, dtype, gdt in (([64, 128], torch.float16, gl.float16), ([128, 64], torch.bfloat16, gl.bfloat16)):
        first = M._layout(block, dtype)
        assert M._layout(list(block), dtype) is first
        fresh = gl.NVMMASharedLayout.get_default_for(block, gdt)
        assert first == fresh and hash(first) == hash(fresh) and repr(first) == repr(fresh)


@pytest.mark.parametrize("causal", [False, True])
def test_pipelined_gluon_attention_compiles_for_sm90(causal):
    """Three partitions, asynchronous wgmma with one group left in flight (Q K^T waited for while P V
    runs), no spills, and the shared memory its ``supports`` check counts. Where the exponentials land, as
    chapter 9.7 prints it: ptxas moves the wait for P V ahead of the softmax, so none of a step's 66
    ``MUFU.EX2`` (64 for P, two for alpha) sit between wait(1) and wait(0) (a newer ptxas that keeps them there
    fails this test, and the chapter's paragraph and the module docstring need their measurement again)."""
    P = pytest.importorskip("tcourse.kernels.gluon_attention_pipelined")
    for D in (64, 128):
        rep = P.compile_sm90(S=1024, D=D, causal=causal)
        assert "ttg.warp_specialize" in rep.asm["ttgir"]
        assert "wgmma.wait_group.sync.aligned 1" in rep.asm["ptx"]
        assert rep.fits_sm90 and rep.spills == 0
        cfg = P.CONFIGS[D]
        rings = (4 * cfg["BM"] + 2 * cfg["STAGES"] * cfg["BN"]) * D * 2
        assert rings <= rep.shared_bytes <= rings + 1024
        sass = rep.sass()
        assert sass.count("WARPGROUP.DEPBAR") == 8  # as many waits as written: no serialised wgmma
        marks = "".join("e" if m == "MUFU.EX2" else m[-1]
                        for m in re.findall(r"MUFU\.EX2|WARPGROUP\.DEPBAR\.LE gsb0, 0x[01]", sass))
        assert [(len(a), len(b)) for a, b in re.findall(r"1(e*)0(e*)", marks)] == [(0, 66), (0, 66)]


@pytest.mark.parametrize("n_m, BH", [(8, 128), (32, 128), (4, 50), (4, 150), (6, 70), (8, 6), (133, 1)])
def test_pipelined_tile_orders_deal_every_tile_once(n_m, BH):
    """``_tile`` run as plain Python on ints (its Gluon body is integer arithmetic): in each order every
    (query block, head) tile goes to exactly one program and no program is left without a tile (its
    consumers would wait forever). The rounds order keeps at most 2 G heads in flight and, over each pair of
    full rounds, deals every program one heavy and one light causal tile: with whole rounds every program
    walks the same number of key blocks."""
    P = pytest.importorskip("tcourse.kernels.gluon_attention_pipelined")
    sms = 132
    for order in P.ORDERS:
        if order == "rounds" and n_m > sms:
            with pytest.raises(ValueError, match="rounds"):
                P.tile_order(n_m, BH, sms, True, order)
            continue
        programs, G = P.tile_order(n_m, BH, sms, True, order)
        dealt = {p: [P._tile.fn(t, n_m, BH, G) for t in range(p, n_m * BH, programs)] for p in range(programs)}
        tiles = [tile for mine in dealt.values() for tile in mine]
        assert sorted(tiles) == sorted((m, bh) for m in range(n_m) for bh in range(BH)), order
        assert all(dealt.values()), order
        if order == "rounds":
            assert programs == G * n_m <= sms
            work = {sum(m + 1 for m, _ in mine) for mine in dealt.values()}
            if BH % G == 0 and (BH // G) % 2 == 0:
                assert work == {BH // G * (n_m + 1) // 2}, work
            for p, mine in dealt.items():  # round r of program p: a tile of heads r*G .. r*G + G - 1
                assert all(r * G <= bh < (r + 1) * G for r, (_, bh) in enumerate(mine)), (p, mine)
    # by default (as measured): rounds for causal problems, a head's tiles adjacent otherwise
    causal_default = "rounds" if n_m <= sms else "head_major"
    assert P.tile_order(n_m, BH, sms, True) == P.tile_order(n_m, BH, sms, True, causal_default)
    assert P.tile_order(n_m, BH, sms, False) == P.tile_order(n_m, BH, sms, False, "head_major")
    with pytest.raises(ValueError, match="order must be one of"):
        P.tile_order(n_m, BH, sms, False, "diagonal")


def test_gluon_attention_compiles_for_sm90_with_three_partitions():
    gluon_attention = pytest.importorskip("tcourse.kernels.gluon_attention")
    rep = gluon_attention.compile_sm90(S=1024, D=64)
    ttgir = rep.asm["ttgir"]
    assert "ttg.warp_specialize" in ttgir and "requestedRegisters = array<i32: 240, 24>" in ttgir
    assert rep.fits_sm90 and rep.spills == 0
    sass = rep.sass()
    assert "HGMMA" in sass and "MUFU.EX2" in sass


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_compiles_for_sm90(causal):
    """The backward's H200 configs compile for sm_90 without spills, read through TMA and multiply on
    wgmma; float64 (what chapter 10 checks on a GPU) compiles too, bounds masks and all."""
    for D in (64, 128):
        for rep in ab.compile_sm90(D, causal):
            assert rep.spills == 0 and rep.fits_sm90, (rep.name, D, rep.spills, rep.shared_bytes)
            assert "cp.async.bulk.tensor" in rep.asm["ptx"] and "wgmma.mma_async" in rep.asm["ptx"]
    (atomic,) = ab.compile_sm90(64, causal, dq_atomic=True)  # dQ added by one TMA reduce-add per block
    assert atomic.spills == 0 and "cp.reduce.async.bulk.tensor" in atomic.asm["ptx"]
    tiny = ({"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 2},) * 2
    for rep in ab.compile_sm90(16, causal, torch.float64, tma=False, S=45, configs=tiny):
        assert "mma.sync.aligned.m8n8k4.row.col.f64" in rep.asm["ptx"]  # float64 tensor-core MMA, not float32


@pytest.mark.parametrize("causal", [False, True])
def test_gluon_attention_backward_compiles_for_sm90(causal):
    """The one-kernel Gluon backward: three partitions, dQ leaving by TMA reduce-add, within the shared
    memory ``supports`` counts, and within the spills on file: its speed at D=128 is decided by them (the
    module docstring). Triton 3.6's ptxas (the H200's): none at D=64, 112 / 128 bytes at D=128 (plain /
    causal; 176 / 192 before the tile loop); Triton 3.9's: 8 and 264 / 368."""
    G = pytest.importorskip("tcourse.kernels.gluon_attention_bwd")
    for D, most in ((64, 8), (128, 368)):
        rep = G.compile_sm90(S=1024, D=D, causal=causal)
        assert "ttg.warp_specialize" in rep.asm["ttgir"] and "wgmma.mma_async" in rep.asm["ptx"]
        assert "cp.reduce.async.bulk.tensor" in rep.asm["ptx"]
        assert rep.fits_sm90 and rep.shared_bytes <= G.smem_bytes(D) <= rep.shared_bytes + 1024
        assert rep.spills <= most, (D, rep.spills)
    # query blocks go to the consumers in pairs, and with the mask only on the first pair the diagonal must fit it
    q = torch.empty(1, 2, 1024, 128, dtype=torch.float16)
    assert G.supports(q, causal) and not G.supports(q, causal, {"BM": 32}) and not G.supports(q, causal, {"BM": 128})
    # dQ either split by columns or taken in turns, not both (unsplit at D=128: 2 stages fit, 3 do not)
    assert G.supports(q, causal, {"DQ_SPLIT": False, "DQ_ALT": True, "STAGES": 2})
    assert not G.supports(q, causal, {"DQ_ALT": True})


def test_attention_backward_dispatches_to_gluon_where_it_measured_faster(monkeypatch):
    """By default the one-kernel Gluon backward serves (D, causal) in GLUON_BWD_WINS from S = 4096 on, on
    Hopper; an explicit Triton option (configs, dq_atomic, tma) keeps the two Triton kernels."""
    class FakeGluon:
        @staticmethod
        def supports(q, causal, config=None):
            return q.shape[2] % 128 == 0

    monkeypatch.setattr(ab, "_gluon_bwd", lambda: FakeGluon)
    monkeypatch.setattr(ab, "is_hopper", lambda q: True)

    def picks(S, D, causal, **kw):
        return ab._gluon_measured_faster(torch.empty(1, 1, S, D), causal, kw.get("dkdv"), kw.get("dq"),
                                         kw.get("dq_atomic", False), kw.get("tma"))
    assert picks(4096, 128, False) and picks(4096, 128, True) and picks(8192, 64, True) and picks(4096, 64, False)
    assert not picks(2048, 128, False) and not picks(2048, 128, True) and not picks(2048, 64, False)
    assert not picks(4096, 32, False)  # a head dim never measured
    assert not picks(4096 + 64, 128, False)  # S not a multiple of 128: the kernel does not take it
    assert not picks(4096, 128, False, dkdv={"BLOCK_M": 32}) and not picks(4096, 128, False, dq_atomic=True)
    assert not picks(4096, 128, False, tma=True)
    monkeypatch.setattr(ab, "is_hopper", lambda q: False)
    assert not picks(4096, 128, False)


def test_gluon_attention_backward_is_refused_off_hopper():
    q, k, v, do = (torch.randn(1, 2, 128, 64, dtype=torch.float16) for _ in range(4))
    o, lse = ab.attention_fwd(q.float(), k.float(), v.float())
    with pytest.raises(ValueError, match="gluon=True needs Gluon, a Hopper GPU"):
        ab.attention_bwd(do, q, k, v, o.half(), lse, gluon=True)


def test_attention_backward_rejects_bad_input():
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(ValueError, match="multiple"):
        ab.bwd_configs(q, False, dkdv={"BLOCK_M": 32, "BLOCK_N": 16})
    with pytest.raises(ValueError, match="multiple"):
        ab.bwd_configs(q, True, dq={"BLOCK_M": 16, "BLOCK_N": 32})
    q, k, v, do = (torch.randn(1, 1, 37, 16) for _ in range(4))
    o, lse = ab.attention_fwd(q, k, v)
    with pytest.raises(ValueError, match="multiple of every block"):  # descriptors cannot mask the last rows
        ab.attention_bwd(do, q, k, v, o, lse, tma=True)
    q32, k32, v32, do32 = (t[:, :, :32] for t in (q, k, v, do))
    o32, lse32 = ab.attention_fwd(q32, k32, v32)
    with pytest.raises(ValueError, match="TMA reduce"):  # no descriptor reduce-add in the interpreter
        ab.attention_bwd(do32, q32, k32, v32, o32, lse32, dq_atomic=True, tma=True)
    with pytest.raises(ValueError, match="one .B, H, S, D. shape"):
        ab.attention_bwd(do[..., :8], q, k, v, o, lse)
    with pytest.raises(ValueError, match="lse must have shape"):
        ab.attention_bwd(do, q, k, v, o, lse[:, :, :5])
    with pytest.raises(ValueError, match="head dim D=24"):
        ab.attention_fwd(*(torch.randn(1, 1, 8, 24) for _ in range(3)))


def test_cluster_matmul_multicasts_b_from_the_lead_cta_for_sm90():
    """scripts/cluster_matmul.py (session 28's multicast experiment, run on the H200 from a cubin built here): with a
    Triton whose Gluon has multicast, its 256x256x64 config compiles for sm_90 as two-CTA clusters; the lead CTA alone
    issues B's copy, once per 64-column box, multicast to both CTAs (mask 3); only the lead waits on the pair's barrier;
    the consumers release it with a remote arrive; no spills, and the shared memory fits."""
    import importlib.util
    import inspect
    from pathlib import Path

    from triton.experimental.gluon.language.nvidia.hopper import tma

    if "multicast" not in inspect.signature(tma.async_load).parameters:
        pytest.skip("this Triton's Gluon has no TMA multicast (Triton >= 3.9 has)")
    from tcourse.compile_info import H100_SMEM_LIMIT, _resource_usage, real_compiler

    path = Path(__file__).resolve().parent.parent / "scripts" / "cluster_matmul.py"
    spec = importlib.util.spec_from_file_location("cluster_matmul", path)
    cm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cm)
    name = "cluster 256x256x64 3st"
    with real_compiler(vars(cm)):
        k, entry = cm.compile_sm90(name, "fp16")
    ptx = k.asm["ptx"]
    assert ".reqnctapercluster 2" in ptx and entry["num_ctas"] == 2
    copies = re.findall(r"@(%p\d+) cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::complete_tx::bytes"
                        r"\.multicast::cluster \[[^\]]+\], \[[^\]]+\], \[[^\]]+\], (%rs\d+);", ptx)
    assert len(copies) == cm.CONFIGS[name]["BN"] // 64 and len(set(copies)) == 1  # B's boxes, one predicate, one mask
    pred, mask = copies[0]
    assert re.search(rf"and\.pred\s+{pred}, %p\d+, %p\d+;", ptx)  # that predicate: lead CTA and elected lane
    assert re.search(rf"mov\.b16\s+{mask}, 3;", ptx)  # the mask: both CTAs of the pair
    assert "%cluster_ctarank" in ptx
    assert ptx.count("skipWait") >= 1  # the pair barrier's wait, skipped outside the lead CTA
    assert "mbarrier.arrive.shared::cluster.b64" in ptx  # the release, on the lead CTA's barrier
    regs, spills = _resource_usage(k.asm["cubin"])
    assert spills == 0 and regs <= 168 and entry["shared"] <= H100_SMEM_LIMIT
