"""Installed versions against the ranges in requirements.txt (the ranges CI tests)."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"
SHOWN = ("torch", "triton", "numpy", "matplotlib", "ipywidgets", "nbclient", "nbformat")


def parse(v: str) -> Version:
    """Version without local tags (``2.13.0+cpu`` -> ``2.13.0``); unparsable -> 0."""
    try:
        return Version(v.split("+")[0])
    except InvalidVersion:
        return Version("0")


def installed(names=SHOWN) -> dict[str, str]:
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def ranges(path: Path = REQUIREMENTS) -> dict[str, Requirement]:
    reqs = {}
    if not path.exists():  # installed without the repo beside it: nothing to compare against
        return reqs
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            r = Requirement(line)
            reqs[r.name.lower()] = r
    return reqs


def out_of_range(v: dict[str, str], path: Path = REQUIREMENTS) -> list[str]:
    out = []
    for name, req in ranges(path).items():
        have = v.get(name)
        if have is None or have == "not installed":
            continue
        if not req.specifier.contains(parse(have), prereleases=True):
            out.append(f"{name} {have} 不在测试过的版本范围 {req.specifier} 内（requirements.txt）")
    return out
