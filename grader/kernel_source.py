"""The learner's kernels alone: a module with their ``@triton.jit`` functions and constexpr globals, nothing else.

The replay imports this module instead of running the answer cells, so no host code of the learner's
(wrapper, helpers, module-level statements) runs there: only the kernels, which the replay then
compiles for sm_90 before launching them. Kept: ``@triton.jit`` / ``@triton.jit(...)`` functions with
literal defaults and decorator arguments (under ``@triton.autotune``/``@triton.heuristics``, only the
jit function: the launch log holds the configuration each launch used), and ``NAME = tl.constexpr(...)``
assignments whose value is constant arithmetic: literals, ``math.*``, and constexpr globals defined above.
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


def _tuning_decorator(d: ast.AST) -> bool:
    return isinstance(d, ast.Call) and ast.unparse(d.func) in ("triton.autotune", "autotune", "triton.heuristics", "heuristics")


def _constant(node: ast.AST, known: set[str]) -> bool:
    """Literals, arithmetic, ``math.NAME`` and ``math.f(...)`` of those, and constexpr globals named in ``known``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float, bool))
    if isinstance(node, ast.BinOp):
        return _constant(node.left, known) and _constant(node.right, known)
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand, known)
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "math" and not node.attr.startswith("_")
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and _constant(node.func, known) and not node.keywords
                and all(_constant(a, known) for a in node.args))
    return False


def _constexpr_global(node: ast.AST, known: set[str]) -> bool:
    return (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call) and ast.unparse(node.value.func) in ("tl.constexpr", "triton.language.constexpr")
            and len(node.value.args) == 1 and not node.value.keywords and _constant(node.value.args[0], known))


def extract(sources: list[str]) -> tuple[str, list[str]]:
    """(module source, kernel names) from the answer cells' sources, in cell order."""
    parts, names, constants = [], [], set()
    for src in sources:
        for node in ast.parse(src).body:
            if isinstance(node, ast.FunctionDef) and node.decorator_list and _jit_decorator(node.decorator_list[-1]) \
                    and all(_jit_decorator(d) or _tuning_decorator(d) for d in node.decorator_list):
                node.decorator_list = [d for d in node.decorator_list if _jit_decorator(d)]
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
            elif _constexpr_global(node, constants):
                parts.append(ast.unparse(node))
                constants.add(node.targets[0].id)
    return HEADER + "\n\n\n".join(parts) + "\n", names
