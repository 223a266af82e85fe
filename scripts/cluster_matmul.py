"""Issue 18, session 28: a persistent matmul on 2-CTA clusters whose B tiles travel by TMA multicast.

cuBLAS's 4096^3 kernel on the H200 runs on clusters of two CTAs that share each B tile: it is read from L2 once and
written into both CTAs' shared memory (TMA multicast). Triton 3.6's Gluon (the H200's) has no multicast on Hopper;
Triton 3.9's has (``tma.async_load(..., multicast=True)``, layouts split over the CTAs of a cluster, barriers shared by
two CTAs). The H200 cannot take Triton 3.9 (its wheel is larger than what travels there), so this script compiles the
kernel here with 3.9 for sm_90 (``build``) and the H200 loads that cubin and launches it through Triton 3.6's own
launcher (``ClusterKernel``): the same machine code a Triton 3.9 install would run.

The kernel (each CTA as ``matmul_persistent_kernel`` of ``probe_issue18.py``, session 21): one cluster of two CTAs
per pair of SMs walks 256 x BN tiles of C in GROUP_M order; each CTA owns 128 rows (two consumer warpgroups of 64
rows, a 1-warp loader). Each loader loads its CTA's A rows; the lead CTA's loader loads B once for both (multicast),
so before it refills a stage it waits on a barrier that the consumers of both CTAs release (``empty_pair``, one
barrier on the lead CTA, four arrivals); each loader also waits on its own CTA's ``empty`` for the A rows.

    python scripts/cluster_matmul.py build .gpu/cluster_matmul     # here, Triton 3.9
    python scripts/probe_issue18.py mccheck mc                     # on the H200 (Triton 3.6), see there
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

CONFIGS = {"cluster 256x256x64 3st": {"CM": 128, "BN": 256, "BK": 64, "STAGES": 3, "GROUP_M": 8},
           "cluster 256x256x32 6st": {"CM": 128, "BN": 256, "BK": 32, "STAGES": 6, "GROUP_M": 8}}
CONSUMER_REGS = 232
ARG_NAMES = ["a_desc", "b_desc", "c_desc", "M", "N", "K", "STAGES", "GROUP_M", "CONSUMER_REGS"]


def _kernel():
    """The Gluon kernel (Triton >= 3.9: multicast, CGA layouts, two-CTA barriers); defined on demand so the loader
    below runs on a Triton without them."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma, \
        warpgroup_mma_wait

    @gluon.jit
    def _tile(t, num_m, num_n, GROUP_M: gl.constexpr):
        per_group = GROUP_M * num_n
        first_m = (t // per_group) * GROUP_M
        rows_here = gl.minimum(num_m - first_m, GROUP_M)
        return first_m + (t % per_group) % rows_here, (t % per_group) // rows_here

    @gluon.jit
    def _loader(a_desc, b_desc, a_bufs, b_bufs, ready, empty, empty_pair, num_m, num_n, k_tiles,
                GROUP_M: gl.constexpr):
        CM: gl.constexpr = a_desc.block_shape[0]  # rows of one A load over the cluster: half of them in each CTA
        BK: gl.constexpr = a_desc.block_shape[1]
        BN: gl.constexpr = b_desc.block_shape[1]
        STAGES: gl.constexpr = b_bufs.shape[0]
        nbytes: gl.constexpr = 2 * a_desc.nbytes_per_cta + b_desc.nbytes_per_cta
        it = 0
        for t in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
            pm, pn = _tile(t, num_m, num_n, GROUP_M)
            for k in range(k_tiles):
                s = it % STAGES
                ph = ((it // STAGES) & 1) ^ 1
                mbarrier.wait(empty.index(s), ph)  # this CTA's consumers have released stage s (its A rows)
                mbarrier.wait(empty_pair.index(s), ph)  # lead CTA only: so have the other CTA's (B lands in both)
                mbarrier.expect(ready.index(s), nbytes)
                tma.async_load(a_desc, [pm * 2 * CM, k * BK], ready.index(s), a_bufs.index(2 * s))
                tma.async_load(a_desc, [pm * 2 * CM + CM, k * BK], ready.index(s), a_bufs.index(2 * s + 1))
                tma.async_load(b_desc, [k * BK, pn * BN], ready.index(s), b_bufs.index(s), multicast=True)
                it += 1

    @gluon.jit
    def _consumer(a_bufs, b_bufs, ready, empty, empty_pair, c_desc, c_tile, half, num_m, num_n, k_tiles,
                  GROUP_M: gl.constexpr):
        CM: gl.constexpr = c_desc.block_shape[0]
        BN: gl.constexpr = c_desc.block_shape[1]
        STAGES: gl.constexpr = b_bufs.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16], cga_layout=c_desc.layout.cga_layout)
        it = 0
        for t in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
            pm, pn = _tile(t, num_m, num_n, GROUP_M)
            acc = gl.zeros((CM, BN), gl.float32, layout)
            for k in range(k_tiles):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                a, b = a_bufs.index(2 * s + half), b_bufs.index(s)
                acc = warpgroup_mma(a, b, acc, is_async=True)
                acc, a, b = warpgroup_mma_wait(num_outstanding=1, deps=(acc, a, b))
                if k > 0:
                    mbarrier.arrive(empty.index((it - 1) % STAGES))
                    mbarrier.arrive(empty_pair.index((it - 1) % STAGES))
                it += 1
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(empty.index((it - 1) % STAGES))
            mbarrier.arrive(empty_pair.index((it - 1) % STAGES))
            tma.store_wait(0)  # this consumer's previous store has read c_tile
            c_tile.store(acc.to(c_tile.dtype))
            fence_async_shared()
            tma.async_store(c_desc, [pm * 2 * CM + half * CM, pn * BN], c_tile)
        tma.store_wait(0)

    @gluon.jit
    def matmul_cluster_kernel(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr, GROUP_M: gl.constexpr,
                              CONSUMER_REGS: gl.constexpr):
        CM: gl.constexpr = c_desc.block_shape[0]
        BN: gl.constexpr = c_desc.block_shape[1]
        BK: gl.constexpr = a_desc.block_shape[1]
        dtype: gl.constexpr = a_desc.dtype
        num_m = gl.cdiv(M, 2 * CM)
        num_n = gl.cdiv(N, BN)
        k_tiles = gl.cdiv(K, BK)
        a_bufs = gl.allocate_shared_memory(dtype, [2 * STAGES, CM, BK], a_desc.layout)
        b_bufs = gl.allocate_shared_memory(dtype, [STAGES, BK, BN], b_desc.layout)
        c_tiles = gl.allocate_shared_memory(dtype, [2, CM, BN], c_desc.layout)
        ready = mbarrier.allocate_mbarrier(batch=STAGES)
        empty = mbarrier.allocate_mbarrier(batch=STAGES)
        empty_pair = mbarrier.allocate_mbarrier(batch=STAGES, two_ctas=True)
        for s in gl.static_range(STAGES):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=2)  # the CTA's two consumers
            mbarrier.init(empty_pair.index(s), count=2)  # doubled for the pair: both CTAs' consumers
        fence_async_shared()
        first = (a_bufs, b_bufs, ready, empty, empty_pair, c_desc, c_tiles.index(0), 0, num_m, num_n, k_tiles,
                 GROUP_M)
        second = (a_bufs, b_bufs, ready, empty, empty_pair, c_desc, c_tiles.index(1), 1, num_m, num_n, k_tiles,
                  GROUP_M)
        loads = (a_desc, b_desc, a_bufs, b_bufs, ready, empty, empty_pair, num_m, num_n, k_tiles, GROUP_M)
        gl.warp_specialize([(_consumer, first), (_consumer, second), (_loader, loads)], [4, 1], [CONSUMER_REGS, 24])

    return matmul_cluster_kernel


def compile_sm90(name: str, dtype: str):
    """One config (a key of CONFIGS) for "fp16" or "bf16", compiled for sm_90 by Triton >= 3.9: returns Triton's
    compiled kernel (PTX and cubin in ``.asm``, shared memory and CTAs in ``.metadata``) and its launch entry for
    kernels.json (everything ``ClusterKernel`` needs but the cubin)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource

    cfg = CONFIGS[name]
    gdt = {"fp16": gl.float16, "bf16": gl.bfloat16}[dtype]
    cm, bn, bk = cfg["CM"], cfg["BN"], cfg["BK"]
    split, both = [[1, 0]], [[0, 0]]  # A and C: rows split over the two CTAs; B: the same tile in both
    la = gl.NVMMASharedLayout.get_default_for([cm, bk], gdt, cga_layout=split)
    lb = gl.NVMMASharedLayout.get_default_for([bk, bn], gdt, cga_layout=both)
    lc = gl.NVMMASharedLayout.get_default_for([cm, bn], gdt, cga_layout=split)
    sig = {"a_desc": f"tensordesc<{dtype}[{cm},{bk}],{la!r}>", "b_desc": f"tensordesc<{dtype}[{bk},{bn}],{lb!r}>",
           "c_desc": f"tensordesc<{dtype}[{cm},{bn}],{lc!r}>", "M": "i32", "N": "i32", "K": "i32",
           "STAGES": "constexpr", "GROUP_M": "constexpr", "CONSUMER_REGS": "constexpr"}
    consts = {"STAGES": cfg["STAGES"], "GROUP_M": cfg["GROUP_M"], "CONSUMER_REGS": CONSUMER_REGS}
    k = triton.compile(GluonASTSource(fn=_kernel(), signature=sig, constexprs=consts, attrs={}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": 2})
    md = k.metadata
    entry = {"config": name, "dtype": dtype, "cubin": f"{name.replace(' ', '_')}_{dtype}.cubin", "name": md.name,
             "shared": md.shared, "num_warps": md.num_warps, "num_ctas": md.num_ctas,
             "tensordesc_meta": md.tensordesc_meta, "signature": sig, "constants": consts,
             "blocks": [[cm, bk], [bk, bn], [cm, bn]],
             "scratch": [md.global_scratch_size, md.global_scratch_align, md.profile_scratch_size,
                         md.profile_scratch_align]}
    return k, entry


def build(out: Path) -> None:
    """Compile every config for fp16 and bf16 for sm_90 (Triton >= 3.9) into OUT: one cubin each and kernels.json."""
    import triton

    out.mkdir(parents=True, exist_ok=True)
    index = {"triton": triton.__version__, "kernels": []}
    for name in CONFIGS:
        for dtype in ("fp16", "bf16"):
            k, entry = compile_sm90(name, dtype)
            (out / entry["cubin"]).write_bytes(k.asm["cubin"])
            index["kernels"].append(entry)
            print(f"{name} {dtype}: shared {entry['shared']} B, {entry['num_warps']} warps x {entry['num_ctas']} CTAs",
                  flush=True)
    (out / "kernels.json").write_text(json.dumps(index, indent=1))


class ClusterKernel:
    """One built cubin, launched through the running Triton's launcher (3.6 on the H200): the descriptors are
    filled with the block sizes and swizzles that 3.9 recorded at compile time."""

    def __init__(self, folder: Path, entry: dict):
        import torch
        import triton
        from triton.backends.nvidia.driver import CudaLauncher

        self.entry = entry
        dev = torch.cuda.current_device()
        cubin = (folder / entry["cubin"]).read_bytes()
        _, self.function, self.regs, self.spills, _ = triton.runtime.driver.active.utils.load_binary(
            entry["name"], cubin, entry["shared"], dev)
        gs, ga, ps, pa = entry["scratch"]
        if gs or ps:
            raise RuntimeError(f"{entry['cubin']}: the kernel wants scratch memory ({gs}, {ps} B): not handled here")
        src = SimpleNamespace(constants=entry["constants"], signature=entry["signature"],
                              fn=SimpleNamespace(arg_names=ARG_NAMES))
        md = SimpleNamespace(tensordesc_meta=entry["tensordesc_meta"], num_ctas=entry["num_ctas"],
                             global_scratch_size=gs, global_scratch_align=ga, profile_scratch_size=ps,
                             profile_scratch_align=pa, launch_cooperative_grid=False, launch_pdl=False)
        self.launcher = CudaLauncher(src, md)
        self.packed = (entry["num_warps"], entry["num_ctas"], entry["shared"])
        # clusters that fit at once: two CTAs of ~210 KB of shared memory need two free SMs of one GPC, and not
        # every GPC has an even number of SMs, so this can be fewer than half the SMs (a persistent grid larger
        # than it would run its last clusters in a second wave)
        self.max_clusters = triton.runtime.driver.active.utils.cuOccupancyMaxActiveClusters(
            self.function, entry["shared"], entry["num_ctas"])

    def prepare(self, a, b):
        """Descriptors built once for ``a @ b``: returns a call that launches the kernel and returns C."""
        import torch
        from triton.tools.tensor_descriptor import TensorDescriptor

        (M, K), N = a.shape, b.shape[1]
        c = a.new_empty((M, N))
        descs = [TensorDescriptor.from_tensor(t, blk) for t, blk in zip((a, b, c), self.entry["blocks"])]
        cm, bn = self.entry["blocks"][2]
        tiles = -(-M // (2 * cm)) * -(-N // bn)
        grid = min(self.max_clusters, tiles)  # clusters; the launcher starts two CTAs for each
        consts = self.entry["constants"]
        args = (*descs, M, N, K, consts["STAGES"], consts["GROUP_M"], consts["CONSUMER_REGS"])
        stream = torch.cuda.current_stream().cuda_stream

        def call():
            self.launcher(grid, 1, 1, stream, self.function, self.packed, None, None, None, *args)
            return c
        return call


def load(folder: Path) -> dict:
    """(config, dtype) -> ClusterKernel for every cubin in FOLDER/kernels.json."""
    index = json.loads((folder / "kernels.json").read_text())
    return {(e["config"], e["dtype"]): ClusterKernel(folder, e) for e in index["kernels"]}


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python scripts/cluster_matmul.py build OUT_DIR")
    build(Path(sys.argv[2]))
