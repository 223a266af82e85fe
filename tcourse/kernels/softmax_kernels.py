"""Row-wise softmax of a 2-D tensor.

Rows that fit one block (up to ``MAX_BLOCK`` columns) are read once and written once by one program
(several short rows share a program). Wider rows go through the online multi-block kernel: each
program reduces one chunk of a row to a (max, sum of exp) pair, a second launch combines a row's
pairs and writes its chunk, so each row is spread over many programs and never has to fit a block.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import Plans, Tuned, cdiv, check_2d, current_device, next_power_of_2, on_gpu

LOG2E = 1.4426950408889634
MAX_BLOCK = 16384  # widest row (elements, after rounding up to a power of two) done by one block
ONLINE_CHUNK = 8192  # columns per program in the multi-block kernel
# The cache hint on x's load depends on its size next to L2 (60 MB on the H200). Measured there (kernel time, the
# same kernel with and without a hint; results/h200/issue18/smv.json, smh.json, hints2.json, hints3.json): up to
# 16 MiB (fp32 4096 x 1000, 4096 x 1024) evict_first is 2-3 % faster than none (within the +-2 % spread); from
# 32 MiB it is 1-4 % slower, while evict_last is level at 64 MiB, 1 % faster at 128 MiB and 2.8 % faster from
# 256 MiB (4096 x 16384 and the online kernel; AXPY's loads 1.1 % at 64 and 512 MiB). Chapter 3 has the tables.
EVICT_FIRST_MAX_BYTES = 16 * 2**20


def _evict(x: torch.Tensor) -> str:
    return "evict_first" if x.numel() * x.element_size() <= EVICT_FIRST_MAX_BYTES else "evict_last"


def _vec(*ints: int, elem_bytes: int) -> int:
    """Largest element count v <= 16 bytes that divides every value: lets the compiler use 16-byte
    loads even when a row length such as 1000 is not a multiple of 16 (we pass value // v)."""
    bits = 0
    for i in ints:  # a power of two divides every value iff it divides their bitwise or
        bits |= i
    v = max(1, 16 // elem_bytes)
    while v > 1 and bits % v:
        v //= 2
    return v


@triton.jit
def softmax_rows_kernel(x_ptr, out_ptr, n_rows, n_cols_v, stride_x_v, stride_o_v,
                        BLOCK_N: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr, EVICT: tl.constexpr):
    # n_cols and the strides come divided by VEC; multiplying back by the constant VEC tells the
    # compiler they are multiples of VEC, so loads and stores can be 16 bytes wide.
    n_cols = n_cols_v * VEC
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * (stride_x_v * VEC) + cols[None, :], mask=mask,
                other=-float("inf"), eviction_policy=EVICT).to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp2((x - m[:, None]) * 1.4426950408889634)
    inv = 1.0 / tl.sum(e, axis=1)
    y = e * inv[:, None]
    tl.store(out_ptr + rows[:, None] * (stride_o_v * VEC) + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_chunk_stats_kernel(x_ptr, m_ptr, s_ptr, n_cols_v, stride_x_v, n_chunks,
                               CHUNK: tl.constexpr, VEC: tl.constexpr):
    """Pass 1 of the online softmax: (max, sum of exp(x - max)) of one chunk of one row."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1)
    n_cols = n_cols_v * VEC
    cols = c * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * (stride_x_v * VEC) + cols, mask=cols < n_cols,
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp2((x - m) * 1.4426950408889634), axis=0)
    tl.store(m_ptr + row * n_chunks + c, m)
    tl.store(s_ptr + row * n_chunks + c, s)


@triton.jit
def softmax_chunk_write_kernel(x_ptr, out_ptr, m_ptr, s_ptr, n_rows, n_cols_v, stride_x_v, stride_o_v,
                               n_chunks, CHUNK: tl.constexpr, BLOCK_C: tl.constexpr, VEC: tl.constexpr,
                               EVICT: tl.constexpr):
    """Pass 2: combine the row's chunk statistics (online-softmax rescaling), write one chunk."""
    # Rows in reverse order: the rows pass 1 read last are the likeliest to still be in L2.
    row = (n_rows - 1 - tl.program_id(0)).to(tl.int64)
    c = tl.program_id(1)
    part = tl.arange(0, BLOCK_C)
    pm = tl.load(m_ptr + row * n_chunks + part, mask=part < n_chunks, other=-float("inf"))
    ps = tl.load(s_ptr + row * n_chunks + part, mask=part < n_chunks, other=0.0)
    m = tl.max(pm, axis=0)
    inv = 1.0 / tl.sum(ps * tl.exp2((pm - m) * 1.4426950408889634), axis=0)
    n_cols = n_cols_v * VEC
    cols = c * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * (stride_x_v * VEC) + cols, mask=mask, other=0.0,
                eviction_policy=EVICT).to(tl.float32)
    y = tl.exp2((x - m) * 1.4426950408889634) * inv
    tl.store(out_ptr + row * (stride_o_v * VEC) + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _prune_rows(configs, named_args, **kwargs):
    """Keep configs whose tile fits one block and gives each thread 4 to 64 elements."""
    block_n = kwargs.get("BLOCK_N", named_args.get("BLOCK_N"))
    kept = []
    for c in configs:
        elems = c.kwargs["ROWS"] * block_n
        if elems <= MAX_BLOCK and 4 <= elems // (c.num_warps * 32) <= 64:
            kept.append(c)
    return kept or [configs[0]]


_ROW_CONFIGS = [triton.Config({"ROWS": r}, num_warps=w) for r in (1, 2, 4, 8, 16) for w in (4, 8, 16, 32)]
softmax_rows_tuned = Tuned("softmax_rows", softmax_rows_kernel, _ROW_CONFIGS, key=["n_cols_v", "BLOCK_N", "VEC"], prune=_prune_rows)
_WARPS = [triton.Config({}, num_warps=w) for w in (4, 8, 16)]
softmax_chunk_stats_tuned = Tuned("softmax_chunk_stats", softmax_chunk_stats_kernel, _WARPS, key=["n_cols_v", "CHUNK"])
softmax_chunk_write_tuned = Tuned("softmax_chunk_write", softmax_chunk_write_kernel, _WARPS, key=["n_cols_v", "CHUNK"])


def softmax_one_block(x: torch.Tensor) -> torch.Tensor:
    """Each row read once into one program's registers (rows up to MAX_BLOCK columns)."""
    check_2d("softmax", x)
    return _one_block(x, next_power_of_2(x.shape[1]))


_PLANS = Plans()  # (shape, dtype, device, x 16-byte aligned) -> plan of the launch: x contiguous, out aligned


def _one_block(x: torch.Tensor, block_n: int) -> torch.Tensor:
    if block_n > MAX_BLOCK:
        raise ValueError(f"{x.shape[1]} columns do not fit one block of {MAX_BLOCK}: use softmax_online")
    n_rows, n_cols = x.shape
    contiguous = x.is_contiguous()
    if contiguous:  # empty_like: less host time than torch.empty(shape, ...) (3.5 vs 5.7 us on the H200's host)
        out = torch.empty_like(x)
    else:
        x = x if x.stride(-1) == 1 else x.contiguous()
        out = x.new_empty((n_rows, n_cols))
    if n_rows == 0 or n_cols == 0:
        return out
    sx = x.stride(0)  # out is contiguous: its row stride is n_cols
    vec = _vec(n_cols, sx, elem_bytes=x.element_size())
    args = (x, out, n_rows, n_cols // vec, sx // vec, n_cols // vec)
    if on_gpu(x):
        key, grid = (n_rows, n_cols, vec, x.dtype), lambda m: (cdiv(n_rows, m["ROWS"]),)
        softmax_rows_tuned.launch(key, grid, *args, BLOCK_N=block_n, VEC=vec, EVICT=_evict(x))
        if contiguous and not out.data_ptr() & 15:
            plan = softmax_rows_tuned.plan(key, grid, *args, n_lead=2)
            _PLANS.add((x.shape, x.dtype, current_device(), not x.data_ptr() & 15), plan)
    else:
        softmax_rows_kernel[(n_rows,)](*args, BLOCK_N=block_n, ROWS=1, VEC=vec, EVICT="")
    return out


def softmax_online(x: torch.Tensor, chunk: int = ONLINE_CHUNK) -> torch.Tensor:
    """Multi-block online softmax: any row width, two reads and one write of the matrix."""
    check_2d("softmax", x)
    x = x if x.stride(-1) == 1 else x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    n_chunks = cdiv(n_cols, chunk)
    stats_m = torch.empty((n_rows, n_chunks), dtype=torch.float32, device=x.device)
    stats_s = torch.empty_like(stats_m)
    vec = _vec(n_cols, x.stride(0), out.stride(0), elem_bytes=x.element_size())
    grid = (n_rows, n_chunks)
    stats_args = (x, stats_m, stats_s, n_cols // vec, x.stride(0) // vec, n_chunks)
    write_args = (x, out, stats_m, stats_s, n_rows, n_cols // vec, x.stride(0) // vec, out.stride(0) // vec,
                  n_chunks)
    block_c = next_power_of_2(n_chunks)
    if on_gpu(x):
        key = (n_rows, n_cols, vec, chunk, x.dtype)
        softmax_chunk_stats_tuned.launch(key, lambda m: grid, *stats_args, CHUNK=chunk, VEC=vec)
        softmax_chunk_write_tuned.launch(key, lambda m: grid, *write_args, CHUNK=chunk, BLOCK_C=block_c, VEC=vec,
                                         EVICT=_evict(x))
    else:
        softmax_chunk_stats_kernel[grid](*stats_args, CHUNK=chunk, VEC=vec)
        softmax_chunk_write_kernel[grid](*write_args, CHUNK=chunk, BLOCK_C=block_c, VEC=vec, EVICT="")
    return out


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D tensor (fp32/fp16/bf16; computed in fp32)."""
    if _PLANS and x.is_cuda and x.is_contiguous():  # a shape launched before: only the two pointers change
        xp = x.data_ptr()
        plan = _PLANS.get((x.shape, x.dtype, current_device(), not xp & 15))
        if plan is not None:
            out = torch.empty_like(x)
            op = out.data_ptr()
            if not op & 15 and plan(xp, op):  # planned for a 16-byte aligned output (what the allocator gives)
                return out
    check_2d("softmax", x)
    block_n = next_power_of_2(x.shape[1])
    if block_n <= MAX_BLOCK:
        return _one_block(x, block_n)
    return softmax_online(x)
