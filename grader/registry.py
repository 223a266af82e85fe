"""Every exercise, read from the ``role=grading`` cell of its own source file (see :mod:`grader.spec`).

Adding an exercise means adding one file to ``grader/exercise_src/``: nothing here changes.
"""
from __future__ import annotations

import functools
from pathlib import Path

import torch

from . import source
from .spec import Exercise


class BadExercise(ValueError):
    """An exercise source whose grading cell is missing or does not bind a valid ``EXERCISE``."""


def load(path: Path) -> Exercise:
    cells = source.parse(path)
    ns: dict = {"torch": torch, "__name__": f"grader.exercise_src.{path.stem}"}
    for c in cells:  # the plain-torch spec the learner reads is the grader's reference
        if c.kind == "code" and c.role == "given" and c.id.endswith("-spec"):
            exec(compile(source.render(c.text, True), f"{path.name}:{c.id}", "exec"), ns)
    grading = [c for c in cells if c.role == "grading"]
    if len(grading) != 1:
        raise BadExercise(f"{path.name}: needs exactly one role=grading cell, found {len(grading)}")
    exec(compile(grading[0].text, f"{path.name}:{grading[0].id}", "exec"), ns)
    ex = ns.get("EXERCISE")
    if not isinstance(ex, Exercise):
        raise BadExercise(f"{path.name}: the grading cell must bind EXERCISE = grader.spec.Exercise(...)")
    if not ex.written and (ex.cases is None or ex.reference is None):
        raise BadExercise(f"{path.name}: an auto-graded exercise needs cases and a reference")
    ex.id = path.stem
    return ex


@functools.lru_cache(maxsize=1)
def exercises() -> dict[str, Exercise]:
    return {i: load(source.SRC_DIR / f"{i}.py") for i in source.exercise_ids()}


def get(exercise_id: str) -> Exercise:
    return exercises()[exercise_id]
