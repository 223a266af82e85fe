"""tcourse: the helper package every notebook of the Triton course imports.

Importing it loads neither torch nor triton: ``tcourse.setup()`` must decide whether to switch
Triton's interpreter on *before* ``import triton``.

Modules: runtime (mode, sizes, environment table), bench (GPU timing beside torch),
recorded (H200 recordings), compile_info (sm_90 compilation on any machine), check
(assert_close with a report), viz (pictures), widgets (slider panels), nbtools (notebook hygiene).
"""
from .runtime import setup

__all__ = ["setup"]
