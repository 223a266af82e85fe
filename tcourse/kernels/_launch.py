"""Where a kernel runs: the interpreter (fixed configs), or a GPU (autotuned configs, Hopper paths)."""
from __future__ import annotations

import os

import torch


def interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def on_gpu(t: torch.Tensor) -> bool:
    """True when ``t`` lives on a GPU and kernels are compiled (not interpreted)."""
    return t.is_cuda and not interpreted()


def is_hopper(t: torch.Tensor) -> bool:
    return on_gpu(t) and torch.cuda.get_device_capability(t.device)[0] == 9


def num_sms(t: torch.Tensor) -> int:
    return torch.cuda.get_device_properties(t.device).multi_processor_count


def check_2d(name: str, x: torch.Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"{name} expects a 2-D tensor, got shape {tuple(x.shape)}")


class Tuned:
    """An autotuned kernel that pays the autotuner's per-call work once per key.

    The first call with a new ``key`` goes through ``triton.autotune`` (which benchmarks the configs);
    later calls launch the plain kernel with the config it chose. That keeps Python's launch cost
    (tens of microseconds on the H200's host) under the GPU time of small problems.
    """

    def __init__(self, kernel, configs, key, prune=None):
        import triton

        self.kernel = kernel
        extra = {"prune_configs_by": {"early_config_prune": prune}} if prune else {}
        self.tuner = triton.autotune(configs, key=key, **extra)(kernel)
        self.best = {}

    def launch(self, key, grid, *args, before=None, **kwargs):
        """``grid(meta)`` gives the launch grid; ``before(meta)`` runs before a cached-config launch
        (what a config's pre_hook does during tuning, e.g. setting tensor-descriptor block shapes)."""
        cfg = self.best.get(key)
        if cfg is None:
            self.tuner[grid](*args, **kwargs)
            self.best[key] = self.tuner.best_config
            return
        meta = {**kwargs, **cfg.all_kwargs()}
        if before is not None:
            before(meta)
        self.kernel[grid(meta)](*args, **meta)
