"""Where a kernel runs (the interpreter with fixed configs, or a GPU with autotuned configs and Hopper
paths), and how it is launched with as little host (Python) work per call as possible.

Small problems take less GPU time than Triton's own launch path takes on the host, so every
microsecond of Python per call shows up in their timings. Hence: device facts are looked up once per
device, the autotuner runs once per key, and a kernel that has already been launched with the same
argument specialisation is launched again straight from its compiled form (``Launcher``), on Triton 3.6
through a lean C launch of our own where it applies (``_lean_launch``).
"""
from __future__ import annotations

import importlib
import inspect
import os

import torch
import triton

from . import _lean_launch

# The package turns the interpreter on (or not) before the kernels are decorated, so this is fixed
# for the life of the process, like the kernels themselves.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def on_gpu(t: torch.Tensor) -> bool:
    """True when ``t`` lives on a GPU and kernels are compiled (not interpreted)."""
    return t.is_cuda and not INTERPRETED


_CAPABILITY: dict[int, tuple[int, int]] = {}
_SMS: dict[int, int] = {}


def is_hopper(t: torch.Tensor) -> bool:
    if not on_gpu(t):
        return False
    i = t.get_device()
    cap = _CAPABILITY.get(i)
    if cap is None:
        cap = _CAPABILITY[i] = torch.cuda.get_device_capability(i)
    return cap[0] == 9


def num_sms(t: torch.Tensor) -> int:
    i = t.get_device()
    n = _SMS.get(i)
    if n is None:
        n = _SMS[i] = torch.cuda.get_device_properties(i).multi_processor_count
    return n


_GLUON_MODULES: dict = {}


def gluon_module(name: str):
    """The Gluon kernel module ``tcourse.kernels.<name>``, imported on first use, or None where this Triton
    has no Gluon (or not the parts it uses): the public functions then keep to their Triton kernels."""
    if name not in _GLUON_MODULES:
        try:
            _GLUON_MODULES[name] = importlib.import_module(f"{__package__}.{name}")
        except Exception:  # noqa: BLE001 - a Triton without (this) Gluon
            _GLUON_MODULES[name] = None
    return _GLUON_MODULES[name]


def cdiv(a: int, b: int) -> int:
    """``triton.cdiv`` for host code: Triton's is a constexpr function, several microseconds a call."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """``triton.next_power_of_2`` for host code (1 for n <= 1), as a plain Python int operation."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def check_2d(name: str, x: torch.Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} expects a 2-D tensor, got shape {tuple(x.shape)}")


def _triton_version() -> tuple[int, int]:
    try:
        major, minor = triton.__version__.split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return (0, 0)


# The direct launch below calls CompiledKernel.run the way JITFunction.run does in Triton 3.6 to 3.9
# (read in both sources: every bound argument, constexprs included, after grid, stream, function,
# packed metadata, launch metadata and the two launch hooks). Other versions use kernel[grid] only.
DIRECT_LAUNCH = not INTERPRETED and (3, 6) <= _triton_version() < (3, 10)


def _tensor_key(t: torch.Tensor):
    return t.dtype, t.data_ptr() % 16 == 0  # what Triton specialises a pointer on: dtype, 16-byte alignment


def _same_value(v):
    return v  # ints and None: the exact value, finer than Triton's (== 1, % 16, bit width)


def _bool_key(v):
    return bool, v  # not equal to the int 1 or 0 in another launch


def _float_key(v):
    return float  # Triton passes Python floats as fp32 without specialising on the value


def _descriptor_key(d):
    # every field of a host TensorDescriptor in Triton 3.6-3.9 but the base pointer (always 16-byte aligned)
    return (d.base.dtype, tuple(d.shape), tuple(d.strides), tuple(d.block_shape), d.padding,
            getattr(d, "round_f32_to_tf32", False))


def _gluon_descriptor_key(d):
    return (*_descriptor_key(d), d.layout)  # its shared-memory layout too (a frozen, hashable dataclass)


_ARG_KEY = {torch.Tensor: _tensor_key, torch.nn.Parameter: _tensor_key, int: _same_value, bool: _bool_key,
            type(None): _same_value, float: _float_key}

_DESCRIPTORS: tuple = ()  # host TensorDescriptor classes whose CUtensorMaps the raw launch builds
try:
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor

    _ARG_KEY[_TensorDescriptor] = _descriptor_key
    _DESCRIPTORS += (_TensorDescriptor,)
except ImportError:  # pragma: no cover - older triton: no host descriptors, nothing to key
    pass
try:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as _GluonTensorDescriptor

    _ARG_KEY[_GluonTensorDescriptor] = _gluon_descriptor_key
    _DESCRIPTORS += (_GluonTensorDescriptor,)
except ImportError:  # pragma: no cover - a Triton without Gluon
    pass
_MAX_ENTRIES = 4096  # compiled kernels remembered per Launcher before it starts over


def _current_device(driver):
    """The current CUDA device index: torch's C getter (~0.1 us) where it exists, else Triton's
    ``get_current_device`` (``torch.cuda.current_device``, ~0.6 us on the H200's host)."""
    fast = getattr(torch._C, "_cuda_getDevice", None)
    return fast if fast is not None and torch.cuda.is_available() else driver.active.get_current_device


def _raw_c_launch(kernel):
    """``(c_launch, launcher)`` when ``kernel`` (a CompiledKernel) can be launched by calling its C
    launch function directly, else None.

    Triton 3.6's ``CudaLauncher`` (read in its source, triton/backends/nvidia/driver.py) wraps the
    compiled module's ``launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, global_scratch,
    profile_scratch, packed_metadata, launch_metadata, enter_hook, exit_hook, *args)``: a Python
    ``__call__`` that allocates scratch memory (none for our kernels) and, for kernels with host tensor
    descriptors, a closure that turns each descriptor into a CUtensorMap (``fill_tma_descriptor``, a
    driver call) on every launch. Calling ``launch`` directly skips both; we build each CUtensorMap
    once per (address, shape, strides, block) and pass pointers as ints, which the C code takes as
    they are (for an object it calls ``data_ptr()`` and checks the pointer with the driver). Only for
    Triton 3.6: 3.7+ have a different launcher (tests/test_kernels.py checks the results of this path
    on a GPU, descriptor kernels included).
    """
    if not RAW_LAUNCH:
        return None
    launcher = getattr(kernel, "run", None)
    fields = ("launch", "global_scratch_size", "profile_scratch_size", "launch_cooperative_grid", "launch_pdl")
    if type(launcher).__name__ != "CudaLauncher" or not all(hasattr(launcher, f) for f in fields):
        return None
    if launcher.global_scratch_size or launcher.profile_scratch_size:
        return None  # kernels that need scratch memory allocated per launch: Triton's own path
    c_launch = launcher.launch
    if type(c_launch).__name__ != "builtin_function_or_method":  # wrapped for tensor descriptors
        c_launch = inspect.getclosurevars(c_launch).nonlocals.get("launcher")
        if type(c_launch).__name__ != "builtin_function_or_method":
            return None
    return c_launch, launcher


RAW_LAUNCH = not INTERPRETED and _triton_version() == (3, 6) and os.environ.get("TCOURSE_RAW_LAUNCH", "1") != "0"
_MAX_MAPS = 256  # CUtensorMaps remembered per compiled kernel


class _Compiled:
    """One compiled specialisation and the fastest way to launch it again.

    ``c_launch(g0, g1, g2, stream, *lead, *flat, *c_tail)`` is that way where there is one: the lean C
    launch (``_lean_launch``: ``lead`` its head, ``c_tail`` the non-constexpr tail values and the two null
    scratch pointers, ``drop`` the constexpr positions among the positional arguments), else Triton 3.6's
    own C launch function (``lead`` its leading arguments, ``c_tail`` the whole tail)."""

    __slots__ = ("kernel", "tail", "c_launch", "lead", "c_tail", "drop", "desc_meta", "maps", "make_desc_arg",
                 "objects")

    def __init__(self, kernel, tail, args):
        self.kernel, self.tail = kernel, tail
        raw = _raw_c_launch(kernel)
        self.c_launch, self.c_tail, self.drop = None, tail, ()
        if raw is not None:
            self.c_launch, launcher = raw
            self.lead = (kernel.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
                         kernel.packed_metadata, None, None, None)
            self.desc_meta = list(getattr(kernel.metadata, "tensordesc_meta", None) or [])
            self.maps = {}
            from triton.backends.nvidia.driver import make_tensordesc_arg

            self.make_desc_arg = make_tensordesc_arg
            # positions of arguments the raw launch must expand (descriptors) or read (tensor subclasses);
            # fixed for this entry, since the launcher's key holds every argument's type
            self.objects = [i for i, a in enumerate(args) if a.__class__ not in (int, float, bool, type(None),
                                                                                  torch.Tensor)]
            self._go_lean(launcher)

    def _go_lean(self, launcher) -> None:
        """Switch to the lean C launch where it applies: Triton 3.6's signature (descriptors expanded) has a
        code for every parameter, one CTA per program, no cooperative or PDL launch."""
        lean = _lean_launch.module() if RAW_LAUNCH else None
        kernel = self.kernel
        src, meta = getattr(kernel, "src", None), kernel.packed_metadata
        if lean is None or not isinstance(getattr(src, "signature", None), dict) or len(meta) != 3 or meta[1] != 1:
            return
        if launcher.launch_cooperative_grid or launcher.launch_pdl:
            return
        types = _lean_launch.expanded_types(src.signature, self.desc_meta)
        found = _lean_launch.codes_of(types) if types is not None else None
        if found is None:
            return
        codes, kept = found
        if b"m" in codes and not _lean_launch.tensor_maps_ready(lean):
            return
        n_pos = len(types) - len(self.tail)  # the tail is the last len(tail) parameters, as launched
        if n_pos < 0:
            return
        kept = set(kept)
        self.c_tail = (*(v for j, v in enumerate(self.tail) if n_pos + j in kept), 0, 0)
        self.drop = tuple(i for i in range(n_pos) if i not in kept)
        self.lead = (kernel.function, 32 * meta[0], meta[2], codes)
        self.c_launch = lean.launch

    def _desc(self, d, i: int) -> list:
        """The launch arguments a host TensorDescriptor expands to, its CUtensorMap built once."""
        meta = self.desc_meta[i] if i < len(self.desc_meta) else None
        key = (d.base.data_ptr(), tuple(d.shape), tuple(d.strides), d.padding, i)
        found = self.maps.get(key)
        if found is None:
            if len(self.maps) >= _MAX_MAPS:
                self.maps.clear()
            found = self.maps[key] = [a.data_ptr() if isinstance(a, torch.Tensor) else a
                                      for a in self.make_desc_arg(d, meta)]
        return found

    def launch(self, grid, args, flat, stream, hooks):
        """``flat``: ``args`` with every plain tensor replaced by its data pointer."""
        n = len(grid)
        g1, g2 = (grid[1] if n > 1 else 1), (grid[2] if n > 2 else 1)
        kernel = self.kernel
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        # Triton 3.6's hooks are HookChains: the raw launch only while both are empty (a profiler such as
        # Proton adds itself there); a hook of another kind (a plain callable) takes the full path
        if self.c_launch is not None and not getattr(enter, "calls", enter) and not getattr(leave, "calls", leave):
            if self.objects:
                flat = self._expand(flat)
            if self.drop:
                flat = [a for i, a in enumerate(flat) if i not in self.drop]
            if self.c_launch(grid[0], g1, g2, stream, *self.lead, *flat, *self.c_tail) is not False:
                return  # launched (False: the lean launch found no CUDA context on this thread; Triton makes one)
        full = (*args, *self.tail)
        kernel.run(grid[0], g1, g2, stream, kernel.function, kernel.packed_metadata,
                   None if enter is None else kernel.launch_metadata(grid, stream, *full), enter, leave, *full)

    def _expand(self, flat) -> list:
        out, d, last = [], 0, 0
        for i in self.objects:
            out += flat[last:i]
            a = flat[i]
            if a.__class__ in _DESCRIPTORS:
                out += self._desc(a, d)
                d += 1
            else:  # a tensor subclass (nn.Parameter): its pointer
                out.append(a.data_ptr())
            last = i + 1
        out += flat[last:]
        return out


class Launcher:
    """``launcher(grid, args, meta)`` does what ``kernel[grid](*args, **meta)`` does.

    The first launch of each specialisation (meta values, argument dtypes, pointer alignment, integer
    values, current device) goes through ``kernel[grid]``, which compiles or finds the kernel and
    returns it. Later launches with the same specialisation call that compiled kernel directly,
    skipping Triton's per-call argument binding, cache-key string and option parsing; on Triton 3.6
    they call its C launch function itself (``_raw_c_launch``). Arguments of any other type always
    take the ``kernel[grid]`` path. One pass over the arguments gives both the cache key and the
    launch arguments (tensors as data pointers).
    """

    def __init__(self, kernel, direct: bool | None = None):
        self.kernel = kernel
        if direct is None:  # on by default for compiled (not interpreted) kernels on known Triton versions
            direct = DIRECT_LAUNCH and isinstance(kernel, triton.runtime.JITFunction)
        self.direct = direct
        self.params = list(inspect.signature(kernel.fn).parameters.values()) if self.direct else []
        self.compiled: dict = {}
        self._device = self._stream = self._hooks = None

    def _key(self, args, meta, meta_key):
        """``(key, flat)``: the specialisation key (None if an argument cannot be keyed) and ``args``
        with plain tensors replaced by their data pointers."""
        keys, flat = [], []
        try:
            for a in args:
                c = a.__class__
                if c is int:
                    keys.append(a)
                    flat.append(a)
                elif c is torch.Tensor:
                    ptr = a.data_ptr()
                    keys.append((a.dtype, not ptr & 15))  # what Triton specialises a pointer on (see _tensor_key)
                    flat.append(ptr)
                else:
                    keys.append(_ARG_KEY[c](a))
                    flat.append(a)
            return (self._device(), tuple(meta.items()) if meta_key is None else meta_key, tuple(keys)), flat
        except (KeyError, TypeError):  # an argument type we do not key (or an unhashable meta value)
            return None, None

    def _tail(self, n_args: int, meta: dict):
        """Values of the parameters after the positional ones, in signature order (None: cannot tell)."""
        tail = []
        for p in self.params[n_args:]:
            if p.name in meta:
                tail.append(meta[p.name])
            elif p.default is not inspect.Parameter.empty:
                tail.append(p.default)
            else:
                return None
        return tuple(tail)

    def __call__(self, grid: tuple, args: tuple, meta: dict, meta_key=None):
        """``meta_key``: a hashable value that determines ``meta`` (saves hashing ``meta`` every call)."""
        if not self.direct:
            self.kernel[grid](*args, **meta)
            return
        if self._device is None:
            from triton import knobs
            from triton.runtime import driver

            self._device, self._stream = _current_device(driver), driver.active.get_current_stream
            self._hooks = knobs.runtime
        key, flat = self._key(args, meta, meta_key)
        entry = self.compiled.get(key) if key is not None else None
        if entry is None:
            kernel = self.kernel[grid](*args, **meta)
            tail = self._tail(len(args), meta)
            ready = all(hasattr(kernel, a) for a in ("run", "function", "packed_metadata", "launch_metadata"))
            if key is not None and tail is not None and ready and not hasattr(kernel, "result"):
                if len(self.compiled) >= _MAX_ENTRIES:
                    self.compiled.clear()
                self.compiled[key] = _Compiled(kernel, tail, args)
            return
        entry.launch(grid, args, flat, self._stream(key[0]), self._hooks)


def _plan(c_launch, grid: tuple, lead: tuple, rest: tuple, stream, device: int, hooks):
    """One compiled specialisation's C launch with its grid and all but its leading arguments fixed.

    ``plan(*args)`` launches with ``args`` (data pointers as ints, numbers) in front of the fixed rest and
    returns True; while a launch hook is set (a profiler), or where the lean launch finds no CUDA context on
    the calling thread, it launches nothing and returns False, so the caller takes the full path. For the
    public functions whose whole host cost is a few microseconds (AXPY, softmax): the caller keys a plan on
    what fixes the rest (shape, dtype, device, alignment) and skips the per-call config lookup and argument
    keying. A closure, not an object with a ``__call__``: a call reads its fixed parts from cells, which
    costs less host time than attribute lookups (the hooks are read from ``hooks`` on every call, so a
    profiler added later is seen)."""
    g0, g1, g2 = grid

    def plan(*args) -> bool:
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if getattr(enter, "calls", enter) or getattr(leave, "calls", leave):
            return False
        return c_launch(g0, g1, g2, stream(device), *lead, *args, *rest) is not False

    plan.c_launch = c_launch  # for inspection (which launch a plan uses); changing it changes nothing
    return plan


def plan_of(launcher: "Launcher", grid: tuple, args: tuple, meta: dict, meta_key=None, n_lead: int = 0):
    """A plan (``_plan``) for ``launcher(grid, args, meta, meta_key)`` once that call has been launched, with
    ``args[:n_lead]`` left to each call; None where the raw C launch is not available for it. Host tensor
    descriptors among the fixed arguments go in as their CUtensorMaps (built once, for those addresses)."""
    if not launcher.direct or launcher._device is None:
        return None
    key, flat = launcher._key(args, meta, meta_key)
    entry = launcher.compiled.get(key) if key is not None else None
    if entry is None or entry.c_launch is None or (entry.objects and entry.objects[0] < n_lead):
        return None
    if any(i < n_lead for i in entry.drop):
        return None  # a leading argument Triton made a constant: not passed to the lean launch
    if entry.objects:
        flat = entry._expand(flat)
    rest = [a for i, a in enumerate(flat) if i >= n_lead and i not in entry.drop]
    return _plan(entry.c_launch, (*grid, 1, 1)[:3], entry.lead, (*rest, *entry.c_tail), launcher._stream, key[0],
                 launcher._hooks)


_DEVICE_GETTER: list = []


def current_device() -> int:
    """The current CUDA device index, as the Launcher keys it."""
    if not _DEVICE_GETTER:
        from triton.runtime import driver

        _DEVICE_GETTER.append(_current_device(driver))
    return _DEVICE_GETTER[0]()


class Plans(dict):
    """Plans by the caller's key, forgotten all at once past ``limit`` (many shapes: a long-running
    process that sees ever new sizes keeps a bounded table)."""

    def __init__(self, limit: int = 1024):
        super().__init__()
        self.limit = limit

    def add(self, key, plan) -> None:
        if plan is not None:
            if len(self) >= self.limit:
                self.clear()
            self[key] = plan


def gpu_time_of_config(kernel_call, quantiles):
    """The autotuner's timer: [median, p20, p80] ms of GPU time per call (``tcourse.bench.gpu_samples``).

    Triton's default timer (do_bench) counts the host time of the autotuner's own launch path (binding,
    pre-hooks; a bare ``kernel[grid]`` alone took about 11-21 us of host time on the H200: bench.host's
    'triton kernel[grid] (bare)', 10.9-18.7 us in results/h200/issue18/bench_suite_run11..21.json, and
    bare_kernel_launch_host_us 21.4 us in autotune_timer_check.json) whenever a round's host
    time exceeds the GPU time of the L2-clearing memset (~61 us) plus the kernel, so for kernels of
    ~10 us it ranked configs by noise: 1024^3 fp16 matmul configs measured 11-78 us that way and
    10-18 us of GPU time (results/h200/autotune_timer_check.json).
    """
    from tcourse.bench import Timing, gpu_samples

    t = Timing.from_samples(gpu_samples(kernel_call, warmup_ms=10, rep_ms=40))
    return [t.median_ms, t.p20_ms, t.p80_ms]


class Tuned:
    """An autotuned kernel that pays the autotuner's per-call work once per key.

    The first call with a new ``key`` takes the config pinned for this device and key in
    ``tcourse.kernels.pinned_configs`` if there is one, else goes through ``triton.autotune`` (which
    times the configs with :func:`gpu_time_of_config`); every call after that launches the kernel with
    that config through a ``Launcher``. ``key`` must determine the keyword arguments the caller passes
    (block sizes, flags): the merged arguments are cached per key.
    """

    def __init__(self, name: str, kernel, configs, key, prune=None):
        self.name = name
        self.kernel = kernel
        extra = {"prune_configs_by": {"early_config_prune": prune}} if prune else {}
        self.tuner = triton.autotune(configs, key=key, do_bench=gpu_time_of_config, **extra)(kernel)
        self.launcher = Launcher(kernel)
        self.best = {}  # key -> the triton.Config chosen
        self.how = {}  # key -> "pinned" or "autotuned"
        self._meta = {}  # key -> the caller's keyword arguments merged with that config's kwargs and options

    def pinned(self, key, device_name: str):
        """The config pinned for ``key`` on this device, or None."""
        from .pinned_configs import PINNED

        wanted = PINNED.get(device_name, {}).get(self.name, {}).get(key)
        if wanted is None:
            return None
        found = [c for c in self.tuner.configs if all(c.all_kwargs().get(k) == v for k, v in wanted.items())]
        if len(found) != 1:
            raise LookupError(f"{self.name}: pinned config {wanted} matches {len(found)} configs, not one")
        return found[0]

    def launch(self, key, grid, *args, before=None, **kwargs):
        """``grid(meta)`` gives the launch grid; ``before(meta)`` runs before a cached-config launch
        (what a config's pre_hook does during tuning, e.g. setting tensor-descriptor block shapes)."""
        meta = self._meta.get(key)
        if meta is None:
            cfg = self.pinned(key, torch.cuda.get_device_name())
            if cfg is None:
                self.tuner[grid](*args, **kwargs)
                self.best[key], self.how[key] = self.tuner.best_config, "autotuned"
                self._meta[key] = {**kwargs, **self.tuner.best_config.all_kwargs()}
                return
            self.best[key], self.how[key] = cfg, "pinned"
            meta = self._meta[key] = {**kwargs, **cfg.all_kwargs()}
        if before is not None:
            before(meta)
        self.launcher(grid(meta), args, meta, key)

    def plan(self, key, grid, *args, n_lead: int):
        """After ``launch(key, grid, *args, ...)``: a plan of that launch taking ``args[:n_lead]`` per call."""
        meta = self._meta.get(key)
        return None if meta is None else plan_of(self.launcher, grid(meta), args, meta, key, n_lead)
