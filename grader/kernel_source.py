"""The learner's kernels alone: a module with their ``@triton.jit`` functions and constexpr globals, nothing else.

The replay imports this module instead of running the answer cells, so no host code of the learner's
(wrapper, helpers, module-level statements) runs there: only the kernels, which the replay then
compiles for sm_90 before launching them. Kept: ``@triton.jit`` / ``@triton.jit(...)`` functions with
constant defaults (literals, arithmetic, constexpr globals defined above) and literal decorator arguments
(under ``@triton.autotune``/``@triton.heuristics``, only the jit function: the launch log holds the
configuration each launch used), and ``NAME = tl.constexpr(...)``
assignments whose value is constant arithmetic: literals, ``math.*``, and constexpr globals defined above.
"""
from __future__ import annotations

import ast

from .policy import KERNEL_BUILTINS

# The kernels defined below it see only the built-ins a kernel may use (grader.policy.KERNEL_BUILTINS): a function
# takes its built-ins from its module's ``__builtins__`` when it is defined, and the interpreter defines each kernel
# again in this module's namespace.
HEADER = ("import builtins\nimport math\nimport triton\nimport triton.language as tl\n\n"
          "__builtins__ = {n: getattr(builtins, n) for n in (%s)}\n"
          "del builtins\n\n" % ", ".join(repr(n) for n in sorted(KERNEL_BUILTINS - {"True", "False", "None"})))


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


def _one_definition_per_kernel_name(trees: list[ast.Module]) -> None:
    """The launch log names a kernel by its function name and the replay runs the top-level kernel of that name:
    a second function of the same name (redefined later, or nested in a helper) could be what actually ran."""
    defined: dict[str, int] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined[node.name] = defined.get(node.name, 0) + 1
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(_jit_decorator(d) for d in node.decorator_list) \
                    and defined[node.name] > 1:
                raise NotExtractable(f"kernel {node.name} 定义了 {defined[node.name]} 次（答案单元里每个函数名只能定义一次："
                                     f"评分器按名字重放 kernel，同名的另一个定义可能才是实际运行的那个）")


def extract(sources: list[str]) -> tuple[str, list[str]]:
    """(module source, kernel names) from the answer cells' sources, in cell order."""
    parts, names, constants = [], [], set()
    trees = [ast.parse(src) for src in sources]
    _one_definition_per_kernel_name(trees)
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.decorator_list and _jit_decorator(node.decorator_list[-1]) \
                    and all(_jit_decorator(d) or _tuning_decorator(d) for d in node.decorator_list):
                node.decorator_list = [d for d in node.decorator_list if _jit_decorator(d)]
                for d in node.decorator_list:
                    if isinstance(d, ast.Call) and not all(_literal(k.value) for k in d.keywords) or \
                            isinstance(d, ast.Call) and d.args:
                        raise NotExtractable(f"kernel {node.name}（第 {node.lineno} 行）：@triton.jit(...) 的参数只能是字面量"
                                             "（例如 @triton.jit(do_not_specialize=[\"n\"])），不能是变量或表达式")
                for dflt in (*node.args.defaults, *[k for k in node.args.kw_defaults if k is not None]):
                    if not (_literal(dflt) or _constant(dflt, constants)):
                        raise NotExtractable(f"kernel {node.name}（第 {node.lineno} 行）：参数的默认值 {ast.unparse(dflt)} 不是常数："
                                             "只能写字面量、算术表达式或前面定义的 NAME = tl.constexpr(...)；"
                                             "或者去掉默认值，由包装函数传入")
                node.decorator_list = [ast.parse("triton.jit", mode="eval").body if ast.unparse(d) == "jit" else d
                                       for d in node.decorator_list]
                parts.append(ast.unparse(node))
                names.append(node.name)
            elif _constexpr_global(node, constants):
                parts.append(ast.unparse(node))
                constants.add(node.targets[0].id)
    return HEADER + "\n\n\n".join(parts) + "\n", names
