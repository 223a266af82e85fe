"""One backward call per kernel for Nsight Compute (issue 18, sessions 9 and 10): B4 H32 S4096 fp16, three calls
each so that ``ncu --launch-skip`` sees a warm one (the Triton backward launches two kernels a call).

    ncu --kernel-name attention_bwd_kernel --launch-skip 2 --launch-count 1 python3 scripts/profile_gbwd.py 128 gluon
    ncu --kernel-name "regex:attention_bwd_(dkdv|dq)_kernel" --launch-skip 4 --launch-count 2 python3 scripts/profile_gbwd.py 128 triton causal
"""
import sys

import torch

from tcourse.kernels import attention_bwd_kernels as AB

D, kind, causal = int(sys.argv[1]), sys.argv[2], sys.argv[3:] == ["causal"]
q, k, v, do = (torch.randn(4, 32, 4096, D, device="cuda", dtype=torch.float16) for _ in range(4))
o, lse = AB.attention_fwd(q, k, v, causal)
for _ in range(3):
    AB.attention_bwd(do, q, k, v, o, lse, causal, gluon=kind == "gluon")
torch.cuda.synchronize()
