import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent('''
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import triton, triton.language as tl
    from tcourse.compile_batch import compile_many

    @triton.jit
    def dot_kernel(a_ptr, c_ptr, K, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k0 in range(0, K, BLOCK):
            a = tl.load(a_ptr + offs[:, None] * K + k0 + offs[None, :], mask=k0 + offs[None, :] < K, other=0.0)
            acc = tl.dot(a, tl.trans(a), acc)
        tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], acc)

    good, bad = compile_many(dot_kernel, [(("*fp16", "*fp32", 256), dict(BLOCK=64, num_stages=3)),
                                          (("*fp16", "*fp32", 256), dict(BLOCK=100))])
    print("REPORT", good.shared_bytes > 0, good.registers is not None, "HGMMA" in good.sass() or "HMMA" in good.sass())
    print("ERROR", isinstance(bad, str) and "power of 2" in bad)
''')


def test_compile_many_under_the_interpreter(tmp_path):
    script = tmp_path / "compile_probe.py"   # @triton.jit needs its source in a file
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_DEFAULT_FP_FUSION="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert "REPORT True True True" in out.stdout, out.stderr[-2000:]
    assert "ERROR True" in out.stdout, out.stderr[-2000:]
