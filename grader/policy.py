"""Static audit of the answer cells, in the grader's process, before anything runs.

The answer cells run in the same Python process as the grader's harness cells, so code in them
could rewrite what runs after it: monkeypatch torch or the harness, register IPython input
transformers, patch ``showtraceback``, install trace hooks. None of that is ever needed to write a
Triton kernel, so an answer cell that contains such a construct is refused before it runs, with
the line and the reason (verdict ``failed``, 0 points).

Refused: IPython syntax (``%magic``, ``!shell``: answer cells must be plain Python); any attribute
assignment or deletion (``torch.allclose = ...``, ``torch.Tensor.__eq__ = ...``); the built-ins
that reach or rewrite code and namespaces (``get_ipython``, ``exec``, ``eval``, ``compile``,
``__import__``, ``globals``, ``locals``, ``vars``, ``getattr``, ``setattr``, ``delattr``,
``breakpoint``); dunder and private attributes and names (``x.__class__``, ``torch._C``; ``os._exit``
is allowed, it only kills the student's own kernel); attributes that reach the interpreter's
machinery (``sys.modules``, ``settrace``, ``f_globals``, ``torch.library`` ...); imports of
IPython/Jupyter, the grader, and of modules whose purpose is introspection or patching (``gc``,
``ctypes``, ``inspect``, ``importlib``, ``unittest.mock`` ...).

Faults (infinite loops, ``os._exit``, forks, huge allocations, output floods) are not refused here:
the worker's limits and the sandbox deal with them at run time.
"""
from __future__ import annotations

import ast

NAMES = {"get_ipython", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "getattr",
         "setattr", "delattr", "breakpoint", "__builtins__", "__loader__", "__spec__"}
MODULES = {"IPython", "ipykernel", "jupyter_client", "jupyter_core", "nbclient", "zmq", "traitlets", "grader",
           "gc", "ctypes", "cffi", "inspect", "importlib", "builtins", "unittest", "pickle", "marshal", "dill",
           "code", "codeop", "runpy", "pdb", "bdb", "trace", "tracemalloc", "types", "site", "sitecustomize",
           "faulthandler", "pytest"}
ATTRIBUTES = {"modules", "meta_path", "path_hooks", "path_importer_cache", "settrace", "setprofile",
              "f_globals", "f_locals", "f_back", "f_code", "gi_frame", "cr_frame", "tb_frame", "func_globals",
              "input_transformers_post", "input_transformers_cleanup", "ast_transformers", "showtraceback",
              "library", "ops", "overrides", "hub", "cpp_extension", "load_inline"}
PRIVATE_OK = {"_exit"}


def _dunder_or_private(name: str) -> bool:
    return name.startswith("_") and name not in PRIVATE_OK


def audit_source(cell_id: str, src: str) -> list[str]:
    """Reasons (Chinese, with the line) why this answer cell is refused; empty when it is fine."""
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        return [f"答案单元 {cell_id} 第 {e.lineno} 行不是合法的 Python（{e.msg}）：评分时答案单元只能是纯 Python，"
                f"不能用 %magic 或 !shell 命令"]
    found = []

    def bad(node, what):
        found.append(f"答案单元 {cell_id} 第 {getattr(node, 'lineno', '?')} 行：{what}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                if m.split(".")[0] in MODULES or any(_dunder_or_private(p) for p in m.split(".")):
                    bad(node, f"不允许 import {m}")
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if a.name in ATTRIBUTES or a.name in NAMES or _dunder_or_private(a.name) or a.name == "*":
                        bad(node, f"不允许 from {node.module} import {a.name}")
        elif isinstance(node, ast.Name):
            if node.id in NAMES:
                bad(node, f"不允许使用 {node.id}")
            elif node.id.startswith("__") or node.id.startswith("_tcourse"):
                bad(node, f"不允许使用名字 {node.id}")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                bad(node, f"不允许给属性 .{node.attr} 赋值或删除它（会改动 torch/triton/评分代码的行为）")
            elif node.attr in ATTRIBUTES:
                bad(node, f"不允许访问 .{node.attr}")
            elif _dunder_or_private(node.attr):
                bad(node, f"不允许访问私有或特殊属性 .{node.attr}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name.startswith("__") and node.name != "__init__":
                bad(node, f"不允许定义特殊方法 {node.name}")
        elif isinstance(node, ast.Global):
            bad(node, "不允许 global 语句")
    return found


def audit(cells: dict[str, str]) -> list[str]:
    """Every reason, over all answer cells (cell id -> source)."""
    return [r for cid, src in cells.items() for r in audit_source(cid, src)]
