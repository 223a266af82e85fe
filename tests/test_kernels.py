"""Reference kernels (tcourse.kernels) against torch: CPU interpreter in CI, small odd shapes.

bf16 is silently wrong under the interpreter, so bf16 tests run only where a GPU is present.
"""
import importlib.util
import re

import pytest
import torch
import torch.nn.functional as F

import tcourse.kernels as K
from tcourse.kernels import attention_kernels, matmul_kernels, softmax_kernels

DEV = "cuda" if torch.cuda.is_available() else "cpu"
gpu_only = pytest.mark.skipif(DEV == "cpu", reason="bf16 and the Hopper paths need a GPU")


def rel_err(out, ref):
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert not torch.isnan(out).any(), "NaN in the output: an element never written?"
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(device=DEV, dtype=dtype)


@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_axpy(n):
    x, y = randn(n, seed=1), randn(n, seed=2)
    assert rel_err(K.axpy(-0.75, x, y), -0.75 * x.double() + y.double()) < 1e-6
    assert rel_err(K.axpy(torch.tensor(2.0), x, y), 2 * x.double() + y.double()) < 1e-6


def test_axpy_rejects_mismatch():
    with pytest.raises(ValueError):
        K.axpy(1.0, randn(10), randn(11))


@pytest.mark.parametrize("shape", [(1, 1), (37, 1000), (5, 1024), (3, 3001)])
def test_softmax(shape):
    x = randn(*shape, seed=3) * 5
    assert rel_err(K.softmax(x), torch.softmax(x.double(), -1)) < 1e-6


def test_softmax_strided_rows():
    """Rows whose stride (1003) is not a multiple of the vector width."""
    x = randn(9, 1003, seed=4)[:, :1000]
    assert rel_err(K.softmax(x), torch.softmax(x.double(), -1)) < 1e-6


def test_softmax_fp16():
    x = randn(7, 333, dtype=torch.float16, seed=5)
    assert rel_err(K.softmax(x), torch.softmax(x.double(), -1)) < 2e-3


@pytest.mark.parametrize("chunk", [64, 256])
def test_softmax_online_multi_block(chunk):
    """The multi-block path that wide rows use, with chunks small enough to run on CPU."""
    x = randn(6, 1000, seed=6) * 8
    out = softmax_kernels.softmax_online(x, chunk=chunk)
    assert rel_err(out, torch.softmax(x.double(), -1)) < 1e-6


def test_softmax_dispatches_wide_rows_online():
    x = randn(2, softmax_kernels.MAX_BLOCK + 3, seed=7)
    assert rel_err(K.softmax(x), torch.softmax(x.double(), -1)) < 1e-6


@pytest.mark.parametrize("shape,dtype,hint", [((4096, 1000), torch.float32, "evict_first"),
                                               ((4096, 1024), torch.float32, "evict_first"),
                                               ((4096, 2048), torch.float16, "evict_first"),
                                               ((4096, 1025), torch.float32, "evict_last"),
                                               ((4096, 2048), torch.float32, "evict_last"),
                                               ((4096, 65536), torch.float32, "evict_last")])
def test_softmax_evict_hint_by_size(shape, dtype, hint):
    """x is read with evict_first up to 16 MiB and with evict_last above (each the faster there on the H200)."""
    assert softmax_kernels._evict(torch.empty(shape, dtype=dtype, device="meta")) == hint


@pytest.mark.parametrize("n", [77, 1000, 9000])  # 9000 > MAX_BLOCK: the looped path
def test_layernorm(n):
    x, w, b = randn(5, n, seed=8) * 3 + 1, randn(n, seed=9), randn(n, seed=10)
    ref = F.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    assert rel_err(K.layernorm(x, w, b), ref) < 1e-5


@pytest.mark.parametrize("shape", [(1, 1), (67, 45), (130, 31)])
def test_transpose(shape):
    x = randn(*shape, seed=11)
    out = K.transpose(x)
    assert out.is_contiguous() and torch.equal(out, x.T)
    xs = randn(shape[1], shape[0], seed=12).T  # non-contiguous input
    assert torch.equal(K.transpose(xs), xs.T)


@pytest.mark.parametrize("mnk", [(67, 83, 45), (1, 33, 7), (64, 64, 64), (130, 17, 100)])
def test_matmul_fp32(mnk):
    m, n, k = mnk
    a, b = randn(m, k, seed=13), randn(k, n, seed=14)
    assert rel_err(K.matmul(a, b), a.double() @ b.double()) < 1e-5


def test_matmul_fp16_and_transposed_operand():
    a = randn(70, 50, dtype=torch.float16, seed=15)
    b = randn(90, 50, dtype=torch.float16, seed=16).T  # strided B
    assert rel_err(K.matmul(a, b), a.double() @ b.double()) < 2e-3


def test_matmul_rejects_bad_shapes():
    with pytest.raises(ValueError):
        K.matmul(randn(3, 4), randn(5, 6))
    with pytest.raises(TypeError):
        K.matmul(randn(3, 4), randn(4, 5, dtype=torch.float16))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16] if DEV == "cpu" else [torch.float16])
def test_attention(causal, dtype):
    q, k, v = (randn(2, 3, 77, 32, dtype=dtype, seed=s) for s in (17, 18, 19))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    # float32: tl.dot reads TF32 on a GPU and, since tcourse.setup() copies that, in the interpreter too
    assert rel_err(K.attention(q, k, v, causal=causal), ref) < 3e-3


def test_attention_scale():
    dtype = torch.float32 if DEV == "cpu" else torch.float16
    q, k, v = (randn(1, 2, 40, 16, dtype=dtype, seed=s) for s in (20, 21, 22))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), scale=0.3)
    assert rel_err(K.attention(q, k, v, sm_scale=0.3), ref) < 3e-3  # TF32 dots on a CPU too


def test_attention_rejects_what_its_kernels_get_wrong():
    """A scale <= 0 (scores are masked to -inf before the scale) and, causal, a key block that does not tile the
    query block: errors that say why, not NaN or a silently unmasked diagonal."""
    from tcourse.kernels import attention_kernels as AK

    dtype = torch.float32 if DEV == "cpu" else torch.float16
    q, k, v = (randn(1, 1, 48, 16, dtype=dtype, seed=s) for s in (23, 24, 25))
    for scale in (0.0, -0.25):
        with pytest.raises(ValueError, match="sm_scale must be > 0"):
            K.attention(q, k, v, sm_scale=scale)
    with pytest.raises(ValueError, match="BM a multiple of BN"):
        AK.attention_ptr(q, k, v, causal=True, config={"BM": 16, "BN": 32})
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=False)
    assert rel_err(AK.attention_ptr(q, k, v, config={"BM": 16, "BN": 32}), ref) < 3e-3  # TF32 dots on a CPU too


@gpu_only
@pytest.mark.parametrize("mnk", [(1024, 1024, 1024), (1000, 1000, 1000), (1024, 1000, 1008)])
def test_matmul_gluon_dispatch_gpu(mnk):
    """At 1024^3 on Hopper matmul takes the Gluon kernel (ragged edges through TMA's bounds); a transposed
    operand, or a GPU or Triton without it, the blocked kernel; the same results either way."""
    m, n, k = mnk
    for dt in (torch.float16, torch.bfloat16):
        a, b = randn(m, k, dtype=dt, seed=25), randn(k, n, dtype=dt, seed=26)
        ref = a.double() @ b.double()
        gluon = matmul_kernels.is_hopper(a) and importlib.util.find_spec("triton.experimental.gluon") is not None
        assert (matmul_kernels._gluon_matmul(a, b) is not None) == gluon
        for _ in range(3):  # first: kernel[grid]; then the launch plan of these three addresses
            assert rel_err(K.matmul(a, b), ref) < 1e-2
        a.copy_(randn(m, k, dtype=dt, seed=27))  # new values at the same addresses: the same plan
        ref = a.double() @ b.double()
        assert rel_err(K.matmul(a, b), ref) < 1e-2
        b2 = randn(k, n, dtype=dt, seed=28)  # another address: another plan
        assert rel_err(K.matmul(a, b2), a.double() @ b2.double()) < 1e-2
        bt = b.T.contiguous().T  # the same values, column-major
        assert matmul_kernels._gluon_matmul(a, bt) is None
        assert rel_err(K.matmul(a, bt), ref) < 1e-2


@gpu_only
@pytest.mark.parametrize("mnk", [(256, 512, 128), (4095, 4097, 1023), (1000, 1000, 1000)])
def test_matmul_bf16_gpu(mnk):
    m, n, k = mnk
    a, b = randn(m, k, dtype=torch.bfloat16, seed=23), randn(k, n, dtype=torch.bfloat16, seed=24)
    assert rel_err(K.matmul(a, b), a.double() @ b.double()) < 1e-2
    assert rel_err(matmul_kernels.matmul_blocked(a, b), a.double() @ b.double()) < 1e-2


@gpu_only
@pytest.mark.parametrize("causal", [False, True])
def test_attention_bf16_gpu(causal):
    q, k, v = (randn(2, 4, 256, 64, dtype=torch.bfloat16, seed=s) for s in (25, 26, 27))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    assert rel_err(K.attention(q, k, v, causal=causal), ref) < 1e-2


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pipelined_gluon_attention_gpu(dtype):
    """Every config of the pipelined Gluon kernel (ping-pong on and off) in every tile order, on fewer tiles
    than SMs, on several tiles per program (the flat loop crosses tile boundaries), causal and not, both head
    dims."""
    if not torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("the Gluon kernel is written for Hopper")
    P = pytest.importorskip("tcourse.kernels.gluon_attention_pipelined")
    # B*H = 50: two rounds of 33 and 17 heads, the second reversed; 150: a partial fifth round; 70: a partial
    # fourth (reversed) round of the rounds order (``tile_order``)
    for B, H, S, D in ((1, 2, 256, 64), (1, 50, 512, 64), (3, 50, 512, 64), (2, 3, 1024, 128), (1, 70, 768, 128)):
        q, k, v = (randn(B, H, S, D, dtype=dtype, seed=30 + i) for i in range(3))
        for causal in (False, True):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            for pingpong in (False, True):
                for order in P.ORDERS:
                    out = P.attention(q, k, v, causal, config={"PINGPONG": pingpong}, order=order)
                    assert rel_err(out, ref) < 1e-2, (B, H, S, D, causal, pingpong, order)
            for _ in range(3):  # the default config: then the launch plan of these four buffers
                assert rel_err(P.attention(q, k, v, causal), ref) < 1e-2, (B, H, S, D, causal)
        v.copy_(randn(B, H, S, D, dtype=dtype, seed=40))  # new values at the same addresses: the same plan
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        assert rel_err(P.attention(q, k, v, True), ref) < 1e-2, (B, H, S, D)


@gpu_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_consumers_gluon_attention_gpu(dtype):
    """The in-order Gluon kernel with two and three consumers, key blocks of 128 and 64, against float64 SDPA:
    fewer tiles than SMs, several tiles per program (each consumer's Q double-buffered across them), heads whose
    last 192-row tile reaches past S (three consumers: the ones past the end store nothing), causal and not;
    then the default config on repeated calls (the launch plan) and new values at the same addresses."""
    if not torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("the Gluon kernel is written for Hopper")
    C = pytest.importorskip("tcourse.kernels.gluon_attention_consumers")
    configs = {64: (C.TWO[64], C.THREE, (3, 128, 2, 160)), 128: (C.TWO[128], (2, 64, 3, 240), (3, 64, 2, 160))}
    for B, H, S, D in ((1, 2, 256, 64), (1, 50, 512, 64), (3, 50, 512, 64), (2, 7, 640, 64), (2, 3, 1024, 128),
                       (1, 70, 768, 128)):
        q, k, v = (randn(B, H, S, D, dtype=dtype, seed=50 + i) for i in range(3))
        for causal in (False, True):
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            for cfg in configs[D]:
                assert rel_err(C.attention(q, k, v, causal, config=cfg), ref) < 1e-2, (B, H, S, D, causal, cfg)
            for _ in range(3):
                assert rel_err(C.attention(q, k, v, causal), ref) < 1e-2, (B, H, S, D, causal)
        v.copy_(randn(B, H, S, D, dtype=dtype, seed=60))
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        assert rel_err(C.attention(q, k, v, True), ref) < 1e-2, (B, H, S, D)


@gpu_only
@pytest.mark.parametrize("D", [64, 128])
def test_attention_backward_gpu(D):
    """The backward's CUDA configs (tensor descriptors or pointers, and dQ by atomics) against SDPA's float64
    gradients, on a length that is a multiple of every block (the unmasked loops) and one that is not (the
    bounds masks)."""
    from tcourse.kernels import attention_bwd_kernels as ab

    for S, causal in ((512, False), (512, True), (300, True)):
        q, k, v, do = (randn(2, 3, S, D, dtype=torch.float16, seed=40 + i) for i in range(4))
        qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
        ref = torch.autograd.grad(F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal), (qd, kd, vd), do.double())
        o, lse = ab.attention_fwd(q, k, v, causal)
        # S=512: descriptors by default on Hopper (dQ by atomics: one TMA reduce-add per block), S=300 pointers;
        # the one-kernel Gluon backward where Gluon and S allow it (dQ split by columns or in turns, both a step
        # late, or by keys in its own step); D=128: 3 stages unsplit do not fit; D=64: each consumer its keys' dQ
        # (the default takes turns, DQ_ALT)
        cfgs = ([None, {"DQ_SPLIT": False, "STAGES": 2}, {"DQ_SPLIT": False, "DQ_ALT": True, "STAGES": 2}] if D == 128
                else [None, {"DQ_ALT": False, "STAGES": 2}])
        gluon = [{"gluon": True, "gluon_config": cfg} for cfg in cfgs
                 if ab._gluon_bwd() is not None and ab.is_hopper(q) and S % 128 == 0]
        for kw in ({}, {"tma": False}, {"dq_atomic": True}, {"dq_atomic": True, "tma": False}, *gluon):
            got = ab.attention_bwd(do, q, k, v, o, lse, causal, **kw)
            for name, g, r in zip(("dq", "dk", "dv"), got, ref):
                assert g.dtype == torch.float16 and rel_err(g, r) < 1e-2, (name, S, D, causal, kw)
    # more tiles than SMs (B2 H40 S512, not causal: 320): persistent programs walk several (the default at D64)
    if ab._gluon_bwd() is not None and ab.is_hopper(q):
        q, k, v, do = (randn(2, 40, 512, D, dtype=torch.float16, seed=60 + i) for i in range(4))
        qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
        ref = torch.autograd.grad(F.scaled_dot_product_attention(qd, kd, vd), (qd, kd, vd), do.double())
        o, lse = ab.attention_fwd(q, k, v, False)
        for cfg in (None, {"PERSISTENT": True}):
            got = ab.attention_bwd(do, q, k, v, o, lse, False, gluon=True, gluon_config=cfg)
            for name, g, r in zip(("dq", "dk", "dv"), got, ref):
                assert rel_err(g, r) < 1e-2, (name, D, cfg)
    # the default dispatch at a length where the Gluon backward serves (D128, D64 causal on Hopper)
    causal = D == 64
    q, k, v, do = (randn(1, 2, 4096, D, dtype=torch.float16, seed=50 + i) for i in range(4))
    qr, kr, vr = (t.float().requires_grad_() for t in (q, k, v))
    ref = torch.autograd.grad(F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal), (qr, kr, vr), do.float())
    o, lse = ab.attention_fwd(q, k, v, causal)
    assert ab._gluon_measured_faster(q, causal, None, None, False, None) == (ab._gluon_bwd() is not None and ab.is_hopper(q))
    for name, g, r in zip(("dq", "dk", "dv"), ab.attention_bwd(do, q, k, v, o, lse, causal), ref):
        assert rel_err(g, r) < 1e-2, (name, D, causal)


class _FakeCompiled:
    """Stands in for a CompiledKernel: records what a direct launch passes to ``run``."""
    function, packed_metadata = "function", "packed"

    def __init__(self):
        self.runs = []

    def launch_metadata(self, grid, stream, *args):
        return ("meta", grid)

    def run(self, *args):
        self.runs.append(args)


class _FakeJit:
    """Stands in for a JITFunction: ``kernel[grid](*args, **meta)`` counts the slow launches."""

    def __init__(self):
        self.compiled, self.slow = _FakeCompiled(), []

    @staticmethod
    def fn(x_ptr, out_ptr, n, a, BLOCK, EVICT=""):
        pass

    def __getitem__(self, grid):
        def launch(*args, **meta):
            self.slow.append((grid, args, meta))
            return self.compiled
        return launch


def _direct_launcher(fake):
    from types import SimpleNamespace

    from tcourse.kernels._launch import Launcher

    launcher = Launcher(fake, direct=True)
    launcher._device, launcher._stream = (lambda: 0), (lambda dev: f"stream{dev}")
    launcher._hooks = SimpleNamespace(launch_enter_hook="enter", launch_exit_hook="exit")
    return launcher


def test_direct_launch_reuses_a_specialisation_only():
    """The launcher's cache: same dtypes/alignment/ints/meta -> compiled kernel called directly with
    every argument (constexprs and defaults included); anything that changes Triton's
    specialisation -> back through kernel[grid]."""
    fake = _FakeJit()
    launch = _direct_launcher(fake)
    x, out = torch.zeros(64), torch.zeros(64)
    launch((4,), (x, out, 64, 2.0), {"BLOCK": 16, "num_warps": 4})
    assert len(fake.slow) == 1 and fake.compiled.runs == []
    launch((4, 2), (x, out, 64, 3.5), {"BLOCK": 16, "num_warps": 4})
    assert len(fake.slow) == 1
    assert fake.compiled.runs == [(4, 2, 1, "stream0", "function", "packed", ("meta", (4, 2)), "enter", "exit",
                                   x, out, 64, 3.5, 16, "")]
    misaligned = torch.zeros(65)[1:]  # 4-byte offset: Triton would not assume 16-byte alignment
    for args, meta in [((x, out, 65, 2.0), {"BLOCK": 16, "num_warps": 4}),  # another int value
                       ((misaligned, out, 64, 2.0), {"BLOCK": 16, "num_warps": 4}),
                       ((x.half(), out, 64, 2.0), {"BLOCK": 16, "num_warps": 4}),  # another dtype
                       ((x, out, 64, 2.0), {"BLOCK": 32, "num_warps": 4}),  # another constexpr
                       ((x, out, 64, 2.0), {"BLOCK": 16, "num_warps": 8})]:  # another option
        slow = len(fake.slow)
        launch((4,), args, meta)
        assert len(fake.slow) == slow + 1, (args, meta)
    launch((4,), (x, out, 64, object()), {"BLOCK": 16})  # a type it does not key: always kernel[grid]
    launch((4,), (x, out, 64, object()), {"BLOCK": 16})
    assert len(fake.slow) == 8 and len(fake.compiled.runs) == 1


def test_plan_launches_the_compiled_kernel_with_new_leading_arguments():
    """A plan calls the compiled kernel's C launch with the grid padded to 3-D, the current stream, the
    new leading arguments and everything else as first launched; while a launch hook is set it launches
    nothing and says so; the plan table forgets everything past its limit."""
    from types import SimpleNamespace

    from tcourse.kernels._launch import Plans, plan_of

    fake = _FakeJit()
    launch = _direct_launcher(fake)
    x, out = torch.zeros(64), torch.zeros(64)
    args, meta = (x, out, 64, 2.0), {"BLOCK": 16, "num_warps": 4}
    assert plan_of(launch, (4,), args, meta, None, n_lead=2) is None  # never launched: nothing to plan
    launch((4,), args, meta)  # through kernel[grid]; the launcher keeps the compiled entry
    (entry,) = launch.compiled.values()
    calls = []
    entry.c_launch, entry.lead, entry.objects = (lambda *a: calls.append(a)), ("function", "lead"), []
    launch._hooks = SimpleNamespace(launch_enter_hook=SimpleNamespace(calls=[]), launch_exit_hook=None)  # empty chains
    plan = plan_of(launch, (4,), args, meta, None, n_lead=2)
    assert plan(111, 222) is True
    assert calls == [(4, 1, 1, "stream0", "function", "lead", 111, 222, 64, 2.0, 16, "")]
    launch._hooks.launch_enter_hook.calls.append("proton")  # a profiler adds itself to the chain later
    assert plan(333, 444) is False and len(calls) == 1
    launch._hooks.launch_enter_hook = None
    launch._hooks.launch_exit_hook = print  # a hook set by assignment, not a chain
    assert plan(333, 444) is False and len(calls) == 1
    table = Plans(limit=2)
    table.add("a", plan), table.add("b", plan), table.add("none", None)
    assert set(table) == {"a", "b"}
    table.add("c", plan)
    assert set(table) == {"c"}


def test_a_plan_takes_descriptors_as_their_tensor_maps():
    """Tensor descriptors among a plan's fixed arguments go in expanded, as the raw launch passes them (their
    CUtensorMap, built once, then shape and strides); a descriptor among the per-call arguments: no plan."""
    from types import SimpleNamespace

    from triton.tools.tensor_descriptor import TensorDescriptor

    from tcourse.kernels._launch import plan_of

    fake = _FakeJit()
    launch = _direct_launcher(fake)
    x = torch.zeros(64)
    desc = TensorDescriptor(torch.zeros(8, 8), [8, 8], [8, 1], [8, 8])
    args, meta = (x, desc, 64, 2.0), {"BLOCK": 16}
    launch((4,), args, meta)
    (entry,) = launch.compiled.values()
    calls, built = [], []
    entry.c_launch, entry.lead, entry.objects = (lambda *a: calls.append(a)), ("function",), [1]
    entry.desc_meta, entry.maps = [None], {}
    entry.make_desc_arg = lambda d, m: built.append(d) or ["map", *d.shape, *d.strides]
    launch._hooks = SimpleNamespace(launch_enter_hook=None, launch_exit_hook=None)
    assert plan_of(launch, (4,), args, meta, None, n_lead=2) is None
    plan = plan_of(launch, (4,), args, meta, None, n_lead=1)
    assert plan(111) and plan(222) and built == [desc]
    assert [c[4:] for c in calls] == [("function", p, "map", 8, 8, 8, 1, 64, 2.0, 16, "") for p in (111, 222)]


def test_repeated_calls_stay_correct():
    """Third and later calls take the direct launch (AXPY, softmax and small attention: a launch plan) on a
    GPU: check them, with fresh inputs, with an input whose data pointer is not 16-byte aligned, with a
    non-contiguous one and with a changed size in between."""
    dt = torch.float32 if DEV == "cpu" else torch.float16
    for seed in range(4):
        n = 1000 if seed != 2 else 1003
        x = randn(n + 1, seed=seed)[1:] if seed == 3 else randn(n, seed=seed)  # seed 3: 4-byte offset
        y = randn(n, seed=seed + 10)
        assert rel_err(K.axpy(1.5, x, y), 1.5 * x.double() + y.double()) < 1e-6
        s = randn(37, n, seed=seed) * 4
        assert rel_err(K.softmax(s), torch.softmax(s.double(), -1)) < 1e-6
        w, b = randn(n, seed=seed + 20), randn(n, seed=seed + 30)
        ref = F.layer_norm(s.double(), (n,), w.double(), b.double(), 1e-5)
        assert rel_err(K.layernorm(s, w, b), ref) < 1e-5
        assert torch.equal(K.transpose(s), s.T)
        a, c = randn(67, 45, dtype=dt, seed=seed), randn(45, 83, dtype=dt, seed=seed + 1)
        assert rel_err(K.matmul(a, c), a.double() @ c.double()) < 2e-3
        q, k, v = (randn(1, 2, 77, 32, dtype=dt, seed=seed + i) for i in range(3))
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
        assert rel_err(K.attention(q, k, v), ref) < 3e-3
        heads_last = q.transpose(1, 2).contiguous().transpose(1, 2)  # same values, not contiguous: no plan
        assert rel_err(K.attention(heads_last, k, v), ref) < 3e-3


def test_every_pinned_config_names_one_config_of_its_kernel():
    """tcourse.kernels.pinned_configs: each entry must select exactly one config of the kernel's list
    (a typo or a config dropped from the list would otherwise raise on a GPU only)."""
    from tcourse.kernels import attention_kernels, axpy_kernels, matmul_kernels, softmax_kernels
    from tcourse.kernels.pinned_configs import PINNED

    tuned = {t.name: t for mod in (attention_kernels, axpy_kernels, matmul_kernels, softmax_kernels)
             for t in vars(mod).values() if type(t).__name__ == "Tuned"}
    checked = 0
    for device, kernels in PINNED.items():
        for name, entries in kernels.items():
            for key in entries:
                assert tuned[name].pinned(key, device) is not None
                assert tuned[name].pinned(key, "another GPU") is None
                checked += 1
    assert checked >= 10


def test_raw_launch_is_skipped_for_hooks_and_unknown_launchers():
    """The raw C launch is used only while the launch hooks are empty chains (a profiler's hook must
    still run) and only for a real Triton 3.6 CudaLauncher (anything else keeps ``CompiledKernel.run``)."""
    from types import SimpleNamespace

    from tcourse.kernels._launch import _Compiled, _raw_c_launch

    assert _raw_c_launch(_FakeCompiled()) is None
    entry = _Compiled.__new__(_Compiled)
    raw = []
    entry.kernel, entry.tail, entry.lead, entry.objects = _FakeCompiled(), (16,), ("lead",), []
    entry.c_launch, entry.c_tail, entry.drop = (lambda *a: raw.append(a)), (16,), ()
    empty = SimpleNamespace(launch_enter_hook=SimpleNamespace(calls=[]), launch_exit_hook=SimpleNamespace(calls=[]))
    entry.launch((4,), ("x",), (1234,), "s", empty)
    assert raw == [(4, 1, 1, "s", "lead", 1234, 16)] and entry.kernel.runs == []
    for hooks in (SimpleNamespace(launch_enter_hook=SimpleNamespace(calls=[print]), launch_exit_hook=empty.launch_exit_hook),
                  SimpleNamespace(launch_enter_hook=None, launch_exit_hook=print)):
        entry.launch((4,), ("x",), (1234,), "s", hooks)
    assert len(raw) == 1 and [r[9:] for r in entry.kernel.runs] == [("x", 16), ("x", 16)]


def test_lean_launch_checks_its_arguments():
    """The lean C launch builds here (Triton's C build helper, as for Triton's own launchers) and refuses a
    malformed call with a specific error before it touches the driver; without libcuda it says so."""
    from tcourse.kernels import _lean_launch

    lean = _lean_launch._build()
    assert lean is not None, "the lean launch did not build (is there a C compiler and Python.h?)"
    head = (1, 1, 1, 0, 0, 128, 0)
    for codes, values, error, says in [
            (b"pi", (0,), TypeError, "2 codes for 1 values"),
            ("pi", (0, 1), TypeError, "codes: bytes"),
            (b"pi", (0, 2**40), OverflowError, "parameter 1 does not fit"),
            (b"pB", (0, -1), OverflowError, "parameter 1 does not fit"),
            (b"pi", (1.5, 2), TypeError, "parameter 0 must be an int, got float"),
            (b"m", (1,), TypeError, "parameter 0 must be a PyCUtensorMap"),
            (b"x", (1,), ValueError, "unknown parameter code 'x'"),
            (b"p" * 65, (0,) * 65, TypeError, "at most 64")]:
        with pytest.raises(error, match=re.escape(says)):
            lean.launch(*head, codes, *values)
    if not torch.cuda.is_available():  # a well-formed call reaches the driver: none here, or no CUDA context
        try:
            launched = lean.launch(*head, b"ppifpp", 0, None, 7, 2.0, 0, 0)
        except RuntimeError as e:
            assert "libcuda.so.1" in str(e)
        else:
            assert launched is False  # a driver library but no current context: nothing launched


def test_lean_launch_types_follow_triton_36_expansion():
    """Each host tensor descriptor expands as Triton 3.6's launcher expands it (a CUtensorMap, shape as i32,
    strides as i64 when compiled for TMA; else base pointer, shape and strides twice, padding flag); the codes
    skip constexprs and end with the two scratch pointers; an fp16 scalar or a tuple has no code."""
    from tcourse.kernels._lean_launch import codes_of, expanded_types

    sig = {"a": "tensordesc<fp16[128, 64],layout>", "k": "i32", "B": "constexpr", "x": "*bf16", "s": "fp32"}
    tma = expanded_types(sig, [{"swizzle": 128}])
    assert tma == ["nvTmaDesc", "i32", "i32", "i64", "i64", "i32", "constexpr", "*bf16", "fp32"]
    assert codes_of(tma) == (b"miillipfpp", [0, 1, 2, 3, 4, 5, 7, 8])
    assert expanded_types(sig, None)[:8] == ["*fp16", "i64", "i64", "i64", "i64", "i1", "i32", "i32"]
    assert codes_of(["*fp32", "fp16"]) is None and expanded_types({"t": ("i32", "i32")}, None) is None
    assert codes_of(["i32"] * 63) is None  # 63 + 2 scratch pointers: past the C side's 64


def test_compiled_entry_and_plan_take_the_lean_launch(monkeypatch):
    """Where the lean launch applies, an entry passes function, threads and shared memory once, drops the
    arguments Triton made constants (here ``n``) and the constexpr tail, appends the two null scratch
    pointers; a plan does the same with its fixed rest; when the lean launch finds no CUDA context (False)
    the entry takes Triton's full path."""
    from types import SimpleNamespace

    from tcourse.kernels import _launch, _lean_launch

    calls, answer = [], [True]
    monkeypatch.setattr(_launch, "RAW_LAUNCH", True)
    monkeypatch.setattr(_lean_launch, "module", lambda: SimpleNamespace(launch=lambda *a: calls.append(a) or answer[0]))
    fake = _FakeJit()
    fake.compiled.src = SimpleNamespace(signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "constexpr",
                                                   "a": "fp32", "BLOCK": "constexpr", "EVICT": "constexpr"})
    fake.compiled.packed_metadata = (4, 1, 512)
    launch = _direct_launcher(fake)
    x, out = torch.zeros(64), torch.zeros(64)
    args, meta = (x, out, 1, 2.0), {"BLOCK": 16}
    launch((4,), args, meta)
    (entry,) = launch.compiled.values()
    entry.objects, entry.desc_meta = [], []
    entry._go_lean(SimpleNamespace(launch_cooperative_grid=False, launch_pdl=False))
    assert entry.lead == ("function", 128, 512, b"ppfpp") and entry.drop == (2,) and entry.c_tail == (0, 0)
    empty = SimpleNamespace(launch_enter_hook=SimpleNamespace(calls=[]), launch_exit_hook=SimpleNamespace(calls=[]))
    launch._hooks = empty
    entry.launch((4,), args, (111, 222, 1, 2.0), "s", empty)
    assert calls == [(4, 1, 1, "s", "function", 128, 512, b"ppfpp", 111, 222, 2.0, 0, 0)] and fake.compiled.runs == []
    plan = _launch.plan_of(launch, (4,), args, meta, None, n_lead=2)
    assert plan(333, 444) is True and calls[-1][8:] == (333, 444, 2.0, 0, 0)
    assert _launch.plan_of(launch, (4,), args, meta, None, n_lead=3) is None  # `n` was folded into the kernel
    answer[0] = False  # no context on this thread: nothing launched, Triton's path instead
    entry.launch((4,), args, (111, 222, 1, 2.0), "s", empty)
    assert len(fake.compiled.runs) == 1 and plan(333, 444) is False


@gpu_only
def test_the_plans_use_the_lean_launch_on_triton_36():
    """On Triton 3.6 (the H200's) the plans of AXPY, softmax and the 1024^3 Gluon matmul (tensor descriptors)
    launch through the lean C launch: the timings of bench.host measure it, not a silent fallback."""
    from tcourse.kernels import _launch, _lean_launch, axpy_kernels, softmax_kernels

    if not (_launch.RAW_LAUNCH and _lean_launch.ENABLED):
        pytest.skip("the lean launch is for Triton 3.6 (and TCOURSE_LEAN_LAUNCH is not 0)")
    x = randn(1 << 12)
    for _ in range(3):
        assert rel_err(K.axpy(0.5, x, x), 1.5 * x.double()) < 1e-6
        assert rel_err(K.softmax(x.view(64, 64)), torch.softmax(x.view(64, 64).double(), -1)) < 1e-6
    a = randn(1024, 1024, dtype=torch.float16)
    for _ in range(3):  # 1024^3 on Hopper: the Gluon kernel, its plan holding three CUtensorMaps ('m')
        assert rel_err(K.matmul(a, a), a.double() @ a.double()) < 2e-3
    lean = _lean_launch.module()
    assert lean is not None
    gluon = importlib.import_module("tcourse.kernels.gluon_matmul")
    for plans in (axpy_kernels._PLANS, softmax_kernels._PLANS, gluon._PLANS):
        assert plans and all(p.c_launch is lean.launch for p in plans.values())


@gpu_only
def test_descriptor_kernels_stay_correct_on_the_raw_launch():
    """Kernels with host tensor descriptors, called four times with fresh inputs (first: autotune or
    pinned config, second: kernel[grid], then the direct launch with cached CUtensorMaps): the TMA
    attention (D=64, S=4096), the Gluon attention the public one dispatches to (two consumers, D=128 and causal
    D=64; three, D=64 S=4096), the TMA matmul and the FP8 TMA kernel."""
    from tcourse.kernels.fp8_matmul import fp8_matmul, quantize_e4m3

    for seed in range(4):
        for shape, causal in (((1, 8, 2048, 128), True), ((1, 2, 4096, 128), False), ((4, 16, 1024, 64), True),
                              ((1, 4, 4096, 64), False)):
            q, k, v = (randn(*shape, dtype=torch.float16, seed=seed * 10 + i) for i in range(3))
            ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            assert rel_err(K.attention(q, k, v, causal=causal), ref) < 3e-3, (seed, shape)
            if shape[3] == 64 and not causal:
                assert rel_err(attention_kernels.attention_tma(q, k, v, causal), ref) < 3e-3, (seed, shape)
        a, b = randn(2048, 2048, dtype=torch.float16, seed=seed), randn(2048, 2048, dtype=torch.float16, seed=seed + 5)
        assert rel_err(K.matmul(a, b), a.double() @ b.double()) < 5e-3
        for dims in ((None, None), (1, 0)):
            qa, sa = quantize_e4m3(randn(512, 256, seed=seed), dims[0])
            qb, sb = quantize_e4m3(randn(256, 384, seed=seed + 1), dims[1])
            qb = qb.t().contiguous().t()
            ref = (qa.double() * sa.double()) @ (qb.double() * sb.double())
            assert rel_err(fp8_matmul(qa, qb, sa, sb), ref) < 1e-2, (seed, dims)


@gpu_only
def test_a_gpu_before_hopper_gets_the_triton_kernels_and_the_same_results(monkeypatch):
    """The kernels an Ampere or Ada GPU is dispatched to where Hopper takes a Gluon or TMA kernel (compiled here for
    this GPU): with its capability read as (8, 0), each public entry point, at a size where Hopper takes its fastest
    kernel, goes to its plain Triton kernel (no descriptors, no Gluon) and agrees with float64 within the tolerance
    of the Hopper kernels, which are checked first, each through the kernel Hopper dispatches it to; and each
    problem's error in the one pass is within a quarter of its error in the other."""
    from tcourse.kernels import _launch, attention_bwd_kernels as ab, fp8_matmul as f8

    a, b = randn(2048, 2048, dtype=torch.float16, seed=70), randn(2048, 2048, dtype=torch.float16, seed=71)
    a1, b1 = a[:1024, :1024].contiguous(), b[:1024, :1024].contiguous()
    q, k, v = (randn(4, 32, 1024, 64, dtype=torch.float16, seed=72 + i) for i in range(3))
    bq, bk, bv, bdo = (randn(1, 2, 4096, 128, dtype=torch.float16, seed=75 + i) for i in range(4))
    qa, sa = f8.quantize_e4m3(randn(1024, 512, seed=79))
    qb, sb = f8.quantize_e4m3(randn(512, 768, seed=80))
    qb = qb.t().contiguous().t()  # column-major B: torch._scaled_mm's layout, the one the FP8 TMA kernel takes
    qd, kd, vd = (t.double().requires_grad_() for t in (bq, bk, bv))
    grads = torch.autograd.grad(F.scaled_dot_product_attention(qd, kd, vd), (qd, kd, vd), bdo.double())
    refs = {"matmul 2048^3": a.double() @ b.double(), "matmul 1024^3": a1.double() @ b1.double(),
            "attention causal": F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True),
            **{f"attention_bwd {n}": g for n, g in zip(("dq", "dk", "dv"), grads)},
            "fp8_matmul": (qa.double() * sa.double()) @ (qb.double() * sb.double())}

    def errors():
        got = {"matmul 2048^3": K.matmul(a, b), "matmul 1024^3": K.matmul(a1, b1),
               "attention causal": K.attention(q, k, v, causal=True),
               **{f"attention_bwd {n}": g for n, g in zip(("dq", "dk", "dv"),
                                                            ab.attention_bwd(bdo, bq, bk, bv, *ab.attention_fwd(bq, bk, bv)))},
               "fp8_matmul": f8.fp8_matmul(qa, qb, sa, sb)}
        return {name: rel_err(got[name], ref) for name, ref in refs.items()}

    entered = []  # the Hopper-only entry points each pass went through, in order

    def spy(owner, attr, label):
        """Record ``label`` at each call of ``owner.attr``; the label, or None where this Triton lacks the module."""
        if owner is None:
            return None
        inner = getattr(owner, attr)

        def recorded(*args, **kwargs):
            entered.append(label)
            return inner(*args, **kwargs)
        monkeypatch.setattr(owner, attr, recorded)
        return label

    hopper_paths = {spy(matmul_kernels, "_tma", "persistent TMA matmul"),
                    spy(_launch.gluon_module("gluon_matmul"), "launch_matmul", "Gluon matmul"),
                    spy(_launch.gluon_module("gluon_attention_consumers"), "attention", "Gluon attention"),
                    spy(_launch.gluon_module("gluon_attention_bwd"), "attention_bwd", "Gluon backward"),
                    spy(f8, "fp8_matmul_tma", "FP8 TMA matmul")} - {None}
    hopper = _launch.is_hopper(a)
    assert matmul_kernels.tma_available(a) == attention_kernels.tma_available(q) == f8._tma_ready(qa, qb) == hopper
    by_stage = {}
    for stage in ("Hopper" if hopper else "as it is", "as capability 8.0"):
        if stage == "as capability 8.0":
            monkeypatch.setitem(_launch._CAPABILITY, a.get_device(), (8, 0))
            assert not matmul_kernels.tma_available(a) and matmul_kernels._gluon_matmul(a1, b1) is None
            assert not attention_kernels.tma_available(q) and not f8._tma_ready(qa, qb)
            assert not ab._gluon_measured_faster(bq, False, None, None, False, None)
        entered.clear()
        errs = by_stage[stage] = errors()
        # Hopper: each problem went through its fastest kernel (those this Triton has); before Hopper: none did
        assert set(entered) == (hopper_paths if stage == "Hopper" else set()), (stage, entered)
        for name, err in errs.items():
            assert err < 1e-2, (stage, name, err)
    first, fallback = by_stage.values()
    for name, err in first.items():  # the same results: each error within a quarter of the other pass's (H100: 1 %)
        assert abs(fallback[name] - err) <= 0.25 * err, (name, err, fallback[name])
