"""Static check of the answer cells, in the grader's process, before anything runs: an allow-list.

An answer cell holds a Triton wrapper and its kernels. What such code needs is small and known, so
everything else is refused, with the line and what to write instead:

- host code (the wrapper, the learner's own helper functions and small classes): tensor allocation
  and the attributes a launch needs (``shape``, ``stride()``, ``dtype``, ``device``...),
  ``triton.cdiv`` / ``triton.next_power_of_2`` / ``triton.jit``, arithmetic, ``assert``, ``print``,
  f-strings, launches ``kernel[grid](...)``, ``global`` counters, ``if __name__ == "__main__":``,
  attribute assignment on the learner's own objects; imports of ``torch``, ``triton``,
  ``triton.language``, ``math``, ``dataclasses``, ``typing``; ``%time``/``%timeit`` lines (their
  statement is kept);
- ``@triton.jit`` bodies: Triton only (``tl.*``, ``math.*``, other kernels, constexpr globals,
  ``range``/``min``/``max``/``len``/``print``, and on values only the methods and fields of Triton's
  language classes: :func:`kernel_attrs`, ``.type`` excepted); no comprehensions, no string subscripts;
  parameter annotations are ``tl.constexpr`` itself; no global name of Triton's interpreter module
  (:func:`interpreter_names`). The replay then compiles each kernel for sm_90 before it runs, every runtime
  argument left unspecialised, which rejects whatever Python the interpreter alone would have run;
- everywhere: a path under ``tl`` goes only through Triton's language modules to what they define (functions,
  kernels, classes, dtypes: ``tl.core.builtins`` and ``tl.extra.modules``, which is ``sys.modules``, are refused),
  and a module is only ever the root of an attribute path (``T = torch`` would carry the checks away with it).

The verdict never depends on this check alone: results come from the grader's own replay of the
recorded launches on inputs the submission never saw (:mod:`grader.replay`). The check exists so that a
submission cannot reach the grader's machinery, and so that a learner learns what a wrapper is.
"""
from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass, field

MODULES = {"torch": "torch", "triton": "triton", "triton.language": "tl", "math": "math",
           "dataclasses": "dataclasses", "typing": "typing"}
TEMPLATE_NAMES = {"torch", "triton", "tl", "rt", "tcourse"}  # bound by the exercise's setup cell
BUILTINS = {"print", "len", "range", "min", "max", "abs", "int", "float", "bool", "str", "tuple", "list", "dict",
            "set", "zip", "enumerate", "isinstance", "round", "sum", "divmod", "pow", "sorted", "reversed", "any",
            "all", "map", "filter", "iter", "next", "object", "super", "property", "staticmethod", "classmethod",
            "Exception", "ValueError", "TypeError", "AssertionError", "NotImplementedError", "RuntimeError",
            "IndexError", "KeyError", "ZeroDivisionError", "True", "False", "None"}
KERNEL_BUILTINS = {"range", "min", "max", "len", "print", "int", "float", "True", "False", "None"}
MAX_DEPTH = 64  # nesting of an answer cell's syntax tree (the solutions reach 13); deeper ones overflow Python's stack
# Attributes a kernel may read on its values (tensors, pointers, dtypes, tensor descriptors, constexprs): the public
# methods and properties of Triton's language classes, and the fields those objects carry. Nothing else: a kernel
# that reads ``.handle`` or a generator's frame runs Python in the interpreter that no compiler would accept.
KERNEL_VALUE_FIELDS = {"dtype", "shape", "value", "numel", "element_ty", "primitive_bitwidth", "int_bitwidth",
                       "fp_mantissa_width", "block_shape", "name"}
KERNEL_INSTEAD = {"type": "用 x.dtype（指针指向的类型是 x_ptr.dtype.element_ty）"}
KERNEL_NO_ATTRS = {"to_ir", "codegen_name", "mangle", "cache_key_part", "handle",  # a builder's business
                   "type"}  # an int argument equal to 1 is a constexpr on a GPU and a tensor in the interpreter: the
# .type of the one is not that of the other, so a branch on it takes one side on a CPU and the other on a GPU

# Dotted paths under a module that host code may use (a trailing ".*" allows any public name below).
MODULE_PATHS = {
    "torch": {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
              "arange", "tensor", "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
              "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "device", "dtype", "Tensor", "Size", "finfo", "iinfo",
              "cuda.is_available", "cuda.current_device", "cuda.get_device_capability", "cuda.synchronize",
              "__version__"},
    "triton": {"jit", "cdiv", "next_power_of_2", "autotune", "Config", "heuristics", "set_allocator", "__version__",
               "tools.tensor_descriptor.TensorDescriptor", "language.*"},
    "tl": {"*"}, "math": {"*"}, "dataclasses": {"dataclass", "field"},  # tl: see _tl_path_ok
    "typing": {"Any", "Optional", "Union", "List", "Tuple", "Dict", "Sequence", "Callable", "Iterable", "Literal",
               "NamedTuple"},  # annotations only: typing.get_type_hints would run strings as code
    "rt": {"device", "gpu", "pick", "interpret"},
}
# What tells the grader's CPU from a GPU (module paths, and attributes of values): host code may read these only to
# say where to allocate (inside a ``device=`` argument) or in ``print(...)``. A branch on them takes the CPU side in
# the grade and the other side on a GPU, where nothing checked it (hostile round 13: a wrapper that returned before
# its launch when ``x.is_cuda``, an autotuner pruned to one config unless on CUDA).
DEVICE_PATHS = {"torch.cuda.is_available", "torch.cuda.current_device", "torch.cuda.get_device_capability",
                "torch.__version__", "triton.__version__", "rt.gpu", "rt.device", "rt.pick", "rt.interpret"}
DEVICE_ATTRS = {"is_cuda", "device", "cuda", "cpu", "type", "data_ptr"}  # x.type(): 'torch.cuda.FloatTensor'; a
# CUDA allocation is 256-byte aligned, a CPU one 64-byte: data_ptr() % 256 tells them apart without naming either
# what evaluates one part of an expression or another depending on a value: beside a device read, the part
# evaluated (a property of the learner's own class) would tell the device (hostile round 16: print(x.is_cuda or t.p))
CHOOSING = (ast.BoolOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
PRINT_KEYWORDS = {"sep", "end", "flush"}  # not file=: a learner's object with .write would read what is printed
ALLOCATORS = {"empty", "zeros", "ones", "full", "arange", "tensor", "empty_strided"}  # torch.*: CPU without device=
DTYPES = {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool",
          "float8_e4m3fn", "float8_e5m2"}
DEVICE_PURE_CALLS = (["torch", "cuda", "is_available"], ["torch", "cuda", "current_device"], ["torch", "device"], ["str"])
DEVICE_ONLY = ("答案的 host 代码只能用设备来指定在哪里分配张量（torch.empty(..., device=x.device)）或打印：按设备走不同的路"
               "（if x.is_cuda、torch.cuda.is_available()、rt.gpu、x.device 的比较），评分在 CPU 上只检查 CPU 那一支，"
               "GPU 上走的另一支没有人检查")
DEVICE_INSTEAD = "按 GPU 调的参数（program 数、块大小、autotune 的 Config）在所有设备上写成同一个值，或者作为函数的参数"

# Attributes host code may read on values (tensors, ints, the learner's own objects, str/list/dict).
VALUE_ATTRS = {
    "shape", "dtype", "device", "stride", "size", "numel", "dim", "ndim", "is_contiguous", "element_size",
    "data_ptr", "storage_offset", "is_cuda", "t", "T", "view", "reshape", "flatten", "unsqueeze", "squeeze",
    "expand", "contiguous", "new_empty", "new_zeros", "new_full", "zero_", "fill_", "copy_", "clone", "to", "float",
    "half", "item", "cuda", "cpu", "type", "index", "bit_length",
    "append", "extend", "items", "keys", "values", "get", "pop", "setdefault", "update", "insert", "sort", "add",
    "discard", "copy", "count", "join", "split", "strip", "startswith", "endswith", "replace", "upper", "lower",
}
INSTEAD = {
    "format": "用 f-string（f\"{x}\"）代替 str.format", "format_map": "用 f-string 代替 str.format_map",
    "getattr": "直接写 obj.name", "setattr": "直接写 obj.name = value", "open": "答案单元不需要读写文件",
    "exec": "把代码直接写进单元", "eval": "把表达式直接写出来", "__import__": "用 import torch / import triton",
    "globals": "直接用变量名", "vars": "直接用变量名", "locals": "直接用变量名", "numpy": "在 kernel 里用 tl.* 计算",
}
_BUILTIN_NAMES = set(dir(builtins))
# Built-in names an answer may not bind either: bound anywhere (a parameter of an unused helper), such a name would
# count as the learner's own, and the replay, which runs the kernels alone, would find Python's built-in there.
UNBINDABLE = (_BUILTIN_NAMES - BUILTINS) | set(INSTEAD) | {"print", "str"}  # those two: see _device_contexts
MAGIC = re.compile(r"^(\s*)%(time|timeit)\s+(?:-[nrp]\s*\d+\s+|-[qoct]\s+)*(.*)$")  # %timeit's options dropped


@dataclass
class Audit:
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # cell id -> source as it will run


def _strip_magics(cell_id: str, src: str, notes: list[str]) -> tuple[str, list[str]]:
    """``%time stmt`` / ``%timeit stmt`` -> ``stmt``; other IPython syntax is refused."""
    out, bad = [], []
    for i, ln in enumerate(src.splitlines(), 1):
        m = MAGIC.match(ln)
        if m:
            out.append(m.group(1) + m.group(3))
            notes.append(f"答案单元 {cell_id} 第 {i} 行的 %{m.group(2)} 在评分时被忽略（语句照常运行）")
        elif ln.lstrip().startswith(("%", "!")):
            bad.append(f"答案单元 {cell_id} 第 {i} 行是 IPython 命令（{ln.strip()[:40]}）：评分时答案单元只能是纯 Python，"
                       "请把这一行挪到别的单元")
            out.append("")
        else:
            out.append(ln)
    return "\n".join(out), bad


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


# Modules a path under ``tl`` may pass through: triton.language reaches others (its ``core``, ``semantic``,
# ``knobs``, and from there ``builtins`` or ``os``), which are not Triton a kernel needs.
TL_MODULES = {"triton.language", "triton.language.math", "triton.language.extra", "triton.language.extra.libdevice",
              "triton.language.extra.cuda", "triton.language.extra.cuda.libdevice"}


def _tl_path_ok(rest: list[str]) -> bool:
    """``tl.rest...`` resolved on the real ``triton.language`` (attribute lookups on modules and classes run no
    learner code): an allow-list. Each step is one of :data:`TL_MODULES` or what Triton's language defines (its
    functions, kernels and classes, a dtype, a constexpr, a number); past such an object only what a kernel may read
    on its values (:func:`kernel_attrs`) or an enum's member. Refused: ``tl.core.builtins``, and the other objects
    those modules happen to hold (``tl.extra.modules`` is ``sys.modules``, ``tl.extra.spec.loader`` writes files,
    ``tl.math.wraps`` is functools'). A name that does not exist is left to fail when the code runs."""
    import types

    import triton.language as obj

    for i, p in enumerate(rest):
        if not isinstance(obj, types.ModuleType):
            members = getattr(obj, "__members__", None)
            return all(q in kernel_attrs() for q in rest[i:]) or (
                len(rest) == i + 1 and hasattr(members, "keys") and p in members)
        try:
            obj = getattr(obj, p)
        except AttributeError:
            return True
        if isinstance(obj, types.ModuleType) and obj.__name__ not in TL_MODULES or \
                not isinstance(obj, types.ModuleType) and not _language_object(obj):
            return False
    return True


def _language_object(obj) -> bool:
    """A function, kernel or class Triton's language defines, a dtype, a constexpr, or a number."""
    import triton.language as tl

    if isinstance(obj, (tl.dtype, tl.constexpr, int, float)):
        return True
    module = getattr(getattr(obj, "fn", obj), "__module__", None)  # under TRITON_INTERPRET=1 a kernel is the
    # interpreter's wrapper (module triton.runtime.interpreter), its .fn the function Triton's language defines
    return callable(obj) and isinstance(module, str) and module.startswith(("triton.language", "triton._C.libtriton.ir"))


def _path_ok(module: str, rest: list[str]) -> bool:
    """Is ``module.rest...`` (or a prefix of an allowed path) in :data:`MODULE_PATHS`?"""
    if any(p.startswith("_") and p != "__version__" for p in rest):
        return False
    if module == "tl":
        return _tl_path_ok(rest)
    if module == "triton" and rest[:1] == ["language"]:
        return _tl_path_ok(rest[1:])
    allowed = MODULE_PATHS.get(module, set())
    if "*" in allowed or not rest:
        return True
    dotted = ".".join(rest)
    for a in allowed:
        if a.endswith(".*") and (dotted + ".").startswith(a[:-1]):
            return True
        if dotted == a or a.startswith(dotted + "."):
            return True
    return False


@functools.lru_cache(maxsize=None)
def kernel_attrs() -> frozenset[str]:
    """:data:`KERNEL_VALUE_FIELDS` and the public attributes of ``tl.tensor``, ``tl.dtype`` and their kin in the
    Triton installed here."""
    import triton.language as tl

    classes = [getattr(tl, n, None) for n in ("tensor", "dtype", "pointer_type", "block_type", "constexpr",
                                              "tensor_descriptor", "tensor_descriptor_base")]
    public = {a for c in classes if isinstance(c, type) for a in dir(c) if not a.startswith("_")}
    return frozenset((public | KERNEL_VALUE_FIELDS) - KERNEL_NO_ATTRS)


@functools.lru_cache(maxsize=None)
def interpreter_names() -> frozenset[str]:
    """The global names of Triton's interpreter module (``np``, ``TensorHandle``, ``inspect``...): before it runs a
    kernel, the interpreter copies each of them into the kernel's module unless that module has the name, so there a
    free name such as ``np`` is numpy, while the compiler knows no such global."""
    from triton.runtime import interpreter

    return frozenset(n for n in vars(interpreter) if not n.startswith("__"))


@functools.lru_cache(maxsize=None)
def kernel_methods() -> frozenset[str]:
    """The names among :func:`kernel_attrs` that are methods on every class of Triton's that has them."""
    import inspect

    import triton.language as tl

    classes = [c for c in (getattr(tl, n, None) for n in ("tensor", "dtype", "pointer_type", "block_type", "constexpr",
                                                           "tensor_descriptor", "tensor_descriptor_base"))
               if isinstance(c, type)]
    out = set()
    for a in kernel_attrs() - KERNEL_VALUE_FIELDS:
        kinds = [inspect.getattr_static(c, a) for c in classes if hasattr(c, a)]
        if kinds and all(callable(k) or isinstance(k, (staticmethod, classmethod)) for k in kinds):
            out.add(a)
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def _module_callable(module: str, rest: tuple[str, ...]) -> bool:
    """Whether ``module.rest...`` (``tl``, ``triton``, ``math``; resolved on the real, unpatched modules) is a function
    or a class; a dtype, an enum (``tl.PropagateNan``) or a constant is not."""
    import importlib

    obj = importlib.import_module({"tl": "triton.language"}.get(module, module))
    for p in rest:
        if p.startswith("_"):
            return False
        obj = getattr(obj, p, None)
    import triton.language as tl

    return callable(obj) and not isinstance(obj, tl.dtype) and not hasattr(obj, "__members__")  # an enum: its members are values


def _is_jit(deco: ast.AST) -> bool:
    target = deco.func if isinstance(deco, ast.Call) else deco
    return _dotted(target) in (["triton", "jit"], ["jit"])


def _bound_names(tree: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            names.add(n.name)
    return names


@functools.lru_cache(maxsize=None)
def taken_attrs() -> frozenset[str]:
    """Attribute names that already mean something on objects a cell can reach (str, containers, numbers, classes,
    functions, frames, generators, code, tracebacks, tensors, dtypes, kernels): a learner's class that defines one
    of them must not make it readable on every value (``gi_frame`` or ``format`` would lead back to builtins)."""
    import types

    import torch
    import triton

    kinds = (str, bytes, list, dict, tuple, set, int, float, object, type, types.FunctionType, types.MethodType,
             types.BuiltinFunctionType, types.ModuleType, types.FrameType, types.GeneratorType, types.CoroutineType,
             types.AsyncGeneratorType, types.CodeType, types.TracebackType, torch.Tensor, torch.dtype, torch.device,
             torch.Size, triton.runtime.JITFunction)
    return frozenset({a for k in kinds for a in dir(k)} | {"gi_frame", "f_back", "tb_frame", "cr_frame", "ag_frame"}
                     | _BUILTIN_NAMES)  # a module's exec, eval, open...


def _own_attrs(tree: ast.AST) -> set[str]:
    """Attribute names the learner's own classes define (class body names, ``self.x = ...``), less those
    :func:`taken_attrs` lists."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            for b in n.body:
                if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.add(b.name)
                elif isinstance(b, ast.Assign):
                    out.update(t.id for t in b.targets if isinstance(t, ast.Name))
                elif isinstance(b, ast.AnnAssign) and isinstance(b.target, ast.Name):
                    out.add(b.target.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
            out.add(n.attr)
    return out - taken_attrs()


def _names_bound_by(target: ast.AST) -> set[str]:
    """The names an assignment target rebinds (``a``, ``a, *b``); ``x.attr = ...`` and ``x[i] = ...`` rebind none."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names_bound_by(e) for e in target.elts))
    if isinstance(target, ast.Starred):
        return _names_bound_by(target.value)
    return set()


def _own_objects(tree: ast.AST) -> set[str]:
    """Names whose attributes the learner may set: the learner's classes, and names assigned an instance of one
    (``cfg = Cfg()``) and bound no other way."""
    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    made, other = set(), set()  # names bound to a new instance of an own class / bound any other way
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and (_dotted(n.value.func) or [""])[0] in classes:
            made.update(t.id for t in n.targets if isinstance(t, ast.Name))
            other.update(x for t in n.targets if not isinstance(t, ast.Name) for x in _names_bound_by(t))
        elif isinstance(n, ast.Assign):
            other.update(x for t in n.targets for x in _names_bound_by(t))
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr, ast.comprehension)):
            other.update(_names_bound_by(n.target))
        elif isinstance(n, ast.arg):
            other.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            other.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            other.add(n.name)
    return (classes | made) - other


def _init_self_stores(tree: ast.AST) -> set[int]:
    """The ``self.x = ...`` targets inside ``__init__`` / ``__post_init__`` of the learner's classes: there ``self``
    is a new instance (elsewhere a method can be called with any object as ``self``, a torch class included)."""
    return {id(t) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
            if isinstance(f, ast.FunctionDef) and f.name in ("__init__", "__post_init__") and f.args.args
            and f.args.args[0].arg == "self" for t in ast.walk(f)
            if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store) and _dotted(t) == ["self", t.attr]}


class _Checker:
    def __init__(self, cell_id: str, known: set[str], own_attrs: set[str], modules: dict[str, str],
                 own_objects: set[str] = frozenset(), init_stores: set[int] = frozenset(),
                 guard_names: set[int] = frozenset()):
        self.cell_id, self.known, self.own_attrs, self.modules = cell_id, known, own_attrs, modules
        self.own_objects, self.init_stores, self.guard_names = own_objects, init_stores, guard_names
        self.kernel_attrs = kernel_attrs()
        self.kernel_globals: set[str] = set()  # what the replay's kernel module defines (_kernel_module_names)
        self.found: list[str] = []

    def bad(self, node, what: str, instead: str = "") -> None:
        tail = f"；{instead}" if instead else ""
        self.found.append(f"答案单元 {self.cell_id} 第 {getattr(node, 'lineno', '?')} 行：{what}{tail}")

    # --- host code ---------------------------------------------------------------------------
    def host(self, tree: ast.Module) -> None:
        self.device_ok = _device_contexts(tree)
        self.message_ok = _message_contexts(tree)
        self.functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_jit(d) for d in node.decorator_list):
                self.kernel(node)
        for node in self._walk_host(tree):
            self.host_node(node)
        self.modules_as_values(tree)

    def modules_as_values(self, tree: ast.Module) -> None:
        """A module (``torch``, ``tl``...) may only be the root of an attribute path: bound to another name,
        passed, returned or stored, it would carry the attribute checks' allow-list away with it."""
        roots = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        names = set(self.modules) | TEMPLATE_NAMES
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id in names and id(n) not in roots:
                self.bad(n, f"不允许把模块 {n.id} 当作一个值（赋给变量、传给函数、放进容器）",
                         f"直接写 {n.id}.xxx，例如 torch.empty、tl.load")

    def _walk_host(self, tree):
        """Every node outside @triton.jit bodies."""
        stack = [tree]
        while stack:
            n = stack.pop()
            yield n
            for c in ast.iter_child_nodes(n):
                if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_is_jit(d) for d in c.decorator_list):
                    for d in c.decorator_list:
                        stack.append(d)
                    continue
                stack.append(c)

    def host_node(self, node) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in MODULES:
                    self.bad(node, f"不允许 import {a.name}", "答案单元只需要 torch、triton、triton.language、math")
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                if not ((mod in MODULES and a.name != "*" and _path_ok(MODULES[mod], [a.name]))
                        or full in MODULES or full == "triton.tools.tensor_descriptor.TensorDescriptor"):
                    self.bad(node, f"不允许 from {mod} import {a.name}", "用 import triton.language as tl 或 import torch")
        elif isinstance(node, (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Await, ast.Yield, ast.YieldFrom)):
            self.bad(node, "包装函数里不需要 async/yield", "写普通函数")
        elif isinstance(node, ast.With):
            self.bad(node, "答案单元里不需要 with 语句", "直接调用")
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.bad(node, "答案单元里不需要 try/except：只在一种设备上出现的异常（torch.cuda.synchronize() 在没有 GPU 的"
                           "机器上、torch.empty(..., device=\"cuda\")）会让 CPU 上评分和 GPU 上走不同的路",
                     "让错误直接抛出来")
        elif (isinstance(node, ast.JoinedStr) or isinstance(node, ast.Call) and _dotted(node.func) == ["str"]) \
                and id(node) not in self.message_ok:
            self.bad(node, "字符串（f-string、str(...)）只能用在 print、assert 的说明和 raise 里：张量变成字符串时带着它在哪个"
                           "设备上（device='cuda:0'），拿它比较，CPU 上评分和 GPU 上会走不同的路",
                     "比较 dtype 写 x.dtype == torch.float16，不要比较字符串")
        elif isinstance(node, ast.Call) and _dotted(node.func) == ["print"] \
                and any(k.arg not in PRINT_KEYWORDS for k in node.keywords):
            self.bad(node, "print 只能带 sep、end、flush（file= 会把要打印的东西交给别的代码，设备也在其中）",
                     "print(...) 打到标准输出")
        elif isinstance(node, ast.Compare) and not _identity_ok(node):
            self.bad(node, "is / is not 只能和常量比较（out is None）：一个张量是不是另一个（x.to(\"cpu\") is x）"
                           "在 CPU 上和 GPU 上答案不同", "比较形状、dtype 或值")
        elif isinstance(node, ast.keyword) and node.arg == "device" and not _device_value_ok(node.value):
            self.bad(node.value, f"device= 只能写输入张量的 .device（device=x.device）或 rt.device，这里是 "
                                 f"{ast.unparse(node.value)[:60]}：写死的或按设备挑的位置在 CPU 上评分时和 GPU 上不一样"
                                 "（GPU 上 kernel 拿到 CPU 张量，启动时就被拒绝）", "device=x.device")
        elif isinstance(node, ast.Call) and (_dotted(node.func) or [""])[-1] == "Tensor" \
                and self.modules.get((_dotted(node.func) or [""])[0]) == "torch":
            self.bad(node, "不允许调用 torch.Tensor(...)：它总在 CPU 上分配", "torch.empty(..., device=x.device)")
        elif isinstance(node, ast.Call) and self.torch_allocation(node) and not any(k.arg == "device" for k in node.keywords):
            self.bad(node, f"{ast.unparse(node.func)}(...) 要写 device=x.device：不写就分配在 CPU 上，CPU 上评分时"
                           "看不出来，GPU 上 kernel 拿到 CPU 张量，启动时就被拒绝", "加上 device=x.device")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to" \
                and not _to_dtype_only(node):
            self.bad(node, "x.to(...) 只用来换 dtype（x.to(torch.float32)、x.to(y.dtype)）：换设备（x.to(\"cpu\")、"
                           "x.to(另一个张量)）在 CPU 上评分时什么也不做，GPU 上会复制", "x.to(torch.float32)")
        elif isinstance(node, ast.Call) and _dotted(node.func) == ["triton", "set_allocator"] \
                and not self.plain_allocator(node):
            self.bad(node, "triton.set_allocator 只接受模板里那样的分配函数：def f(size, alignment, stream): return "
                           "torch.empty(size, dtype=torch.int8, device=...)（评分在 CPU 上跑，解释器从不调用它；GPU 上启动时"
                           "按 grid 要这么多字节，给少了 kernel 就写到缓冲区外面）", "用模板里的 _scratch")
        elif isinstance(node, ast.ClassDef):
            named = {b.name for b in node.body if isinstance(b, ast.FunctionDef)} | {
                t.id for b in node.body if isinstance(b, (ast.Assign, ast.AnnAssign))
                for t in (b.targets if isinstance(b, ast.Assign) else [b.target]) if isinstance(t, ast.Name)}
            if named & DEVICE_ATTRS:
                self.bad(node, f"类 {node.name} 不能有叫 {'、'.join(sorted(named & DEVICE_ATTRS))} 的属性：这些名字是张量"
                               "说明自己在哪个设备上的属性，自己的对象借用它们，device= 里就能放进任意的位置", "换个名字")
            for b in node.bases:
                if _dotted(b) not in (["object"],):
                    self.bad(node, f"类 {node.name} 只能是简单的配置类（不继承其他类）", "写成 class Cfg: 或 @dataclass")
            for d in node.decorator_list:
                if _dotted(d.func if isinstance(d, ast.Call) else d) not in (["dataclass"], ["dataclasses", "dataclass"]):
                    self.bad(node, "类上只允许 @dataclass", "去掉别的装饰器")
        elif isinstance(node, ast.FunctionDef):
            if node.name.startswith("__") and node.name not in ("__init__", "__post_init__", "__repr__"):
                self.bad(node, f"不允许定义特殊方法 {node.name}", "配置类只需要 __init__ 和普通方法")
            for d in node.decorator_list:
                if _dotted(d.func if isinstance(d, ast.Call) else d) not in (
                        ["staticmethod"], ["property"], ["classmethod"], ["triton", "autotune"], ["triton", "heuristics"]):
                    self.bad(node, "这个装饰器评分时不允许", "只用 @triton.jit（kernel）或不加装饰器")
        elif isinstance(node, ast.Name):
            self.name(node, self.known | BUILTINS | TEMPLATE_NAMES | set(self.modules))
        elif isinstance(node, ast.Attribute):
            self.attribute(node, host=True)
        self.binding(node, UNBINDABLE)

    def torch_allocation(self, call: ast.Call) -> bool:
        """``torch.empty(...)`` and the other factories of :data:`ALLOCATORS` (under any name torch is imported as)."""
        path = _dotted(call.func)
        return path is not None and len(path) == 2 and self.modules.get(path[0]) == "torch" and path[1] in ALLOCATORS

    def plain_allocator(self, call: ast.Call) -> bool:
        """``triton.set_allocator(f)`` with ``f`` a function of this cell whose whole body is
        ``return torch.empty(size, dtype=torch.int8, device=...)``, ``size`` its first parameter."""
        fn = self.functions.get(call.args[0].id) if len(call.args) == 1 and isinstance(call.args[0], ast.Name) else None
        if fn is None or len(fn.body) != 1 or not isinstance(fn.body[0], ast.Return) or not fn.args.args:
            return False
        ret = fn.body[0].value
        return (isinstance(ret, ast.Call) and _dotted(ret.func) == ["torch", "empty"] and len(ret.args) == 1
                and isinstance(ret.args[0], ast.Name) and ret.args[0].id == fn.args.args[0].arg
                and {k.arg for k in ret.keywords} == {"dtype", "device"}
                and any(k.arg == "dtype" and _dotted(k.value) == ["torch", "int8"] for k in ret.keywords))

    def binding(self, node: ast.AST, names: set[str]) -> None:
        """A name in ``names`` bound by ``node`` (assigned, a parameter, a def, a class, an import, an except)."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound = [node.id]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [node.name]
        elif isinstance(node, ast.arg):
            bound = [node.arg]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, ast.ExceptHandler):
            bound = [node.name] if node.name else []
        else:
            return
        for name in bound:
            if name in names:
                self.bad(node, f"不能用内置函数的名字 {name} 给变量、参数或函数命名", "换一个名字，例如 my_" + name)

    def name(self, node: ast.Name, allowed: set[str]) -> None:
        """A built-in outside :data:`BUILTINS` is refused; a name defined nowhere is only a NameError later."""
        if node.id == "__name__" and id(node) in self.guard_names:
            return
        if isinstance(node.ctx, ast.Load) and node.id not in allowed and (node.id in _BUILTIN_NAMES or node.id in INSTEAD):
            self.bad(node, f"不允许使用 {node.id}", INSTEAD.get(node.id, "答案单元只能用自己定义的名字、torch/triton/tl/math 和常用内置函数"))
        elif node.id.startswith("__"):
            self.bad(node, f"不允许使用名字 {node.id}", "用普通的变量名；__name__ 只能写在单元顶层的 if __name__ == \"__main__\": 里")

    def attribute(self, node: ast.Attribute, host: bool) -> None:
        if node.attr.startswith("__") and node.attr != "__version__" or (node.attr.startswith("_") and not host):
            self.bad(node, f"不允许访问特殊或私有属性 .{node.attr}", "只用公开的属性，例如 x.shape、x.stride(0)、x.dtype、tl.float32")
            return
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _dotted(node)
            if host and node.attr in DEVICE_ATTRS:
                self.bad(node, f"不允许给 .{node.attr} 赋值：这是张量说明自己在哪个设备上的属性", "换个名字")
                return
            if not host:
                self.bad(node, "kernel 里不能给属性赋值", "用局部变量")
            elif root is None or node.attr.startswith("_") or (
                    id(node) not in self.init_stores if root[0] == "self" else root[0] not in self.own_objects):
                self.bad(node, f"不允许给 .{node.attr} 赋值（只能改自己的类和它的实例：__init__ 里的 self.x、"
                               "cfg = Cfg() 之后的 cfg.x）",
                         "torch/triton 的对象、kernel 和别的值的属性都不能改")
            return
        path = _dotted(node)
        if host and id(node) not in self.device_ok and (node.attr in DEVICE_ATTRS if path is None or path[0] not in (
                *self.modules, "rt") else ".".join([self.modules.get(path[0], path[0]), *path[1:]]) in DEVICE_PATHS):
            self.bad(node, f"{DEVICE_ONLY}（这里读了 .{node.attr}）", DEVICE_INSTEAD)
            return
        if path is not None and (path[0] in self.modules or path[0] == "rt"):
            mod = self.modules.get(path[0], path[0])
            if not _path_ok(mod, path[1:]):
                self.bad(node, f"不允许使用 {'.'.join(path)}", INSTEAD.get(path[-1], "答案单元只需要分配张量、读形状和 stride、"
                                                                               "triton.cdiv / next_power_of_2 和启动 kernel"))
            return
        if host and node.attr not in VALUE_ATTRS | self.own_attrs:
            self.bad(node, f"不允许使用 .{node.attr}", INSTEAD.get(node.attr, "包装函数只需要形状、stride、dtype、device 这类属性"))

    # --- kernels -----------------------------------------------------------------------------
    def kernel(self, fn: ast.FunctionDef) -> None:
        local = _bound_names(fn) | {fn.name}
        # a global built-in name is Python's built-in in the replay, whoever bound it in the answer cells
        allowed = local | (self.known - _BUILTIN_NAMES) | KERNEL_BUILTINS | {"tl", "triton", "math"}
        args = fn.args
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None and a.annotation is not None:
                self.annotation(fn, a.annotation)
        if fn.returns is not None:
            self.annotation(fn, fn.returns, parameter=False)
        body = [n for part in (*fn.body, *fn.args.defaults, *fn.args.kw_defaults) if part is not None
                for n in ast.walk(part)]
        # where a function may stand: called, or the annotation of a local (``B: tl.constexpr = 4``)
        callees = {id(n.func) for n in body if isinstance(n, ast.Call)} | {
            id(n) for a in body if isinstance(a, ast.AnnAssign) for n in ast.walk(a.annotation)}
        for node in body:
            self.binding(node, UNBINDABLE)
        for node in ast.walk(fn.args):  # a parameter gets what the wrapper passes: a built-in function, maybe
            self.binding(node, _BUILTIN_NAMES)
        for node in body:
            if id(node) not in callees and self.uncalled_function(node):
                self.bad(node, f"kernel {fn.name} 里的 {ast.unparse(node)} 是函数或类，只能直接调用（不能比较、赋值、当参数传或读它的属性）",
                         "解释器里 Triton 的函数换成了它自己的实现，和编译器看到的不是同一个对象：拿它们比较，两边会走不同的分支")
            if isinstance(node, ast.Compare) and any(
                    isinstance(op, (ast.Is, ast.IsNot)) and not any(isinstance(s, ast.Constant) and s.value is None for s in pair)
                    for op, pair in zip(node.ops, zip((node.left, *node.comparators), node.comparators))):
                self.bad(node, f"kernel {fn.name} 里 is / is not 只能和 None 比较", "比较值和 dtype 用 ==，例如 x.dtype == tl.float16")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Import,
                                 ast.ImportFrom, ast.Global, ast.Nonlocal, ast.With, ast.Try, ast.Delete, ast.Yield,
                                 ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)):
                self.bad(node, f"@triton.jit kernel {fn.name} 里不能写 {type(node).__name__}", "kernel 里只能写 Triton 代码")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "__" in node.value:
                self.bad(node, f"kernel {fn.name} 里不允许含 __ 的字符串", "kernel 里的字符串只用于 print 的说明文字")
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, str):
                self.bad(node, f"kernel {fn.name} 里不能用字符串下标", "kernel 里只按块、切片或整数取下标")
            elif isinstance(node, ast.Name):
                if node.id in ("getattr", "hasattr", "setattr", "eval", "exec", "open", "globals", "vars"):
                    self.bad(node, f"kernel {fn.name} 里不允许使用 {node.id}", "kernel 里直接写 tl.xxx 或变量名")
                elif node.id in interpreter_names() - local - self.kernel_globals - {"tl", "triton", "math"}:
                    self.bad(node, f"kernel {fn.name} 里不能用全局名字 {node.id}",
                             "Triton 的解释器运行 kernel 之前把它自己模块里的全局名字（np、TensorHandle 等）放进 kernel 所在的"
                             f"模块，编译器里没有这些名字：{node.id} 在 CPU 上和 GPU 上不是同一个东西；换一个名字，或者作为参数传进 kernel")
                else:
                    self.name(node, allowed)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Constant):
                self.bad(node, f"kernel {fn.name} 里不能读常量的属性（{ast.unparse(node)[:40]}）", "kernel 里的字符串只用于 print 的说明文字")
            elif isinstance(node, ast.Attribute):
                path = _dotted(node)
                if path and path[0] == "triton" and len(path) > 1 and path[1] != "language":
                    self.bad(node, f"kernel {fn.name} 里不允许使用 {'.'.join(path)}", "kernel 里用 tl.*")
                elif (path is None or path[0] not in self.modules) and node.attr not in self.kernel_attrs:
                    self.bad(node, f"kernel {fn.name} 里不允许读 .{node.attr}", KERNEL_INSTEAD.get(
                        node.attr, "kernel 里的值只有 Triton 的方法和属性，例如 x.to(tl.float32)、x.dtype、x.shape"))
                else:
                    self.attribute(node, host=False)

    def is_constexpr(self, node: ast.AST) -> bool:
        """``node`` names Triton's ``constexpr`` itself: ``tl.constexpr``, ``triton.language.constexpr`` (or through
        an alias of either), or the string ``"tl.constexpr"`` / ``"constexpr"``."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str) and node.value.strip() in ("constexpr", "tl.constexpr")
        path = _dotted(node)
        if not path or path[-1] != "constexpr" or path[0] not in self.modules:
            return False
        return (self.modules[path[0]], *path[1:-1]) in (("tl",), ("triton", "language"))

    def uncalled_function(self, node: ast.AST) -> bool:
        """``node`` (in a kernel, not called) names a function: a built-in, a function or class of ``tl``/``math``, a
        method of Triton's language classes. The interpreter runs kernels with ``tl``'s functions swapped for its own
        (``tl.static_range`` and ``tl.range`` become one function, ``tl.static_print`` becomes ``print``): compared or
        stored, they take a branch on CPU that the compiler folds away."""
        if isinstance(node, ast.Name):
            return isinstance(node.ctx, ast.Load) and node.id in KERNEL_BUILTINS and callable(getattr(builtins, node.id))
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            return False
        path = _dotted(node)
        if path is not None and path[0] in self.modules:
            return _module_callable(self.modules[path[0]], tuple(path[1:]))
        return node.attr in kernel_methods()

    def annotation(self, fn: ast.FunctionDef, node: ast.AST, parameter: bool = True) -> None:
        if not _annotation_ok(node):
            self.bad(node, f"kernel {fn.name} 的参数注解不允许是表达式，只能是 tl.constexpr 这样的名字", "例如 BLOCK: tl.constexpr")
            return
        if parameter and not self.is_constexpr(node):
            self.bad(node, f"kernel {fn.name} 的参数注解只能是 tl.constexpr（这里是 {ast.unparse(node)[:40]}）",
                     "Triton 的编译器把注解里含 constexpr 的参数都当常量，解释器只认 constexpr 本身：别的注解在两边不一样；"
                     "普通参数不写注解")
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                self.attribute(n, host=False)


def _device_value_ok(node: ast.AST) -> bool:
    """A ``device=`` that names where an input is: ``x.device`` (any attribute path ending in ``.device``,
    ``rt.device`` included), or the allocator's ``"cuda" if torch.cuda.is_available() else "cpu"``. Anything else
    could put a tensor elsewhere on one device only (hostile round 15: ``"cpu"``, ``"cpu" if x.is_cuda else ...``)."""
    path = _dotted(node)
    if path is not None:
        return len(path) >= 2 and path[-1] == "device"
    return (isinstance(node, ast.IfExp) and isinstance(node.test, ast.Call) and not node.test.args
            and _dotted(node.test.func) == ["torch", "cuda", "is_available"]
            and isinstance(node.body, ast.Constant) and node.body.value == "cuda"
            and isinstance(node.orelse, ast.Constant) and node.orelse.value == "cpu")


def _identity_ok(node: ast.Compare) -> bool:
    """``is`` / ``is not`` only against a constant (``out is None``)."""
    sides = [node.left, *node.comparators]
    return all(isinstance(sides[i], ast.Constant) or isinstance(sides[i + 1], ast.Constant)
               for i, op in enumerate(node.ops) if isinstance(op, (ast.Is, ast.IsNot)))


def _to_dtype_only(call: ast.Call) -> bool:
    """``x.to(torch.float16)``, ``x.to(y.dtype)``, ``x.to(dtype=...)``: a change of dtype, never of device."""
    def dtype(a: ast.AST) -> bool:
        path = _dotted(a)
        return path is not None and (path[-1] == "dtype" or len(path) == 2 and path[0] == "torch" and path[1] in DTYPES)
    return all(dtype(a) for a in call.args) and all(k.arg in ("dtype", "device", "copy", "non_blocking")
                                                    for k in call.keywords)


def _device_contexts(tree: ast.Module) -> set[int]:
    """The nodes inside a ``device=`` argument of the forms :func:`_device_value_ok` takes, and inside a
    ``print(...)``'s positional arguments that call nothing but :data:`DEVICE_PURE_CALLS` and choose nothing
    (:data:`CHOOSING`): there reading the device only says where to allocate, or what to print."""
    ok: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.keyword) and n.arg == "device":
            if _device_value_ok(n.value):
                ok |= {id(m) for m in ast.walk(n.value)}
            continue
        if not (isinstance(n, ast.Call) and _dotted(n.func) == ["print"]):
            continue
        for part in n.args:
            inner = list(ast.walk(part))
            if not any(isinstance(m, (ast.NamedExpr, ast.Lambda, *CHOOSING)) or isinstance(m, ast.Call)
                       and _dotted(m.func) not in DEVICE_PURE_CALLS for m in inner):
                ok |= {id(m) for m in inner}
    return ok


def _message_contexts(tree: ast.Module) -> set[int]:
    """The nodes inside a ``print(...)``'s arguments, an ``assert``'s message or a ``raise``: where a string of
    the learner's only says something, and compares with nothing."""
    ok: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and _dotted(n.func) == ["print"]:
            parts = [*n.args, *(k.value for k in n.keywords if k.arg in PRINT_KEYWORDS)]
        elif isinstance(n, ast.Assert) and n.msg is not None:
            parts = [n.msg]
        elif isinstance(n, ast.Raise) and n.exc is not None:
            parts = [n.exc]
        else:
            continue
        ok |= {id(m) for part in parts for m in ast.walk(part)}
    return ok


def _kernel_module_names(tree: ast.Module) -> set[str]:
    """The names ``tree`` puts into the replay's kernel module (:mod:`grader.kernel_source`): its top-level
    ``@triton.jit`` functions and ``NAME = tl.constexpr(...)`` globals."""
    def jit(d: ast.AST) -> bool:
        return ast.unparse(d.func if isinstance(d, ast.Call) else d) in ("triton.jit", "jit")

    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and any(jit(d) for d in n.decorator_list)} | {
        n.targets[0].id for n in tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call)
        and ast.unparse(n.value.func) in ("tl.constexpr", "triton.language.constexpr")}


def _annotation_ok(node: ast.AST) -> bool:
    """A kernel parameter's annotation is a dotted name (``tl.constexpr``, ``tl.tensor``, ``int``) or a string:
    Python evaluates it when the ``def`` runs, in the learner's process and in the replay."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    path = _dotted(node)
    return path is not None and not any(p.startswith("_") for p in path)


def _main_guards(tree: ast.Module) -> list[ast.If]:
    """The cell's top-level ``if __name__ == "__main__":`` statements, written exactly so."""
    return [n for n in tree.body if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
            and isinstance(n.test.left, ast.Name) and n.test.left.id == "__name__" and len(n.test.ops) == 1
            and isinstance(n.test.ops[0], ast.Eq) and isinstance(n.test.comparators[0], ast.Constant)
            and n.test.comparators[0].value == "__main__"]


def _without_guards(src: str, guards: list[ast.If]) -> str:
    """``src`` with each guard statement replaced by ``pass`` (line numbers kept): in the grader's kernel ``__name__``
    is ``"__main__"`` too, and what a learner checks there (the spec, printing) is not the answer."""
    lines = src.splitlines(keepends=True)
    for g in guards:
        lines[g.lineno - 1:g.end_lineno] = ["pass\n"] + ["\n"] * (g.end_lineno - g.lineno)
    return "".join(lines)


def _depth(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


@functools.lru_cache(maxsize=1)
def _ipython_transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


def _code_lines(src: str) -> str:
    """``src`` without the blank lines before and the white space after its code (IPython drops those)."""
    return re.sub(r"\A(?:[ \t]*\n)+", "", src).rstrip()


def _spec_calls(cid: str, tree: ast.AST, specs: set[str]) -> list[str]:
    """Uses of the exercise's spec functions outside ``if __name__ == "__main__":`` (where a learner checks an
    answer against the spec, and which grading does not run): the answer would be the reference itself."""
    guards = {id(g) for g in _main_guards(tree)}
    found, stack = [], [tree]
    while stack:
        n = stack.pop()
        if id(n) in guards:
            continue
        if isinstance(n, ast.Name) and n.id in specs:
            found.append(f"答案单元 {cid} 第 {n.lineno} 行：不允许使用规格函数 {n.id}（它就是评分用的参考答案）；"
                         f"自己写出计算，{n.id} 只能在 if __name__ == \"__main__\": 里用来对照")
        stack.extend(ast.iter_child_nodes(n))
    return found


def audit(cells: dict[str, str], template_names: set[str] = frozenset(), specs: set[str] = frozenset()) -> Audit:
    """Check every answer cell (cell id -> source); ``sources`` holds the code as it will run.

    ``template_names``: names the exercise's own setup and given cells define (the spec, ``rt``...);
    ``specs``: the spec functions among them, which answers may not call."""
    out = Audit()
    trees = {}
    for cid, src in cells.items():
        src, bad = _strip_magics(cid, src, out.notes)
        out.refused += bad
        out.sources[cid] = src
        try:
            tree = ast.parse(src)
        except SyntaxError as e:
            out.refused.append(f"答案单元 {cid} 第 {e.lineno} 行不是合法的 Python（{e.msg}）")
            continue
        except (RecursionError, MemoryError):
            tree = None
        if tree is None or _depth(tree) > MAX_DEPTH:
            out.refused.append(f"答案单元 {cid} 的表达式或语句嵌套超过 {MAX_DEPTH} 层；拆成几个变量，一步一步写")
            continue
        if _code_lines(_ipython_transformer().transform_cell(src)) != _code_lines(src):
            out.refused.append(f"答案单元 {cid} 会被 IPython 改写以后再运行（行首的 >>> 或 ... 提示符、行尾的 ?）；"
                               "去掉提示符，写成普通的 Python")
            continue
        guards = _main_guards(tree)
        if guards:
            out.sources[cid] = _without_guards(src, guards)
            out.notes.append(f"答案单元 {cid} 第 {'、'.join(str(g.lineno) for g in guards)} 行的 if __name__ == \"__main__\": "
                             "块评分时不运行（它只用来自己对照）")
        trees[cid] = tree
    known = set().union(*(_bound_names(t) for t in trees.values())) if trees else set()
    own = set().union(*(_own_attrs(t) for t in trees.values())) if trees else set()
    own_objects = _own_objects(ast.Module(body=[n for t in trees.values() for n in t.body], type_ignores=[]))
    modules = {}
    for t in trees.values():
        for n in ast.walk(t):
            if isinstance(n, ast.Import):
                for a in n.names:
                    if a.name in MODULES:
                        modules[a.asname or a.name.split(".")[0]] = MODULES[a.name] if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and f"{n.module}.{n.names[0].name}" in MODULES:
                for a in n.names:
                    modules[a.asname or a.name] = MODULES.get(f"{n.module}.{a.name}", a.name)
    modules.update({"torch": "torch", "triton": "triton", "tl": "tl", "math": "math"})
    kernel_globals = set().union(*(_kernel_module_names(t) for t in trees.values())) if trees else set()
    for cid, tree in trees.items():
        ck = _Checker(cid, (known | set(template_names)) - set(modules), own, modules, own_objects, _init_self_stores(tree),
                      {id(g.test.left) for g in _main_guards(tree)})
        ck.kernel_globals = kernel_globals
        ck.host(tree)
        out.refused += ck.found + _spec_calls(cid, tree, set(specs))
    return out
