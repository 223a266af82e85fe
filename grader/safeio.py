"""Reading files the grader does not trust: a submission, or what a student's process or the replayer wrote.

Every such file is opened without following a symbolic link, must be a regular file (no FIFO, no
device, no directory), is read up to a size cap, and JSON is parsed only after its nesting depth is
checked (a 100 000-deep array would otherwise exhaust the recursion limit). Each refusal is an
:class:`Untrusted` error with one line that says what was wrong.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np

MAX_JSON_DEPTH = 64


class Untrusted(ValueError):
    """A file that is not a plain, bounded file of the expected kind."""


def read_bytes(path: Path, cap: int) -> bytes:
    """The bytes of a regular file of at most ``cap`` bytes (symbolic links, FIFOs, devices refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == 40:  # ELOOP: the last component is a symbolic link
            raise Untrusted(f"{path.name} is a symbolic link, not a file") from None
        raise Untrusted(f"cannot open {path.name}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode) or
                    stat.S_ISBLK(st.st_mode) else "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file")
            raise Untrusted(f"{path.name} is {kind}, not a regular file")
        if st.st_size > cap:
            raise Untrusted(f"{path.name} has {st.st_size} bytes, more than the {cap} allowed")
        chunks, left = [], cap + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > cap:
            raise Untrusted(f"{path.name} grew past {cap} bytes while being read")
        return data
    finally:
        os.close(fd)


def check_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than ``limit`` (counted over brackets outside strings)."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                raise Untrusted(f"JSON nested more than {limit} levels deep")
        elif ch in "]}":
            depth -= 1


def load_json(path: Path, cap: int, depth: int = MAX_JSON_DEPTH):
    raw = read_bytes(path, cap)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Untrusted(f"{path.name} is not UTF-8 text") from None
    check_depth(text, depth)
    try:
        return json.loads(text)
    except ValueError as e:
        raise Untrusted(f"{path.name} is not valid JSON ({str(e)[:80]})") from None


def load_npy(path: Path, cap: int, dtype=None, shape=None) -> np.ndarray:
    """An ``.npy`` array (no pickles) of the expected dtype and shape when given."""
    import io

    raw = read_bytes(path, cap)
    try:
        arr = np.load(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise Untrusted(f"{path.name} is not a .npy array ({str(e)[:80]})") from None
    if not isinstance(arr, np.ndarray):
        raise Untrusted(f"{path.name} is not a single array")
    if dtype is not None and arr.dtype != np.dtype(dtype):
        raise Untrusted(f"{path.name} has dtype {arr.dtype}, expected {np.dtype(dtype)}")
    if shape is not None and tuple(arr.shape) != tuple(shape):
        raise Untrusted(f"{path.name} has shape {tuple(arr.shape)}, expected {tuple(shape)}")
    return arr
