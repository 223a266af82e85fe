"""Attention forward at fp16 B4 H32 S1024 D64 (not causal) for Nsight Compute (issue 18, session 19): cuDNN (SDPA's
default backend), the course's ``attention`` (the Triton TMA kernel there) and the pipelined Gluon kernel, two calls
each, so that ncu shows which kernel cuDNN runs (its name gives the tile), its grid, registers, shared memory and
pipe use beside ours: the one shape where the course stays at 0.93x cuDNN in every suite run.

    ncu --kernel-name regex:'sdpa|attention' --launch-count 6 python3 scripts/profile_attention.py
"""
import torch
import torch.nn.functional as F

import tcourse
from tcourse.kernels import attention
from tcourse.kernels import gluon_attention_pipelined as pipelined

tcourse.setup(quiet=True)
q, k, v = (torch.randn(4, 32, 1024, 64, dtype=torch.float16).cuda() for _ in range(3))  # copies, not kernels
for _ in range(2):
    F.scaled_dot_product_attention(q, k, v)
for _ in range(2):
    attention(q, k, v)
for _ in range(2):
    pipelined.attention(q, k, v, False)
torch.cuda.synchronize()
