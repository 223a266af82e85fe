"""One backward call per kernel for Nsight Compute (issue 18, session 9): B4 H32 S4096 fp16, three calls each
so that ``ncu --launch-skip 2 --launch-count 1`` sees a warm one.

    ncu --kernel-name attention_bwd_kernel --launch-skip 2 --launch-count 1 python3 scripts/profile_gbwd.py 128 gluon
"""
import sys

import torch

from tcourse.kernels import attention_bwd_kernels as AB

D, kind = int(sys.argv[1]), sys.argv[2]
q, k, v, do = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(4))
o, lse = AB.attention_fwd(q, k, v)
for _ in range(3):
    AB.attention_bwd(do, q, k, v, o, lse, gluon=kind == "gluon")
torch.cuda.synchronize()
