"""Temporary alias while notebooks move to ``tcourse.compile_info`` (which now carries the fix)."""
from .compile_info import compile_for_sm90, real_compiler  # noqa: F401
