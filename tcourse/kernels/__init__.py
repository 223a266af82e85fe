"""The course's reference kernels: what learners measure themselves against and what the grader's
performance points compare to.

Each function takes torch tensors and returns a new tensor, like its torch counterpart:

- ``axpy(a, x, y)``            a * x + y, elementwise
- ``softmax(x)``               row-wise over the last dim of a 2-D tensor (rows too wide for one
                                 block go through the online multi-block kernel)
- ``matmul(a, b)``             fp16/bf16/fp32 2-D; persistent TMA kernel on Hopper, blocked kernel elsewhere
- ``layernorm(x, w, b, eps)``  over the last dim of a 2-D tensor
- ``transpose(x)``             contiguous ``x.T`` of a 2-D tensor
- ``attention(q, k, v, causal=False, sm_scale=None)``  FlashAttention forward, q/k/v of shape (B, H, S, D)

Chapters 8-10 import their kernels from the modules directly: ``fp8_matmul`` (e4m3 matmul with per-tensor
or row-wise scales), ``dropout_kernels`` (seeded dropout, mask regenerated in backward),
``layernorm_bwd_kernels`` (LayerNorm forward with saved statistics and backward), ``attention_bwd_kernels``
(FlashAttention-2 forward with lse and backward), ``torch_ops`` (``tcourse::layernorm`` as a ``triton_op``
with autograd), and the Gluon kernels for Hopper ``gluon_matmul``, ``gluon_attention``,
``gluon_attention_pipelined`` and ``gluon_attention_consumers`` (not imported here: Gluon is experimental and
GPU-specific; ``attention`` imports the last one on first use where it dispatches to it).

On a machine without a GPU, importing this package turns Triton's interpreter on first (through
``tcourse.runtime``), so the same functions run on CPU tensors.
"""
from ..runtime import current as _current

_current()  # decides GPU or interpreter before `import triton` below

from .attention_kernels import attention  # noqa: E402
from .axpy_kernels import axpy  # noqa: E402
from .layernorm_kernels import layernorm  # noqa: E402
from .matmul_kernels import matmul  # noqa: E402
from .softmax_kernels import softmax  # noqa: E402
from .transpose_kernels import transpose  # noqa: E402

__all__ = ["attention", "axpy", "layernorm", "matmul", "softmax", "transpose"]
