"""1024^3 matmuls for Nsight Compute (issue 18, session 11): cuBLAS (``torch.matmul``) and the course's
``matmul``, fp16 then bf16, three calls each, so that ncu sees which kernel cuBLAS picks (its name gives the
tile, cluster and split), its grid and its duration beside ours.

    ncu --launch-count 16 python3 scripts/profile_matmul.py
"""
import torch

import tcourse
from tcourse.kernels import matmul

tcourse.setup(quiet=True)
for dt in (torch.float16, torch.bfloat16):
    a, b = (torch.randn(1024, 1024, dtype=dt).cuda() for _ in range(2))  # copies, not kernels: ncu counts only matmuls
    for _ in range(3):
        torch.matmul(a, b)
    for _ in range(3):
        matmul(a, b)
torch.cuda.synchronize()
