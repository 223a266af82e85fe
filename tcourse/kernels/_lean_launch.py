"""A lean C launch for kernels compiled by Triton 3.6: the same ``cuLaunchKernel`` with less host work.

Triton's launcher for a compiled kernel (``CompiledKernel.run``, a C function generated per signature) takes
13 leading arguments, parses them and the kernel's with ``PyArg_ParseTuple``, unpacks a metadata tuple with a
second parse, checks each pointer and fills a ``CUlaunchConfig`` for ``cuLaunchKernelEx``. For a kernel that a
launch plan (``_launch._plan``) calls again and again with the same grid, block and shared memory, most of that
is known in advance. This module's one C function takes the launch as ``launch(gx, gy, gz, stream, function,
threads, shared, codes, *values)``: ``codes`` (bytes, one letter per kernel parameter, made once per plan by
:func:`codes_of`) says how to pass each value, and the parameters go to ``cuLaunchKernel`` as they are.

It returns True once launched and False, launching nothing, when the calling thread has no current CUDA
context (the caller then takes Triton's path, which makes one current). Compiled on first use by Triton's own
helper (the C compiler Triton needs for its launchers); where that fails, or with ``TCOURSE_LEAN_LAUNCH=0``,
``module()`` is None and the plans keep Triton's launch.
"""
from __future__ import annotations

import os
import re

# One letter per kernel parameter: how launch() turns the Python value into the parameter's bytes.
# p: a device pointer (int, or None for null); m: a CUtensorMap (Triton's PyCUtensorMap object);
# b/B, h/H, i/I, l/L: 8/16/32/64-bit signed/unsigned integers; f: fp32 (from a Python float); d: fp64.
_CODE_OF_TYPE = {"i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "l", "u1": "B", "u8": "B", "u16": "H",
                 "u32": "I", "u64": "L", "fp32": "f", "f32": "f", "fp64": "d", "nvTmaDesc": "m"}
MAX_PARAMS = 64

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
typedef void *CUfunction, *CUstream, *CUcontext;
typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void **, void **);
typedef CUresult (*get_ctx_t)(CUcontext *);
typedef CUresult (*err_t)(CUresult, const char **);

static launch_t cu_launch;
static get_ctx_t cu_ctx_get_current;
static err_t cu_error_string;
static PyTypeObject *tensor_map_type;  /* triton.backends.nvidia.PyCUtensorMap, set by set_tensor_map_type */

typedef struct { PyObject_HEAD; _Alignas(128) unsigned char map[128]; } TensorMapObject;  /* Triton's layout */

typedef union { uint64_t u64; int64_t i64; uint32_t u32; int32_t i32; uint16_t u16; int16_t i16; uint8_t u8;
                int8_t i8; float f32; double f64; void *ptr; } Slot;

static int to_slot(char code, PyObject *v, Slot *s, void **param, Py_ssize_t k) {
  if (code == 'm') {
    if (tensor_map_type == NULL || Py_TYPE(v) != tensor_map_type) {
      PyErr_Format(PyExc_TypeError, "lean launch: parameter %zd must be a PyCUtensorMap", k);
      return -1;
    }
    *param = ((TensorMapObject *)v)->map;
    return 0;
  }
  *param = s;
  if (code == 'f' || code == 'd') {
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return -1;
    if (code == 'f') s->f32 = (float)x; else s->f64 = x;
    return 0;
  }
  if (code == 'p' && v == Py_None) { s->u64 = 0; return 0; }
  if (!PyLong_Check(v)) {
    PyErr_Format(PyExc_TypeError, "lean launch: parameter %zd must be an int, got %s", k, Py_TYPE(v)->tp_name);
    return -1;
  }
  int overflow = 0;
  if (code == 'p' || code == 'L') {
    s->u64 = PyLong_AsUnsignedLongLong(v);
    return (s->u64 == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
  }
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) return -1;
  int fits;
  switch (code) {
    case 'b': fits = x >= INT8_MIN && x <= INT8_MAX; s->i8 = (int8_t)x; break;
    case 'B': fits = x >= 0 && x <= UINT8_MAX; s->u8 = (uint8_t)x; break;
    case 'h': fits = x >= INT16_MIN && x <= INT16_MAX; s->i16 = (int16_t)x; break;
    case 'H': fits = x >= 0 && x <= UINT16_MAX; s->u16 = (uint16_t)x; break;
    case 'i': fits = x >= INT32_MIN && x <= INT32_MAX; s->i32 = (int32_t)x; break;
    case 'I': fits = x >= 0 && x <= UINT32_MAX; s->u32 = (uint32_t)x; break;
    case 'l': fits = 1; s->i64 = x; break;
    default:
      PyErr_Format(PyExc_ValueError, "lean launch: unknown parameter code '%c'", code);
      return -1;
  }
  if (overflow || !fits) {
    PyErr_Format(PyExc_OverflowError, "lean launch: parameter %zd does not fit its type ('%c')", k, code);
    return -1;
  }
  return 0;
}

/* libcuda's three entry points, looked up on the first launch (so that the module loads, and its argument
   checks can be tested, on a machine without a GPU driver) */
static int load_cuda(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == NULL) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda != NULL) {
    cu_launch = (launch_t)dlsym(cuda, "cuLaunchKernel");
    cu_ctx_get_current = (get_ctx_t)dlsym(cuda, "cuCtxGetCurrent");
    cu_error_string = (err_t)dlsym(cuda, "cuGetErrorString");
  }
  if (cu_launch && cu_ctx_get_current && cu_error_string) return 0;
  cu_launch = NULL;
  PyErr_SetString(PyExc_RuntimeError, "lean launch: libcuda.so.1 (with cuLaunchKernel, cuCtxGetCurrent and "
                  "cuGetErrorString) not found");
  return -1;
}

/* launch(gx, gy, gz, stream, function, threads, shared, codes, *values) -> True, or False without a context */
static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  enum { HEAD = 8, MAX = MAX_PARAMS_VALUE };
  if (nargs < HEAD || !PyBytes_Check(args[7])) {
    PyErr_SetString(PyExc_TypeError, "launch(gx, gy, gz, stream, function, threads, shared, codes: bytes, *values)");
    return NULL;
  }
  uint64_t head[7];
  for (int i = 0; i < 7; i++) {
    head[i] = PyLong_AsUnsignedLongLong(args[i]);
    if (head[i] == (uint64_t)-1 && PyErr_Occurred()) return NULL;
  }
  const char *codes = PyBytes_AS_STRING(args[7]);
  Py_ssize_t n = PyBytes_GET_SIZE(args[7]);
  if (n != nargs - HEAD || n > MAX) {
    PyErr_Format(PyExc_TypeError, "lean launch: %zd codes for %zd values (at most %d)", n, nargs - HEAD, (int)MAX);
    return NULL;
  }
  Slot slots[MAX];
  void *params[MAX];
  for (Py_ssize_t k = 0; k < n; k++)
    if (to_slot(codes[k], args[HEAD + k], &slots[k], &params[k], k) < 0) return NULL;
  if (cu_launch == NULL && load_cuda() < 0) return NULL;
  CUcontext ctx = NULL;
  if (cu_ctx_get_current(&ctx) != 0 || ctx == NULL) Py_RETURN_FALSE;
  if (head[0] * head[1] * head[2] == 0) Py_RETURN_TRUE;  /* an empty grid: nothing to run, as in Triton */
  CUresult r;
  Py_BEGIN_ALLOW_THREADS;
  r = cu_launch((CUfunction)(uintptr_t)head[4], (unsigned)head[0], (unsigned)head[1], (unsigned)head[2],
                (unsigned)head[5], 1, 1, (unsigned)head[6], (CUstream)(uintptr_t)head[3], params, NULL);
  Py_END_ALLOW_THREADS;
  if (r != 0) {
    const char *msg = NULL;
    cu_error_string(r, &msg);
    PyErr_Format(PyExc_RuntimeError, "lean launch: cuLaunchKernel failed (CUresult %d: %s)", r, msg ? msg : "?");
    return NULL;
  }
  Py_RETURN_TRUE;
}

static PyObject *set_tensor_map_type(PyObject *self, PyObject *type) {
  if (!PyType_Check(type) || ((PyTypeObject *)type)->tp_basicsize < (Py_ssize_t)sizeof(TensorMapObject)) {
    PyErr_SetString(PyExc_TypeError, "set_tensor_map_type: Triton's PyCUtensorMap type expected");
    return NULL;
  }
  Py_INCREF(type);
  Py_XDECREF((PyObject *)tensor_map_type);
  tensor_map_type = (PyTypeObject *)type;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "launch(gx, gy, gz, stream, function, threads, shared, codes, *values)"},
  {"set_tensor_map_type", set_tensor_map_type, METH_O, "the type whose objects code 'm' takes"},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "tcourse_lean_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_tcourse_lean_launch(void) { return PyModule_Create(&module); }
""".replace("MAX_PARAMS_VALUE", str(MAX_PARAMS))

ENABLED = os.environ.get("TCOURSE_LEAN_LAUNCH", "1") != "0"
_MODULE: list = []


def module():
    """The compiled C module, or None (switched off, no C compiler, no libcuda, or no Triton build helper)."""
    if not _MODULE:
        _MODULE.append(_build() if ENABLED else None)
    return _MODULE[0]


def _build():
    try:
        from triton.runtime.build import compile_module_from_src

        return compile_module_from_src(src=SOURCE, name="tcourse_lean_launch")
    except Exception:  # noqa: BLE001 - any build or load failure: Triton's own launch stays in use
        return None


def tensor_maps_ready(mod) -> bool:
    """Hand ``mod`` Triton's PyCUtensorMap type (what code 'm' takes); False while Triton has not made it yet
    (its CUDA utilities load with the first kernel), and a kernel with descriptors then keeps Triton's launch."""
    try:
        from triton.backends.nvidia import driver

        if driver.PyCUtensorMap is None:
            return False
        mod.set_tensor_map_type(driver.PyCUtensorMap)
        return True
    except (ImportError, AttributeError, TypeError):
        return False


def expanded_types(signature: dict, tensordesc_meta) -> list | None:
    """The kernel's parameter types as Triton 3.6's launcher passes them: each host tensor descriptor expanded
    (into ``nvTmaDesc``, then its shape as i32 and strides as i64, when it was compiled for TMA; else into a
    base pointer, shape and strides twice and a padding flag), constexprs kept in place. None for a signature
    this module does not handle (tuples)."""
    out, d = [], 0
    for sig in signature.values():
        if not isinstance(sig, str):
            return None
        if not sig.startswith("tensordesc"):
            out.append(sig)
            continue
        meta = tensordesc_meta[d] if tensordesc_meta else None
        d += 1
        match = re.match(r"tensordesc<([^[>]*)\[([^]]*)\]", sig)
        if match is None:
            return None
        ndim = match.group(2).count(",") + 1
        if meta is None:
            out += ["*" + match.group(1), *["i64"] * (2 * ndim), "i1"]
        else:
            out.append("nvTmaDesc")
        out += ["i32"] * ndim + ["i64"] * ndim
    return out


def codes_of(types: list) -> tuple[bytes, list[int]] | None:
    """``(codes, kept)``: one code per non-constexpr parameter, then two for the scratch pointers Triton 3.6
    appends to every kernel's parameters, and the positions (in ``types``) of the parameters passed; None if
    a type has no code here (fp16/bf16 scalars, for instance) or there are too many parameters."""
    codes, kept = [], []
    for i, t in enumerate(types):
        if t == "constexpr":
            continue
        code = "p" if t.startswith("*") else _CODE_OF_TYPE.get(t)
        if code is None:
            return None
        codes.append(code)
        kept.append(i)
    codes += ["p", "p"]  # global_scratch, profile_scratch: null for the kernels planned (none needs scratch)
    return (b"".join(c.encode() for c in codes), kept) if len(codes) <= MAX_PARAMS else None
