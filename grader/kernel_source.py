"""The learner's kernels alone: a module with their ``@triton.jit`` functions and constexpr globals, nothing else.

The replay imports this module instead of running the answer cells, so no host code of the learner's
(wrapper, helpers, module-level statements) runs there: only the kernels, which the replay then
compiles for sm_90 before launching them. Kept: ``@triton.jit`` / ``@triton.jit(...)`` functions with
literal defaults and decorator arguments, and ``NAME = tl.constexpr(<literal>)`` assignments.
"""
from __future__ import annotations

import ast

HEADER = "import math\nimport triton\nimport triton.language as tl\n\n"


class NotExtractable(ValueError):
    """A kernel whose definition cannot stand on its own (a computed default, a decorator argument...)."""


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def _jit_decorator(d: ast.AST) -> bool:
    target = d.func if isinstance(d, ast.Call) else d
    return ast.unparse(target) in ("triton.jit", "jit")


def _constexpr_global(node: ast.AST) -> bool:
    return (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) in ("tl.constexpr", "triton.language.constexpr")
            and len(node.value.args) == 1 and not node.value.keywords and _literal(node.value.args[0]))


def extract(sources: list[str]) -> tuple[str, list[str]]:
    """(module source, kernel names) from the answer cells' sources, in cell order."""
    parts, names = [], []
    for src in sources:
        for node in ast.parse(src).body:
            if isinstance(node, ast.FunctionDef) and node.decorator_list and all(_jit_decorator(d) for d in node.decorator_list):
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and not all(_literal(k.value) for k in d.keywords) or \
                            isinstance(d, ast.Call) and d.args:
                        raise NotExtractable(f"kernel {node.name}: the arguments of @triton.jit(...) must be literals")
                for dflt in (*node.args.defaults, *[k for k in node.args.kw_defaults if k is not None]):
                    if not _literal(dflt):
                        raise NotExtractable(f"kernel {node.name}: default values of its parameters must be literals")
                node.decorator_list = [ast.parse("triton.jit", mode="eval").body if ast.unparse(d) == "jit" else d
                                       for d in node.decorator_list]
                parts.append(ast.unparse(node))
                names.append(node.name)
            elif _constexpr_global(node):
                parts.append(ast.unparse(node))
    return HEADER + "\n\n\n".join(parts) + "\n", names
